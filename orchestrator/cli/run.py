"""`orchestrator run` and `orchestrator show`: run a sweep, print its selected results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from orchestrator.cli.errors import UserError, user_errors
from orchestrator.data.registry import resolve_name
from orchestrator.data.splits import ALL_REGIMES, SPLIT_INDICES
from orchestrator.records import STATUS_OK, TrialRecord
from orchestrator.results import selected_results, results_table
from orchestrator.services.containers import discover_endpoints
from orchestrator.services.directory import ServiceDirectory, log_dir, resolve_methods
from orchestrator.services.embedded import EmbeddedServices
from orchestrator.store import Store, read_trials
from orchestrator.sweep import Progress as SweepProgress
from orchestrator.sweep import Sweep, SweepPlan

console = Console(stderr=True)


def _csv(value: str, what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise UserError(f"--{what} is empty")
    return items


def parse_splits(value: str) -> list[int]:
    try:
        splits = [int(v) for v in _csv(value, "splits")]
    except ValueError:
        raise UserError(f"--splits must be comma-separated integers, got {value!r}") from None
    bad = [s for s in splits if s not in SPLIT_INDICES]
    if bad:
        raise UserError(f"split index {bad[0]} is outside 0..{SPLIT_INDICES[-1]}")
    return splits


def parse_endpoints(values: list[str]) -> dict[str, str]:
    endpoints = {}
    for value in values:
        name, sep, address = value.partition("=")
        host, colon, port = address.rpartition(":")
        if not sep or not name or not colon or not host or not port.isdigit():
            raise UserError(f"--endpoint must look like NAME=HOST:PORT (NAME a method or family), got {value!r}")
        endpoints[name.strip()] = address.strip()
    return endpoints


@user_errors
def run(
    methods: Annotated[str, typer.Option(help="Comma-separated method names, e.g. mlp,gcn.")],
    datasets: Annotated[str, typer.Option(help="Comma-separated dataset names, e.g. synthetic-homophilous,cora.")],
    regimes: Annotated[str, typer.Option(help=f"Comma-separated label regimes: {', '.join(ALL_REGIMES)} (public = the split the source publishes).")] = "10/10/80",
    splits: Annotated[str, typer.Option(help="Comma-separated split indices (0-4).")] = "0",
    budget: Annotated[int, typer.Option(help="Trials per (method, dataset, regime, split): the default config plus budget-1 sampled ones.")] = 1,
    store: Annotated[Path, typer.Option(help="SQLite run store; created if missing, resumed if present.")] = Path("runs.sqlite"),
    endpoint: Annotated[list[str], typer.Option(help="Use a running service: METHOD_OR_FAMILY=HOST:PORT (repeatable).")] = [],  # noqa: B006
    services: Annotated[str, typer.Option(help="Where services come from when no --endpoint names them: auto (containers if running, else local processes), embedded, docker.")] = "auto",
    time_limit: Annotated[float, typer.Option(help="Per-trial fit time limit in seconds (0 = none).")] = 0.0,
) -> None:
    """Run a sweep: every method on every dataset, regime and split, `budget` trials each."""
    if budget < 1:
        raise UserError(f"--budget must be at least 1 (the default configuration), got {budget}")
    if time_limit < 0:
        raise UserError(f"--time-limit must be >= 0, got {time_limit}")
    if services not in ("auto", "embedded", "docker"):
        raise UserError(f"--services must be auto, embedded or docker, got {services!r}")
    method_names = _csv(methods, "methods")
    dataset_names = [resolve_name(d) for d in _csv(datasets, "datasets")]
    regime_names = _csv(regimes, "regimes")
    for regime in regime_names:
        if regime not in ALL_REGIMES:
            raise UserError(f"unknown regime {regime!r}; choose from {', '.join(ALL_REGIMES)}")
    plan = SweepPlan(
        methods=tuple(method_names),
        datasets=tuple(dataset_names),
        regimes=tuple(regime_names),
        splits=tuple(parse_splits(splits)),
        budget=budget,
        time_limit=time_limit or None,
    )
    families = resolve_methods(method_names)
    containers = discover_endpoints() if services in ("auto", "docker") else {}
    if services == "docker":
        missing = sorted({f.name for f in families.values()} - set(containers))
        if missing and not parse_endpoints(endpoint):
            raise UserError(f"--services docker: no running container for {', '.join(missing)}; start them with `make up`")
    with EmbeddedServices(log_dir=log_dir(store)) as embedded, Store(store) as run_store:
        directory = ServiceDirectory(
            families,
            endpoints=parse_endpoints(endpoint),
            containers=containers,
            embedded=None if services == "docker" else embedded,
        )
        try:
            directory.check_remote()
            _run_with_progress(Sweep(plan, run_store, directory))
        finally:
            directory.close()
        frame = run_store.frame()
    print_results(frame)


def _run_with_progress(sweep: Sweep) -> None:
    failed = 0
    with Progress(
        TextColumn("[bold]sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    ) as bar:
        task = bar.add_task("sweep", total=None, failed=0)

        def on_trial(record: TrialRecord) -> None:
            nonlocal failed
            failed += record.status != STATUS_OK
            bar.update(task, advance=1, failed=failed)

        sweep.progress = SweepProgress(
            on_total=lambda total: bar.update(task, total=total),
            on_skip=lambda count: bar.update(task, advance=count),
            on_trial=on_trial,
        )
        sweep.run()


@user_errors
def show(
    store: Annotated[Path, typer.Option(help="SQLite run store written by `orchestrator run`.")] = Path("runs.sqlite"),
) -> None:
    """Print the selected (lowest validation loss) trial per method, dataset, regime and split."""
    frame = read_trials(store)
    if frame.empty:
        raise UserError(f"{store} holds no trials yet")
    print_results(frame)


def print_results(frame) -> None:
    Console(width=160).print(results_table(selected_results(frame)))
