"""Replicas behind one DNS name: what a Docker Swarm service with ``endpoint_mode: dnsrr`` or a
Kubernetes headless Service gives, a name that resolves to every replica's address.

The protocol is stateful (a graph and the models fitted on it live in one replica), so a
balancing channel that sends HasGraph, UploadGraph and Fit to different replicas cannot be used;
instead the name is resolved here and each address becomes a replica of its own, one channel each.
"""

from __future__ import annotations

import socket

DNS_SCHEME = "dns:///"


class DiscoveryError(ValueError):
    """A ``dns:///NAME:PORT`` target that is malformed or resolves to nothing."""


def is_dns_target(address: str) -> bool:
    return address.startswith(DNS_SCHEME)


def split_target(target: str) -> tuple[str, int]:
    """``dns:///NAME:PORT`` -> (NAME, PORT); DiscoveryError naming the expected form otherwise."""
    name, colon, port = target[len(DNS_SCHEME) :].rpartition(":")
    if not is_dns_target(target) or not colon or not name or not port.isdigit():
        raise DiscoveryError(f"a DNS endpoint must look like dns:///NAME:PORT, got {target!r}")
    return name, int(port)


def resolve_replicas(target: str) -> list[str]:
    """``dns:///NAME:PORT`` -> ``["ip:port", ...]``, one per address the name resolves to, sorted.

    IPv4 addresses when there are any (what Swarm and Kubernetes cluster DNS return), else IPv6.
    """
    name, port = split_target(target)
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise DiscoveryError(f"{target}: the name {name!r} does not resolve ({exc.strerror})") from None
    v4 = sorted({info[4][0] for info in infos if info[0] == socket.AF_INET})
    v6 = sorted({info[4][0] for info in infos if info[0] == socket.AF_INET6})
    addresses = v4 or [f"[{a}]" for a in v6]
    if not addresses:
        raise DiscoveryError(f"{target}: the name {name!r} resolves to no address")
    return [f"{a}:{port}" for a in addresses]
