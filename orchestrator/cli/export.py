"""`orchestrator export`: the store's tables as Parquet or CSV files (column schema: docs/records.md#export)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pandas as pd
import typer

from orchestrator.cli.errors import UserError, user_errors
from orchestrator.protocols import without_calibration
from orchestrator.results import selected_with_workflow
from orchestrator.store import read_services, read_trials
from orchestrator.trial_table.selection import workflow_costs

FORMATS = ("parquet", "csv")


def export_tables(trials: pd.DataFrame, services: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The exported tables by file stem.

    trials (long), selected (+ workflow, full search), workflow (per budget), services.
    """
    workflow = workflow_costs(trials)
    for column in ("budget", "memory_kind"):
        if column in workflow.columns:
            workflow[column] = workflow[column].astype(str)
    return {
        "trials": trials,
        "selected": selected_with_workflow(trials),
        "workflow": workflow,
        "services": services,
    }


def write_tables(tables: dict[str, pd.DataFrame], out: Path, fmt: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, frame in tables.items():
        path = out / f"{stem}.{fmt}"
        tmp = path.with_name(f".{path.name}.tmp")
        if fmt == "parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False)
        tmp.replace(path)  # a reader never sees a half-written file
        written.append(path)
    return written


@user_errors
def export(
    store: Annotated[Path, typer.Option(help="SQLite run store written by `orchestrator run`.")] = Path("runs.sqlite"),
    format: Annotated[str, typer.Option("--format", help="parquet or csv.")] = "parquet",
    out: Annotated[Path, typer.Option(help="Directory for trials, selected, workflow and services files.")] = Path(
        "export"
    ),
) -> None:
    """Write the long trials table, the selected results with workflow cost, per-budget workflow figures and
    service warm-up."""
    if format not in FORMATS:
        raise UserError(f"--format must be parquet or csv, got {format!r}")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a directory")
    trials = without_calibration(read_trials(store))
    if trials.empty:
        raise UserError(f"{store} holds no trials yet (other than the cost probe's)")
    for path in write_tables(export_tables(trials, read_services(store)), out, format):
        print(path)
