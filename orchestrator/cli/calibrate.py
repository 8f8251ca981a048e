"""`orchestrator calibrate`: the cost probe on this machine, so that `plan --estimate` can price graphs of any size."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from orchestrator.cli.errors import UserError, user_errors
from orchestrator.cli.options import EndpointOpt, ServicesOpt, parse_endpoints
from orchestrator.cli.progress import cpu_seconds, sweep_with_progress
from orchestrator.cli.services import open_services
from orchestrator.cli.specs import plan_specs
from orchestrator.plan import SweepPlan
from orchestrator.price import (
    GFM_SECONDS,
    PROBE_GRAPHS,
    SUPERVISED_SECONDS,
    ProbeProgress,
    calibrate,
    calibration_store,
    methods_to_probe,
)
from orchestrator.services.client import ServiceNotReady
from orchestrator.services.directory import resolve_methods
from orchestrator.store import read_trial_columns

PROBE_COLUMNS = ("method", "dataset", "status", "fit_service_s", "predict_service_s")


def run_probe(methods: Sequence[str], store: Path, endpoint: list[str], services: str) -> list[ProbeProgress]:
    """Probe ``methods`` into ``store`` (resuming what it holds), one graph after another, each step's sweep with its
    progress; a store that holds every step says so in one line and starts nothing."""
    methods = tuple(dict.fromkeys(methods))
    specs = plan_specs(methods, parse_endpoints(endpoint))
    families = {m: f for m, f in resolve_methods(list(methods)).items()}
    err = Console(stderr=True)

    def stored() -> pd.DataFrame:
        return read_trial_columns(store, PROBE_COLUMNS) if store.exists() else pd.DataFrame(columns=PROBE_COLUMNS)

    def say(text: str) -> None:
        err.print(text, markup=False, highlight=False, soft_wrap=True)

    todo = methods_to_probe(specs, families, stored)
    if not todo:
        say(
            f"calibration: this machine's cost probe ({store}) is up to date for {', '.join(methods)}: nothing to probe"
        )
        return calibrate(specs, families, lambda plan: {}, stored)  # no step is left: the table from the records
    say(
        f"calibration: probing {', '.join(todo)} on this machine into {store} (at most {SUPERVISED_SECONDS:g} s of "
        f"service time per supervised method, {GFM_SECONDS:g} s per GFM; a rerun resumes)"
    )
    with open_services(methods, store, endpoint, services, 0) as found:

        def run_step(plan: SweepPlan) -> dict[str, str]:
            """Run one step; the methods whose service is not ready (weights) are left out and named."""
            left_out: dict[str, str] = {}
            methods = plan.methods
            while methods:
                try:
                    sweep = found.sweep(SweepPlan(**{**vars(plan), "methods": methods}), warmup=True)
                except ServiceNotReady as exc:
                    refused = {m for m, _, _ in exc.not_ready}
                    left_out |= {m: str(exc) for m in refused}
                    methods = tuple(m for m in methods if m not in refused)
                    if not refused:
                        raise
                    continue
                sweep_with_progress(sweep, stores=[store])
                break
            return left_out

        def on_step(graph, progress: list[ProbeProgress]) -> None:
            done = [p for p in progress if graph.name in p.graphs]
            line = ", ".join(f"{p.method} {p.spent:,.0f}/{p.budget:g} s" for p in done)
            say(f"calibration: {graph.name} done ({line})")

        return calibrate(specs, families, run_step, stored, on_step)


def progress_table(progress: list[ProbeProgress]) -> Table:
    table = Table(title=f"cost probe: {len(PROBE_GRAPHS)} graphs of 500 to 128,000 nodes, largest probed first")
    for column in ("method", "graphs", "largest probed", "service s", "budget s", "stopped"):
        table.add_column(column, justify="right" if column in ("graphs", "service s", "budget s") else "left")
    for p in progress:
        table.add_row(
            p.method,
            str(len(p.graphs)),
            p.graphs[-1] if p.graphs else "-",
            f"{p.spent:,.1f}",
            f"{p.budget:g}",
            p.stopped,
        )
    return table


@user_errors
def calibrate_command(
    methods: Annotated[str, typer.Option(help="Comma-separated methods to probe (each needs its service).")],
    store: Annotated[
        Path | None,
        typer.Option(help="The probe's store (default: this machine's, $NODEGROUND_CACHE/calibration.sqlite)."),
    ] = None,
    endpoint: EndpointOpt = [],  # noqa: B006
    services: ServicesOpt = "auto",
) -> None:
    """Time each method on synthetic graphs of growing size (the cost probe), for `plan --estimate` on this hardware.

    A supervised method's probe takes about 36 s of service time at most, a GFM's 120 s (orchestrator/calibrate.py);
    a rerun resumes what the store holds. Its records are tagged calibration: never shown by show, export or report.
    """
    names = [m.strip() for m in methods.split(",") if m.strip()]
    if not names:
        raise UserError("--methods is empty")
    path = store or calibration_store()
    started, cpu = time.perf_counter(), cpu_seconds()
    progress = run_probe(names, path, endpoint, services)
    Console(width=200).print(progress_table(progress))
    typer.echo(
        f"stored in {path}: {time.perf_counter() - started:,.0f} s wall, {cpu_seconds() - cpu:,.0f} s CPU "
        "(this process and the services it started); price a sweep with `orchestrator plan ... --estimate`"
    )
