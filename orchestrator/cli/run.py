"""`orchestrator run` and `orchestrator show`: run a sweep, print its selected results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.console import Console

from orchestrator.cli.errors import UserError, user_errors
from orchestrator.cli.options import EndpointOpt, ServicesOpt, SweepFlags, csv_items, flag_groups
from orchestrator.cli.progress import sweep_with_progress
from orchestrator.cli.services import open_sweep
from orchestrator.data.registry import resolve_name
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
from orchestrator.store import partial_note, read_services

console = Console(stderr=True)
FAILED_EXIT = 1  # the sweep finished, but some trial of this run ended other than ok, oom or timeout
SHARD_HELP = (
    "Run only shard I of N (I/N, 0-based): whole cells in contiguous runs of the plan order (`orchestrator plan` "
    "lists them); the store records the plan, so `merge` can tell when every shard is complete."
)


@user_errors
@flag_groups
def run(
    sweep: SweepFlags,
    store: Annotated[Path, typer.Option(help="SQLite run store; created if missing, resumed if present.")] = Path(
        "runs.sqlite"
    ),
    endpoint: EndpointOpt = [],  # noqa: B006
    services: ServicesOpt = "auto",
    parallel: Annotated[
        int,
        typer.Option(
            help=(
                "Trials in flight at once, each on its own service replica (embedded: up to N processes per family; "
                "remote: one per --endpoint given). 0: as many as the most replicas found for one of the sweep's "
                "families (containers, --endpoint), else one one-thread service per core (one with a GPU)."
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
    plan = sweep.plan(shard or "0/1")
    with open_sweep(plan, store, endpoint, services, parallel, warmup, record_plan=shard is not None) as running:
        records = sweep_with_progress(running)
        frame = this_run(running.store.frame(), [t.key for t in running.planned_trials()])
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


def this_run(frame: pd.DataFrame, planned: list[str]) -> pd.DataFrame:
    """The store's trials that this run planned (its shard's), by trial key: not the rest of the store."""
    return frame[frame["trial_key"].isin(set(planned))]


def _filtered(frame: pd.DataFrame, methods: str | None, datasets: str | None, regimes: str | None) -> pd.DataFrame:
    """``frame`` limited to the comma-separated names given (dataset aliases resolve as for `run`)."""
    for column, value in (("method", methods), ("dataset", datasets), ("regime", regimes)):
        if value is None:
            continue
        names = csv_items(value, f"{column}s")
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
