"""Which service runs each trial: pools of replicas from given endpoints, running containers or embedded processes.

A *pool* serves one or more methods: the methods routed to the same explicit endpoint name
(method or family), or all methods of a family otherwise. Its replicas are the endpoints given
for that name (``--endpoint gnn=a --endpoint gnn=b``), the family's running containers, or up to
``replicas`` embedded processes started on demand. A trial holds one replica for its whole
fit/predict/release, so a replica runs one trial at a time and the time and memory it reports
belong to that trial alone.

Faults: an embedded replica that stops answering is restarted; a remote one is waited for
(a few health checks with back-off) and dropped from its pool when it does not come back. That
recovery runs in the background (``lost``), so the trial that met the dead replica runs again on
whichever replica is free first: an idle sibling at once, the recovered replica only when no
sibling is idle before it is back. Once every replica of a pool is down, its trials are recorded
``unavailable`` at once (a rerun retries them) and the sweep goes on with the other pools.

Replicas behind a DNS name (``--endpoint gnn=dns:///gnn:50051``: a Swarm dnsrr service, a
Kubernetes headless Service) are resolved when the pool is made, again when it runs out of live
replicas (a restarted task comes back at a new address), and every few seconds while every replica
is busy, so replicas that appear join the pool.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from contract.errors import UserError
from contract.families import Family, family_of, load_families
from contract.security import Security
from orchestrator.services.client import MethodClient, Replica, ServiceNotReady, ServiceUnavailable
from orchestrator.services.discovery import DiscoveryError, is_dns_target, resolve_replicas
from orchestrator.services.embedded import EmbeddedService, EmbeddedServices

HEALTH_TIMEOUT_S = 10.0
EMBEDDED_HEALTH_TIMEOUT_S = 60.0
RECOVERY_ATTEMPTS = 3  # health checks of a remote replica that stopped answering, before it is dropped
RECOVERY_TIMEOUT_S = 15.0  # total wait over those attempts
MAX_START_FAILURES = 2  # embedded starts that may fail in a row before a pool is given up
RESOLVE_INTERVAL_S = 10.0  # how often a DNS-named pool looks for replicas that appeared


class Directory:
    """Where each method's services are: replicas to run trials on, able to recover a dead one.

    ``on_ready`` (set by the sweep) is called with every replica that comes up, before it runs a trial
    (a directory that has no replicas of its own, only ``client``, never calls it).

    A minimal directory implements ``client`` and ``recover``: each trial then runs on
    ``client(method)`` (one service; run such a sweep with ``parallel=1``) and ``recover`` is
    given the replica wrapping that client.
    """

    on_ready: Callable[[Replica], None] | None = None

    def pool_key(self, method: str) -> str:
        """Which replicas serve the method: methods of one key start (and are described) one after another, those
        of different keys at once. A minimal directory has one key for all, so it is asked one method at a time."""
        return ""

    def client(self, method: str) -> MethodClient:
        """A client of one of the method's services (for Describe)."""
        raise NotImplementedError

    def acquire(self, method: str) -> Replica:
        """Hold a replica for one trial (blocks while all are busy); ServiceUnavailable when none is left."""
        client = self.client(method)
        return Replica(
            pool=method, family="", endpoint=client.endpoint, client=client, source="remote", methods=(method,)
        )

    def release(self, replica: Replica) -> None:
        """Hand a replica back after its trial."""

    def recover(self, replica: Replica) -> bool:
        """Try to bring a replica back after it stopped answering."""
        raise NotImplementedError

    def lost(self, replica: Replica) -> None:
        """The trial holding ``replica`` found it down (or left computing): recover it, then hand it back.

        Here in the calling thread; ServiceDirectory does it in the background, so the trial's retry
        can take a sibling meanwhile.
        """
        try:
            self.recover(replica)
        finally:
            self.release(replica)


class UnknownMethod(LookupError, UserError):
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


def timestamp() -> str:
    """Now, in UTC to the millisecond (ISO 8601): when a replica started, when a trial started and ended."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass
class _Pool:
    key: str
    family: str
    methods: tuple[str, ...]
    remote: list[str] | None  # None: embedded processes
    capacity: int
    targets: tuple[str, ...] = ()  # dns:///NAME:PORT targets whose addresses join ``remote``
    resolved_at: float = 0.0
    replicas: list[Replica] = field(default_factory=list)
    starting: int = 0
    start_failures: int = 0

    def live(self) -> list[Replica]:
        return [r for r in self.replicas if not r.down]

    def exhausted(self) -> bool:
        if self.remote is not None:
            unused = len(self.remote) - len(self.replicas)
            return unused <= 0 and not self.live() and self.starting == 0
        return self.start_failures >= MAX_START_FAILURES and not self.live() and self.starting == 0


class ServiceDirectory(Directory):
    """Replica pools per method. Explicit endpoints (method or family name -> host:port, or a list of
    them) win, then discovered containers, then embedded subprocesses (started on first use, up to
    ``replicas`` per family, restartable)."""

    def __init__(
        self,
        methods: dict[str, Family],
        endpoints: Mapping[str, str | Sequence[str]] | None = None,
        containers: dict[str, list[str]] | None = None,
        embedded: EmbeddedServices | None = None,
        replicas: int = 1,
    ) -> None:
        self.methods = methods
        self.endpoints = {
            name: [value] if isinstance(value, str) else list(value) for name, value in (endpoints or {}).items()
        }
        self.containers = containers or {}
        self.embedded = embedded
        self.replicas = max(1, int(replicas))
        self.recovery_attempts = RECOVERY_ATTEMPTS
        self.recovery_timeout = RECOVERY_TIMEOUT_S
        self.resolve_interval = RESOLVE_INTERVAL_S
        self._cond = threading.Condition()
        self._pools: dict[str, _Pool] = {}
        self._clients: list[MethodClient] = []
        self._closing = False

    # ---- routing ---------------------------------------------------------

    def _remote(self, method: str) -> tuple[str, list[str]] | None:
        family = self.methods[method].name
        if method in self.endpoints:
            return method, self.endpoints[method]
        if family in self.endpoints:
            return family, self.endpoints[family]
        if self.containers.get(family):
            return family, list(self.containers[family])
        return None

    def pool_key(self, method: str) -> str:
        remote = self._remote(method)
        return remote[0] if remote else self.methods[method].name

    def _pool(self, method: str) -> _Pool:
        with self._cond:
            key = self.pool_key(method)
            pool = self._pools.get(key)
            if pool is None:
                remote = self._remote(method)
                if remote is None and self.embedded is None:
                    raise ServiceUnavailable(f"no endpoint for {method!r} and embedded services are off")
                routed = tuple(m for m in self.methods if self.pool_key(m) == key)
                targets = tuple(a for a in remote[1] if is_dns_target(a)) if remote else ()
                endpoints = list(dict.fromkeys(a for a in remote[1] if not is_dns_target(a))) if remote else None
                capacity = len(endpoints) if endpoints is not None else self.replicas
                pool = _Pool(key, self.methods[method].name, routed, endpoints, capacity, targets)
                self._pools[key] = pool
                self._resolve(pool)
            return pool

    def _resolve(self, pool: _Pool) -> bool:
        """Add the addresses now behind the pool's DNS names (replicas that appeared); whether any was new.

        Called with the lock held: when the pool is made, when it runs out of live replicas, and at most
        every ``resolve_interval`` seconds while all its replicas are busy.
        """
        if not pool.targets or pool.remote is None:
            return False
        pool.resolved_at = time.monotonic()
        fresh = [a for target in pool.targets for a in resolve_replicas(target) if a not in pool.remote]
        pool.remote.extend(dict.fromkeys(fresh))
        pool.capacity = len(pool.remote)
        return bool(fresh)

    # ---- replicas --------------------------------------------------------

    def acquire(self, method: str) -> Replica:
        """A free replica for the method (waiting while all are busy, starting one while below capacity)."""
        pool = self._pool(method)
        with self._cond:
            while True:
                if self._closing:  # the sweep is ending (finished or interrupted): nothing more is handed out
                    raise ServiceUnavailable(f"the sweep is ending; {method} was not run")
                if pool.exhausted() and not self._resolve_quietly(pool):
                    raise ServiceUnavailable(self._gone_message(pool))
                free = next((r for r in pool.live() if not r.busy), None)
                if free is not None:
                    free.busy = True
                    return free
                if pool.targets and time.monotonic() - pool.resolved_at > self.resolve_interval:
                    self._resolve_quietly(pool)
                if len(pool.live()) + pool.starting < pool.capacity and (
                    pool.remote is None or len(pool.replicas) + pool.starting < len(pool.remote)
                ):
                    pool.starting += 1
                    slot = len(pool.replicas) + pool.starting - 1
                    break
                self._cond.wait(timeout=self.resolve_interval if pool.targets else None)
        try:
            replica = self._create(pool, slot)
        except BaseException:
            with self._cond:
                pool.starting -= 1
                if pool.remote is None:
                    pool.start_failures += 1
                else:  # count the endpoint as tried, so later trials do not dial it again
                    dead = MethodClient(pool.remote[slot])
                    self._clients.append(dead)
                    pool.replicas.append(
                        Replica(
                            pool.key, pool.family, pool.remote[slot], dead, "remote", methods=pool.methods, down=True
                        )
                    )
                self._cond.notify_all()
            raise
        with self._cond:
            pool.starting -= 1
            pool.start_failures = 0
            replica.busy = True
            pool.replicas.append(replica)
            self._cond.notify_all()
        return replica

    def _resolve_quietly(self, pool: _Pool) -> bool:
        try:
            return self._resolve(pool)
        except DiscoveryError:
            return False  # the name vanished for now (all tasks restarting): keep what is known

    def release(self, replica: Replica) -> None:
        with self._cond:
            replica.busy = False
            self._cond.notify_all()

    def client(self, method: str) -> MethodClient:
        """A client of some replica of the method's pool (for Describe, which needs no exclusive use)."""
        pool = self._pool(method)
        with self._cond:
            live = pool.live()
            if live:
                return live[0].client
        replica = self.acquire(method)
        self.release(replica)
        return replica.client

    def _create(self, pool: _Pool, slot: int) -> Replica:
        if pool.remote is not None:
            endpoint = pool.remote[slot]
            client = MethodClient(endpoint)
            self._clients.append(client)
            client.wait_healthy(HEALTH_TIMEOUT_S)
            replica = Replica(
                pool.key, pool.family, endpoint, client, "remote", methods=pool.methods, started_at=timestamp()
            )
        else:
            assert self.embedded is not None
            service, adopted = self._embedded_service(pool)
            replica = self._embedded_replica(pool, service)
            if adopted:
                return replica  # already started and warmed by an earlier directory
        self._ready(replica)
        return replica

    def _embedded_service(self, pool: _Pool) -> tuple[EmbeddedService, bool]:
        """A running embedded process of the family not yet in this pool (left by an earlier sweep), or a new one."""
        assert self.embedded is not None
        with self._cond:
            used = {id(r.service) for r in pool.replicas}
            for service in self.embedded.replicas.get(pool.family, []):
                if id(service) not in used and service.alive() and service.endpoint:
                    return service, True
        return self.embedded.start(pool.family), False

    def _embedded_replica(self, pool: _Pool, service: EmbeddedService) -> Replica:
        started = time.perf_counter()
        # a loopback child started without TLS settings, which takes graphs handed over in its directory
        client = MethodClient(service.endpoint, Security(), graph_dir=service.graph_dir)
        self._clients.append(client)
        client.wait_healthy(EMBEDDED_HEALTH_TIMEOUT_S)
        return Replica(
            pool.key,
            pool.family,
            service.endpoint,
            client,
            "embedded",
            methods=pool.methods,
            service=service,
            start_seconds=service.start_seconds + (time.perf_counter() - started),
            started_at=service.started_at,
            pid=service.pid,
        )

    def _ready(self, replica: Replica) -> None:
        hook = self.on_ready
        if hook is not None:
            hook(replica)

    def recover(self, replica: Replica) -> bool:
        """Bring a replica back after it stopped answering: restart it (embedded) or wait for it (remote).

        Called by the trial that holds the replica. Returns whether it serves again; one that does
        not is marked down and no longer handed out. Once the directory is closing nothing is restarted or waited for.
        """
        if self._closing:
            with self._cond:
                replica.down = True
                self._cond.notify_all()
            return False
        if replica.source == "embedded" and self.embedded is not None:
            try:
                fresh = self.embedded.restart(replica.service)
                restarted = self._embedded_replica(self._pools[replica.pool], fresh)
            except ServiceUnavailable:
                with self._cond:
                    replica.down = True
                    self._cond.notify_all()
                return False
            old_client = replica.client
            with self._cond:
                for name in ("endpoint", "client", "service", "start_seconds", "started_at", "pid"):
                    setattr(replica, name, getattr(restarted, name))
            if old_client in self._clients:
                self._clients.remove(old_client)
            old_client.close()
            if not self._closing:  # a restart that finished after the sweep: nothing left to warm up or record
                self._ready(replica)
            return True
        per_try = self.recovery_timeout / max(1, self.recovery_attempts)
        for attempt in range(self.recovery_attempts):
            try:
                replica.client.wait_healthy(per_try)
                return True
            except ServiceUnavailable:
                time.sleep(min(1.0, 0.1 * 2**attempt))
        with self._cond:
            replica.down = True
            self._cond.notify_all()
        return False

    def lost(self, replica: Replica) -> None:
        """Recover ``replica`` in the background; it stays held (handed to no trial) until it is back or down."""
        threading.Thread(
            target=self._recover_and_release, args=(replica,), name=f"recover-{replica.pool}", daemon=True
        ).start()

    def _recover_and_release(self, replica: Replica) -> None:
        try:
            self.recover(replica)
        except Exception:  # recover marks what it cannot bring back as down; anything else must not kill the sweep
            with self._cond:
                replica.down = True
        finally:
            self.release(replica)

    def _gone_message(self, pool: _Pool) -> str:
        if pool.remote is not None:
            return f"the service(s) for {pool.key} at {', '.join(pool.remote)} stopped answering; skipping its trials"
        return f"the embedded {pool.family} service could not be started; skipping its trials"

    def check_remote(self) -> None:
        """Fail fast, before any work, when a given endpoint does not answer or is not ready.

        Every replica is dialled.
        """
        not_ready = []
        for method in self.methods:
            remote = self._remote(method)
            if remote is None:
                continue
            pool = self._pool(method)
            held = []
            try:
                while len(pool.replicas) + pool.starting < len(pool.remote or []):
                    held.append(self.acquire(method))
            except ServiceNotReady as exc:
                not_ready.append(exc)
            finally:
                for replica in held:
                    self.release(replica)
        if not_ready:
            raise ServiceNotReady.combine(not_ready)

    def all_replicas(self) -> list[Replica]:
        with self._cond:
            return [r for pool in self._pools.values() for r in pool.replicas]

    def close(self) -> None:
        """Close every channel, which cancels the calls in flight on them (an interrupted sweep's fits end now, not
        at their end); a trial waiting for a replica is told the sweep is ending; recoveries still in flight end on
        their own (their services are stopped with the embedded services)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        for client in list(self._clients):
            client.close()
        self._clients.clear()


def log_dir(store: Path) -> Path:
    return store.parent / f"{store.stem}-services"
