"""Find the method-family services this checkout started as Docker containers.

Every method container carries the labels ``nodeground.family=<family>`` and
``nodeground.port=<container port>`` (50051) and publishes that port on a
host port bound to 127.0.0.1 (see ``docker/services.py``). The containers
`make up` starts also carry ``nodeground.checkout=<checkout_id()>``, the
checkout whose compose file started them, and ``nodeground.version``, the
family's version in that checkout. This module asks the Docker engine,
through the Docker SDK, for running containers with those labels and returns
the host addresses to dial: only this checkout's, because another checkout's
or another user's containers on the same host run other code and other
weights, and may stop at any time. Those are counted and left alone
(``--endpoint`` still reaches any service).

It never raises because Docker is missing: no SDK, no engine, a refused
socket or an API error all mean "no containers", so the orchestrator can
fall back to its embedded local services. It raises ContainerMismatch when
this checkout's containers run another version of a family than the
checkout holds (started before a `git pull`, say).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contract.descriptions import read_description
from contract.families import Family
from contract.handshake import FAMILY_LABEL, PORT_LABEL, SERVICE_PORT

log = logging.getLogger(__name__)
# What `validate` and `submit` put on the containers they sandbox: a method under test, never a
# service a sweep may use, so discovery passes over them without a word.
SANDBOX_LABEL = "nodeground.sandbox"
CHECKOUT_LABEL = "nodeground.checkout"
VERSION_LABEL = "nodeground.version"
# Swarm puts it on every task container: a task is reached on its overlay network
# (--endpoint FAMILY=dns:///FAMILY:50051), never on a published port.
SWARM_TASK_LABEL = "com.docker.swarm.task.id"
CHECKOUT = Path(__file__).resolve().parents[2]

# Host IPs that mean "all interfaces": dial them on loopback.
_ANY_HOST = {"", "0.0.0.0", "::", "[::]"}


def checkout_id(root: Path = CHECKOUT) -> str:
    """The name of what a checkout starts: its compose project, its Swarm stack, its ``nodeground.checkout`` label.

    Derived from the checkout's path, so two clones on one host (or two users) never share or see each
    other's containers: ``ng-<folder>-<8 hex of the path's sha256>``, lowercase letters, digits and dashes
    (what compose v1 and v2 accept as a project name, and Swarm as a stack name).
    """
    path = root.resolve()
    folder = re.sub(r"[^a-z0-9]+", "-", path.name.lower()).strip("-")[:24].strip("-")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    return f"ng-{folder}-{digest}" if folder else f"ng-{digest}"


def family_version(family: Family) -> str:
    """The version a family's containers must run: the method versions of its committed description, joined
    by ``+`` when they differ; empty for a family without one (its service describes it)."""
    specs = read_description(family)
    return "+".join(sorted({spec.version for spec in specs.values()})) if specs else ""


class ContainerMismatch(ValueError):
    """This checkout's containers run another version of a family than the checkout holds."""


@dataclass(frozen=True)
class Discovered:
    """The containers a sweep uses, and what it passed over."""

    checkout: str
    endpoints: dict[str, list[str]] = field(default_factory=dict)  # family -> sorted host addresses
    versions: dict[str, str] = field(default_factory=dict)  # family -> the version its containers run
    foreign: dict[str, int] = field(default_factory=dict)  # family -> containers of other checkouts, ignored

    def summary(self) -> str | None:
        """The one line a sweep prints about containers; None when there are none to speak of."""
        if not self.endpoints and not self.foreign:
            return None
        used = sum(len(addresses) for addresses in self.endpoints.values())
        families = ", ".join(
            f"{name} {self.versions[name] or '(no version)'}" + (f" x{len(addresses)}" if len(addresses) > 1 else "")
            for name, addresses in self.endpoints.items()
        )
        line = f"using {_count(used, 'container')} of this checkout (project {self.checkout})" + (
            f": {families}" if families else ""
        )
        if self.foreign:
            ignored = sum(self.foreign.values())
            line += (
                f"; ignored {_count(ignored, 'container')} of other checkouts ({', '.join(sorted(self.foreign))}; "
                "--endpoint FAMILY=HOST:PORT uses any service)"
            )
        return line


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}" if n else f"no {noun}s"


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


def discovered(containers: list[Any], families: Mapping[str, Family], checkout: str) -> Discovered:
    """Which of ``containers`` (docker SDK ``Container``-like) serve ``families`` for the checkout ``checkout``.

    Another checkout's containers (or ones without the label, started by hand or before it existed) are
    counted, never used. ContainerMismatch (one line) when this checkout's run another version than it holds.
    """
    found: dict[str, set[str]] = {}
    versions: dict[str, set[str]] = {}
    foreign: dict[str, int] = {}
    for c in containers:
        try:
            attrs = c.attrs or {}
            labels = (attrs.get("Config") or {}).get("Labels") or getattr(c, "labels", None) or {}
            family = str(labels.get(FAMILY_LABEL))
            if family not in families or SANDBOX_LABEL in labels or SWARM_TASK_LABEL in labels:
                continue
            state = (attrs.get("State") or {}).get("Status") or getattr(c, "status", "running")
            if state != "running":
                continue
            if labels.get(CHECKOUT_LABEL) != checkout:
                foreign[family] = foreign.get(family, 0) + 1
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
            versions.setdefault(family, set()).add(str(labels.get(VERSION_LABEL) or ""))
        except Exception as exc:  # a malformed container must not hide the others
            log.warning("skipping container %r: %s", getattr(c, "name", c), exc)
    local = {name: family_version(families[name]) for name in found}
    stale = {name: sorted(running) for name, running in sorted(versions.items()) if running != {local[name]}}
    if stale:
        shown = ", ".join(
            f"{name} {' and '.join(v or '(no version)' for v in running)} (this checkout: {local[name] or 'none'})"
            for name, running in stale.items()
        )
        raise ContainerMismatch(
            f"this checkout's containers (project {checkout}) run other versions than it holds: {shown}; restart "
            f'them with `make up FAMILIES="{" ".join(stale)}"`, or name a service with --endpoint FAMILY=HOST:PORT'
        )
    return Discovered(
        checkout,
        {name: sorted(addrs) for name, addrs in sorted(found.items())},
        {name: local[name] for name in sorted(found)},
        dict(sorted(foreign.items())),
    )


def discover_containers(
    families: Mapping[str, Family],
    checkout: str | None = None,
    client_factory: Callable[[], Any] | None = None,
    timeout: float = 5.0,
) -> Discovered:
    """This checkout's running method containers of ``families`` (name -> Family), as ``discovered`` sorts them.

    Nothing found when the docker package is not installed, no engine answers, or no labelled container
    runs. ``checkout`` defaults to this checkout's ``checkout_id()``; ``client_factory`` (a zero-argument
    callable returning a docker-SDK-like client) exists for tests.
    """
    client = None
    containers: list[Any] = []
    try:
        client = client_factory() if client_factory is not None else _docker_client(timeout)
        containers = client.containers.list(filters={"label": FAMILY_LABEL, "status": "running"})
    except Exception as exc:  # ImportError, DockerException, requests errors, ...
        log.debug("no Docker method containers: %s", exc)
    finally:
        close = getattr(client, "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                pass
    return discovered(containers, families, checkout or checkout_id())
