"""Find method-family services running as Docker containers.

Every method container carries the labels ``nodeground.family=<family>`` and
``nodeground.port=<container port>`` (50051) and publishes that port on a
host port bound to 127.0.0.1 (see ``docker/compose.yaml``). This module asks
the Docker engine, through the Docker SDK, for running containers with those
labels and returns the host addresses to dial.

It never raises because Docker is missing: no SDK, no engine, a refused
socket or an API error all mean "no containers" (an empty dict), so the
orchestrator can fall back to its embedded local services.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from contract.handshake import FAMILY_LABEL, PORT_LABEL, SERVICE_PORT

log = logging.getLogger(__name__)
# What `validate` and `submit` put on the containers they sandbox: a method under test, never a
# service a sweep may use, so discovery passes over them without a word.
SANDBOX_LABEL = "nodeground.sandbox"

# Host IPs that mean "all interfaces": dial them on loopback.
_ANY_HOST = {"", "0.0.0.0", "::", "[::]"}


def _docker_client(timeout: float) -> Any:
    import docker  # optional at import time of this module

    return docker.from_env(timeout=timeout)


def _host_addresses(bindings: Any) -> list[str]:
    """``[{'HostIp': '127.0.0.1', 'HostPort': '49153'}, ...]`` -> ``['127.0.0.1:49153']``.

    IPv4 bindings win over IPv6 duplicates of the same host port.
    """
    out: list[str] = []
    seen_ports: set[str] = set()
    for b in sorted(bindings or [], key=lambda b: ":" in str(b.get("HostIp", ""))):
        port = str(b.get("HostPort") or "").strip()
        if not port or port in seen_ports:
            continue
        host = str(b.get("HostIp") or "").strip()
        if host in _ANY_HOST:
            host = "127.0.0.1"
        elif ":" in host:
            host = f"[{host}]"
        seen_ports.add(port)
        out.append(f"{host}:{port}")
    return out


def endpoints_from_containers(containers: list[Any]) -> dict[str, list[str]]:
    """Map container objects (docker SDK ``Container``-like) to family -> endpoints."""
    found: dict[str, set[str]] = {}
    for c in containers:
        try:
            attrs = c.attrs or {}
            labels = (attrs.get("Config") or {}).get("Labels") or getattr(c, "labels", None) or {}
            family = labels.get(FAMILY_LABEL)
            if not family or SANDBOX_LABEL in labels:
                continue
            state = (attrs.get("State") or {}).get("Status") or getattr(c, "status", "running")
            if state != "running":
                continue
            port = str(labels.get(PORT_LABEL) or SERVICE_PORT).strip()
            ports = (attrs.get("NetworkSettings") or {}).get("Ports") or {}
            bindings = ports.get(f"{port}/tcp") if "/" not in port else ports.get(port)
            addrs = _host_addresses(bindings)
            if not addrs:
                log.warning(
                    "container %s (family %s) does not publish port %s; skipped",
                    getattr(c, "name", "?"),
                    family,
                    port,
                )
                continue
            found.setdefault(family, set()).update(addrs)
        except Exception as exc:  # a malformed container must not hide the others
            log.warning("skipping container %r: %s", getattr(c, "name", c), exc)
    return {fam: sorted(addrs) for fam, addrs in sorted(found.items())}


def discover_endpoints(client_factory: Callable[[], Any] | None = None, timeout: float = 5.0) -> dict[str, list[str]]:
    """Running NodeGround method containers: ``{family: ["127.0.0.1:PORT", ...]}``.

    Returns ``{}`` when the docker package is not installed, no engine answers,
    or no labelled container runs. ``client_factory`` (a zero-argument callable
    returning a docker-SDK-like client) exists for tests.
    """
    client = None
    try:
        client = client_factory() if client_factory is not None else _docker_client(timeout)
        containers = client.containers.list(filters={"label": FAMILY_LABEL, "status": "running"})
        return endpoints_from_containers(containers)
    except Exception as exc:  # ImportError, DockerException, requests errors, ...
        log.debug("no Docker method containers: %s", exc)
        return {}
    finally:
        close = getattr(client, "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                pass
