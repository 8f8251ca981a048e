"""Which endpoint serves each method: given endpoints, running containers, or embedded processes."""

from __future__ import annotations

from pathlib import Path

from methods.families import Family, family_of, load_families
from orchestrator.services.client import MethodClient, ServiceUnavailable
from orchestrator.services.embedded import EmbeddedServices
from orchestrator.sweep import Directory

HEALTH_TIMEOUT_S = 10.0
RECOVERY_TIMEOUT_S = 15.0


class UnknownMethod(LookupError):
    pass


def resolve_methods(names: list[str], families: dict[str, Family] | None = None) -> dict[str, Family]:
    """Map each method name to its family; UnknownMethod names the typo and what exists."""
    families = families or load_families()
    resolved = {}
    for name in names:
        family = family_of(name, families)
        if family is None:
            known = sorted(m for f in families.values() for m in f.methods)
            raise UnknownMethod(f"unknown method {name!r}; known methods: {', '.join(known)}")
        resolved[name] = family
    return resolved


class ServiceDirectory(Directory):
    """Clients per method. Explicit endpoints (method or family name -> host:port) win, then
    discovered containers, then embedded subprocesses (started on first use, restartable)."""

    def __init__(
        self,
        methods: dict[str, Family],
        endpoints: dict[str, str] | None = None,
        containers: dict[str, list[str]] | None = None,
        embedded: EmbeddedServices | None = None,
    ) -> None:
        self.methods = methods
        self.endpoints = dict(endpoints or {})
        self.containers = containers or {}
        self.embedded = embedded
        self._clients: dict[str, MethodClient] = {}
        self._down: set[str] = set()  # remote endpoints given up on after a failed recovery

    def _remote(self, method: str) -> str | None:
        family = self.methods[method].name
        if method in self.endpoints:
            return self.endpoints[method]
        if family in self.endpoints:
            return self.endpoints[family]
        if self.containers.get(family):
            return self.containers[family][0]
        return None

    def client(self, method: str) -> MethodClient:
        endpoint = self._remote(method)
        if endpoint is None:
            if self.embedded is None:
                raise ServiceUnavailable(f"no endpoint for {method!r} and embedded services are off")
            endpoint = self.embedded.endpoint(self.methods[method].name)
        if endpoint in self._down:
            raise ServiceUnavailable(f"the service at {endpoint} stopped answering; skipping its trials")
        client = self._clients.get(endpoint)
        if client is None:
            client = MethodClient(endpoint)
            client.wait_healthy(HEALTH_TIMEOUT_S if self._remote(method) else 60.0)
            self._clients[endpoint] = client
        return client

    def recover(self, method: str) -> bool:
        endpoint = self._remote(method)
        if endpoint is None and self.embedded is not None:
            stale = self.embedded.services.get(self.methods[method].name)
            if stale is not None:
                self._clients.pop(stale.endpoint, None)
            self.embedded.restart(self.methods[method].name)
            return True
        client = self._clients.get(endpoint) if endpoint else None
        if client is None:
            return False
        try:
            client.wait_healthy(RECOVERY_TIMEOUT_S)
            return True
        except ServiceUnavailable:
            self._down.add(client.endpoint)
            return False

    def check_remote(self) -> None:
        """Fail fast, before any work, when a given endpoint does not answer."""
        for method in self.methods:
            if self._remote(method) is not None:
                self.client(method)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()


def log_dir(store: Path) -> Path:
    return store.parent / f"{store.stem}-services"
