"""The services a command's sweeps run against (given endpoints, running containers, else embedded processes) and
its claimed store: shared by `run`, `calibrate`, `reference build` and the planners."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from contract.descriptions import MethodSpec
from contract.handshake import DEVICE_ENV
from orchestrator.cli.errors import UserError
from orchestrator.cli.options import parse_endpoints
from orchestrator.plan import SweepPlan, described_specs
from orchestrator.services.containers import discover_containers
from orchestrator.services.directory import ServiceDirectory, log_dir, resolve_methods
from orchestrator.services.discovery import DiscoveryError, is_dns_target, resolve_replicas
from orchestrator.services.embedded import EmbeddedServices, default_parallel, service_threads
from orchestrator.services.gpus import visible_gpus
from orchestrator.store import Store
from orchestrator.sweep import Sweep

MAX_PARALLEL = 1024
console = Console(stderr=True)


def replicas_found(names: set[str], endpoints: dict[str, list[str]]) -> int:
    """The default --parallel where services run already: the most replicas found for one of ``names`` (e.g. `make up
    GPU=1` on 4 GPUs: 4), else 1 (local services: ``default_parallel``).

    A DNS target counts as the addresses it resolves to now (a Swarm service with 3 tasks: 3).
    """
    return max([sum(_addresses(a) for a in found) for name, found in endpoints.items() if name in names] or [1])


def _addresses(endpoint: str) -> int:
    if not is_dns_target(endpoint):
        return 1
    try:
        return len(resolve_replicas(endpoint))
    except DiscoveryError:
        return 1  # not resolvable yet: the directory will say so, or find them later


def local_gpus() -> int:
    """The GPUs local services would compute on: none where NODEGROUND_DEVICE names the CPU."""
    return 0 if os.environ.get(DEVICE_ENV, "").startswith("cpu") else len(visible_gpus())


@dataclass
class Services:
    """The services a sweep runs against (given endpoints, running containers, else embedded processes) and its
    claimed store; several sweeps may run on one (the cost probe runs one per graph)."""

    directory: ServiceDirectory
    store: Store
    parallel: int
    described: dict[str, MethodSpec]
    _checked: bool = False  # the given endpoints were dialled (by the first sweep, which warms them up)

    def sweep(self, plan: SweepPlan, warmup: bool, record_plan: bool = False) -> Sweep:
        """A sweep of ``plan`` on these services, prepared: refusals (plan, services not ready) come now."""
        sweep = Sweep(
            plan,
            self.store,
            self.directory,
            parallel=self.parallel,
            warmup="all" if warmup else "none",
            record_plan=record_plan,
            described={m: s for m, s in self.described.items() if m in plan.methods},
        )
        if not self._checked:
            self.directory.check_remote()
            self._checked = True
        sweep.prepare()
        return sweep


@contextlib.contextmanager
def open_services(
    methods: tuple[str, ...], store: Path, endpoint: list[str], services: str, parallel: int
) -> Iterator[Services]:
    """The services for ``methods`` (given endpoints, running containers, else embedded processes) and the store."""
    if not 0 <= parallel <= MAX_PARALLEL:
        raise UserError(f"--parallel must be between 0 (one per replica found) and {MAX_PARALLEL}, got {parallel}")
    if services not in ("auto", "embedded", "docker"):
        raise UserError(f"--services must be auto, embedded or docker, got {services!r}")
    families = resolve_methods(list(methods))
    endpoints = parse_endpoints(endpoint)
    containers: dict[str, list[str]] = {}
    if services in ("auto", "docker"):
        found = discover_containers(
            {f.name: f for m, f in families.items() if not named_by_endpoint(m, families, endpoints)}
        )
        if (line := found.summary()) is not None:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        containers = found.endpoints
    if services == "docker":
        missing = sorted({f.name for f in families.values()} - set(containers))
        if missing and not endpoints:
            raise UserError(
                f"--services docker: no running container of this checkout for {', '.join(missing)}; start them "
                "with `make up`"
            )
    if parallel == 0:
        names = set(methods) | {f.name for f in families.values()}
        remote = {name: found for name, found in (containers | endpoints).items() if name in names}
        parallel = replicas_found(names, remote) if remote else default_parallel(local_gpus())
    threads = service_threads(parallel)
    with EmbeddedServices(log_dir=log_dir(store), threads=threads) as embedded, Store(store) as run_store:
        run_store.claim()  # before any service starts: a second orchestrator is refused at once
        directory = ServiceDirectory(
            families,
            endpoints=endpoints,
            containers=containers,
            embedded=None if services == "docker" else embedded,
            replicas=parallel,
        )
        try:
            described = described_specs([m for m in methods if not named_by_endpoint(m, families, endpoints)], families)
            yield Services(directory, run_store, parallel, described)
        finally:
            directory.close()


@contextlib.contextmanager
def open_sweep(
    plan: SweepPlan,
    store: Path,
    endpoint: list[str],
    services: str,
    parallel: int,
    warmup: bool,
    record_plan: bool = False,
) -> Iterator[Sweep]:
    """A sweep wired to its services (given endpoints, running containers, else embedded processes) and store."""
    with open_services(plan.methods, store, endpoint, services, parallel) as found:
        yield found.sweep(plan, warmup, record_plan)


def named_by_endpoint(method: str, families: dict, endpoints: dict[str, list[str]]) -> bool:
    """Whether ``--endpoint`` names the method's service (by method or family): its Describe then plans the method.

    The user chose that service, so its version and search space are the ones that run; every other
    method is planned from its family's committed description, and the service must agree with it.
    """
    return method in endpoints or families[method].name in endpoints
