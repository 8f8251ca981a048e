"""`orchestrator run` and `orchestrator show`: run a sweep, print its selected results."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.console import Console

from contract.descriptions import MethodSpec
from orchestrator.cli.errors import UserError, user_errors
from orchestrator.cli.progress import run_with_progress
from orchestrator.data.registry import is_available, resolve_name, tasks
from orchestrator.data.splits import ALL_REGIMES, SPLIT_INDICES
from orchestrator.plan import DEFAULT_TIME_LIMIT_S, MAX_TIME_LIMIT_S, SweepPlan, described_specs
from orchestrator.protocols import LITE, Protocol, protocol_named
from orchestrator.records import TrialRecord
from orchestrator.results import (
    failures,
    failures_table,
    read_shown,
    results_table,
    selected_results,
    selected_with_workflow,
    services_table,
    summarize,
    summary_table,
    workflow_table,
)
from orchestrator.services.containers import discover_containers
from orchestrator.services.directory import ServiceDirectory, log_dir, resolve_methods
from orchestrator.services.discovery import DiscoveryError, is_dns_target, resolve_replicas, split_target
from orchestrator.services.embedded import EmbeddedServices, service_threads
from orchestrator.store import Store, partial_note, read_services
from orchestrator.sweep import Progress as SweepProgress
from orchestrator.sweep import Sweep

console = Console(stderr=True)
MAX_BUDGET = 10_000  # trials per cell; the protocol uses 201
MAX_PARALLEL = 1024
ALL_DATASETS = "all"  # --datasets all: the whole catalog (the protocol)
FAILED_EXIT = 1  # the sweep finished, but some trial of this run ended other than ok, oom or timeout
TIME_LIMIT_HELP = (
    "Time limit of each fit and each predict, in seconds (a stored timeout under a smaller limit is retried)."
)


def _csv(value: str, what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise UserError(f"--{what} is empty")
    return items


def check_count(flag: str, value: int, high: int) -> int:
    """An integer flag between 1 and ``high``; UserError (one line) otherwise."""
    if not 1 <= value <= high:
        raise UserError(f"--{flag} must be between 1 and {high}, got {value}")
    return value


def check_time_limit(value: float) -> float:
    """A time limit in seconds: finite, positive, at most MAX_TIME_LIMIT_S."""
    if not (math.isfinite(value) and 0 < value <= MAX_TIME_LIMIT_S):
        raise UserError(f"--time-limit must be a number of seconds in (0, {MAX_TIME_LIMIT_S:.0f}], got {value}")
    return value


def parse_splits(value: str) -> list[int]:
    try:
        splits = [int(v) for v in _csv(value, "splits")]
    except ValueError:
        raise UserError(f"--splits must be comma-separated integers, got {value!r}") from None
    bad = [s for s in splits if s not in SPLIT_INDICES]
    if bad:
        raise UserError(f"split index {bad[0]} is outside 0..{SPLIT_INDICES[-1]}")
    return splits


def parse_shard(value: str) -> tuple[int, int]:
    """``I/N`` (0 <= I < N) as (I, N)."""
    index, sep, count = value.partition("/")
    if not sep or not index.strip().isdigit() or not count.strip().isdigit() or not 0 <= int(index) < int(count):
        raise UserError(f"--shard must look like I/N with 0 <= I < N (e.g. 0/3), got {value!r}")
    return int(index), int(count)


def parse_endpoints(values: list[str]) -> dict[str, list[str]]:
    """``NAME=HOST:PORT`` or ``NAME=dns:///HOST:PORT`` values; a name given several times gets several
    replicas, and a DNS target stands for every address behind it (resolved by the directory)."""
    endpoints: dict[str, list[str]] = {}
    for value in values:
        name, sep, address = value.partition("=")
        name, address = name.strip(), address.strip()
        host, colon, port = address.rpartition(":")
        if not sep or not name or not colon or not host or not port.isdigit():
            raise UserError(
                "--endpoint must look like NAME=HOST:PORT or NAME=dns:///HOST:PORT (NAME a method or family), got "
                f"{value!r}"
            )
        if is_dns_target(address):
            try:
                split_target(address)
            except DiscoveryError as exc:
                raise UserError(str(exc)) from None
        known = endpoints.setdefault(name, [])
        if address not in known:
            known.append(address)
    return endpoints


def parse_regimes(value: str) -> list[str]:
    """Comma-separated label regimes, each one of ALL_REGIMES."""
    names = _csv(value, "regimes")
    bad = [r for r in names if r not in ALL_REGIMES]
    if bad:
        raise UserError(f"unknown regime {bad[0]!r}; choose from {', '.join(ALL_REGIMES)}")
    return names


def parse_datasets(value: str) -> list[str]:
    """Comma-separated dataset names or aliases as catalog names; ``all`` is the whole catalog (the protocol)."""
    if value.strip() == ALL_DATASETS:
        return [t["name"] for t in tasks()]
    return [resolve_name(d) for d in _csv(value, "datasets")]


DEFAULT_REGIMES, DEFAULT_SPLITS, DEFAULT_BUDGET = "10/10/80", "0", 1  # without a --protocol
PROTOCOL_HELP = (
    "A named protocol (paper: both regimes, splits 0-4, budget 201, the catalog; lite: both regimes, split 0, "
    f"budget {LITE.budget}, every catalog task this machine can load): its datasets, regimes, splits and budget for "
    "each of those flags not given."
)
ProtocolOpt = Annotated[str | None, typer.Option(help=PROTOCOL_HELP)]
DatasetsOpt = Annotated[
    str | None,
    typer.Option(help="Comma-separated dataset names, e.g. synthetic-homophilous,cora; all = the catalog (default: "
                 "the --protocol's)."),
]  # fmt: skip
RegimesOpt = Annotated[
    str | None,
    typer.Option(help=f"Comma-separated label regimes: {', '.join(ALL_REGIMES)} (public = the split the source "
                 f"publishes; default: {DEFAULT_REGIMES}, or the --protocol's)."),
]  # fmt: skip
SplitsOpt = Annotated[
    str | None,
    typer.Option(help=f"Comma-separated split indices (0-4; default: {DEFAULT_SPLITS}, or the --protocol's)."),
]
BudgetOpt = Annotated[
    int | None,
    typer.Option(help="Trials per (method, dataset, regime, split): the default config plus budget-1 sampled ones "
                 f"(default: {DEFAULT_BUDGET}, or the --protocol's)."),
]  # fmt: skip


def protocol_datasets(protocol: Protocol) -> str:
    """A protocol's datasets as a --datasets value: the catalog, or the catalog tasks this machine can load now."""
    if protocol.datasets == "catalog":
        return ALL_DATASETS
    loadable = [t["name"] for t in tasks() if is_available(t)]
    if not loadable:
        raise UserError(
            f"--protocol {protocol.name}: no catalog task loads on this machine (none processed in the cache, none in "
            "NODEGROUND_MIRROR); name --datasets to download them"
        )
    return ",".join(loadable)


def build_plan(
    methods: str | None,
    datasets: str | None,
    regimes: str | None,
    splits: str | None,
    budget: int | None,
    time_limit: float,
    shard: str = "0/1",
    protocol: str | None = None,
) -> SweepPlan:
    """The sweep the flags describe, every value checked before any service starts.

    ``methods`` None leaves them to the caller (`submit`: every method the image hosts). A flag not given (None)
    takes the ``protocol``'s value, else the default of a sweep without one; a sweep needs its datasets named.
    """
    try:
        named = protocol_named(protocol) if protocol is not None else None
    except ValueError as exc:
        raise UserError(f"--protocol: {exc}") from None
    if datasets is None:
        if named is None:
            raise UserError("--datasets is required (or --protocol, whose datasets it names)")
        datasets = protocol_datasets(named)
    budget = budget if budget is not None else named.budget if named else DEFAULT_BUDGET
    check_count("budget", budget, MAX_BUDGET)
    check_time_limit(time_limit)
    return SweepPlan(
        methods=() if methods is None else tuple(_csv(methods, "methods")),
        datasets=tuple(parse_datasets(datasets)),
        regimes=tuple(parse_regimes(regimes or (",".join(named.regimes) if named else DEFAULT_REGIMES))),
        splits=tuple(parse_splits(splits or (",".join(map(str, named.splits)) if named else DEFAULT_SPLITS))),
        budget=budget,
        time_limit=time_limit,
        shard=parse_shard(shard),
        protocol=named.name if named else None,
    )


def replicas_found(names: set[str], endpoints: dict[str, list[str]]) -> int:
    """The default --parallel: the most replicas found for one of ``names`` (e.g. `make up GPU=1` on 4 GPUs: 4), else 1.

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
        parallel = replicas_found(set(methods) | {f.name for f in families.values()}, containers | endpoints)
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


ENDPOINT_HELP = (
    "Use a running service: METHOD_OR_FAMILY=HOST:PORT, or =dns:///NAME:PORT for every replica behind a DNS name "
    "(repeatable; several addresses give several replicas)."
)
SERVICES_HELP = (
    "Where services come from when no --endpoint names them: auto (containers if running, else local processes), "
    "embedded, docker."
)
SHARD_HELP = (
    "Run only shard I of N (I/N, 0-based): whole cells in contiguous runs of the plan order (`orchestrator plan` "
    "lists them); the store records the plan, so `merge` can tell when every shard is complete."
)


@user_errors
def run(
    methods: Annotated[str, typer.Option(help="Comma-separated method names, e.g. mlp,gcn.")],
    datasets: DatasetsOpt = None,
    regimes: RegimesOpt = None,
    splits: SplitsOpt = None,
    budget: BudgetOpt = None,
    protocol: ProtocolOpt = None,
    store: Annotated[Path, typer.Option(help="SQLite run store; created if missing, resumed if present.")] = Path(
        "runs.sqlite"
    ),
    endpoint: Annotated[list[str], typer.Option(help=ENDPOINT_HELP)] = [],  # noqa: B006
    services: Annotated[str, typer.Option(help=SERVICES_HELP)] = "auto",
    time_limit: Annotated[float, typer.Option(help=TIME_LIMIT_HELP)] = DEFAULT_TIME_LIMIT_S,
    parallel: Annotated[
        int,
        typer.Option(
            help=(
                "Trials in flight at once, each on its own service replica (embedded: up to N processes per family; "
                "remote: one per --endpoint given). 0: as many as the most replicas found for one of the sweep's "
                "families (containers, --endpoint), else 1."
            )
        ),
    ] = 0,
    warmup: Annotated[
        bool,
        typer.Option(
            help=(
                "Warm every service up with one tiny fit+predict per method before its first trial (recorded apart in "
                "the store's services table)."
            )
        ),
    ] = True,
    shard: Annotated[str | None, typer.Option(help=SHARD_HELP)] = None,
) -> None:
    """Run a sweep: every method on every dataset, regime and split, `budget` trials each.

    Exits 0 when every trial of this run ended ok, oom or timeout; 1 (after a summary of what
    failed and why) when any ended failed, nonfinite or unavailable; 2 on bad input or when a
    service is not ready (nothing runs then).
    """
    plan = build_plan(methods, datasets, regimes, splits, budget, time_limit, shard or "0/1", protocol)
    with open_sweep(plan, store, endpoint, services, parallel, warmup, record_plan=shard is not None) as sweep:
        records = sweep_with_progress(sweep)
        frame = this_run(sweep.store.frame(), [t.key for t in sweep.planned_trials()])
    print_results(frame)
    if not report_failures(records):
        raise typer.Exit(FAILED_EXIT)


def report_failures(records: list[TrialRecord]) -> bool:
    """Print what did not succeed in this run, grouped; whether every trial ended ok, oom or timeout."""
    grouped = failures(records)
    if grouped.empty:
        return True
    Console(stderr=True, width=200).print(failures_table(grouped))
    return False


def sweep_with_progress(sweep: Sweep) -> list[TrialRecord]:
    """Run the sweep, its progress drawn on stderr (a bar on a terminal, plain lines otherwise)."""

    def run(hooks: SweepProgress) -> list[TrialRecord]:
        sweep.progress = hooks
        return sweep.run()

    return run_with_progress(run, console)


def this_run(frame: pd.DataFrame, planned: list[str]) -> pd.DataFrame:
    """The store's trials that this run planned (its shard's), by trial key: not the rest of the store."""
    return frame[frame["trial_key"].isin(set(planned))]


def _filtered(frame: pd.DataFrame, methods: str | None, datasets: str | None, regimes: str | None) -> pd.DataFrame:
    """``frame`` limited to the comma-separated names given (dataset aliases resolve as for `run`)."""
    for column, value in (("method", methods), ("dataset", datasets), ("regime", regimes)):
        if value is None:
            continue
        names = _csv(value, f"{column}s")
        if column == "dataset":
            names = [resolve_name(n) if n not in set(frame["dataset"]) else n for n in names]
        unknown = sorted(set(names) - set(frame[column]))
        if unknown:
            held = ", ".join(sorted(set(frame[column].astype(str))))
            raise UserError(f"--{column}s: the store holds no trial of {', '.join(unknown)} (it holds: {held})")
        frame = frame[frame[column].isin(names)]
    return frame


@user_errors
def show(
    store: Annotated[Path, typer.Option(help="SQLite run store written by `orchestrator run`.")] = Path("runs.sqlite"),
    workflow: Annotated[
        bool,
        typer.Option(
            "--workflow",
            help=(
                "Show each cell's workflow cost (tuning, prediction, workflow time, peak memory) and service warm-up "
                "instead."
            ),
        ),
    ] = False,
    summary: Annotated[
        bool,
        typer.Option(
            "--summary",
            help="Per method, dataset and regime: mean ± std of the primary test metric over splits, "
            "the selected trial per split, and why a split has none.",
        ),
    ] = False,
    methods: Annotated[str | None, typer.Option(help="Only these methods (comma-separated).")] = None,
    datasets: Annotated[str | None, typer.Option(help="Only these datasets (comma-separated).")] = None,
    regimes: Annotated[str | None, typer.Option(help="Only these regimes (comma-separated).")] = None,
) -> None:
    """Print the selected (lowest validation loss) trial per method, dataset, regime and split."""
    if workflow and summary:
        raise UserError("give --workflow or --summary, not both")
    frame = read_shown(store, costs=workflow)
    if frame.empty:
        raise UserError(f"{store} holds no trials yet (other than the cost probe's)")
    partial = partial_note(store)
    if partial:
        console.print(f"note: {partial}", markup=False)
    frame = _filtered(frame, methods, datasets, regimes)
    if summary:
        Console(width=200).print(summary_table(summarize(frame)))
        return
    if workflow:
        out = Console(width=200)
        out.print(workflow_table(selected_with_workflow(frame)))
        services_frame = read_services(store)
        if not services_frame.empty:
            out.print(services_table(services_frame))
        return
    print_results(frame)


def print_results(frame) -> None:
    Console(width=160).print(results_table(selected_results(frame)))
