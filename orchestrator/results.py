"""Selected results: per cell, the trial that the one selection rule picks, as `show` and `export` print them.

The rule (the lowest finite validation loss among ok trials, ties to the earlier trial) is
``orchestrator.analysis.workflow.workflow_costs``; `show`, `export` and the report all read it.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from rich.table import Table

from orchestrator.records import ACCEPTED_STATUSES, RETRIED_STATUSES, TrialRecord

#: Columns of ``selected_results`` (what `show` prints), in order.
SHOW_COLUMNS = [
    "method",
    "method_version",
    "dataset",
    "regime",
    "split",
    "trials",
    "failed",
    "trial_index",
    "val_loss",
    "primary_metric",
    "test_primary",
    "test_accuracy",
    "config_json",
]


def selected_results(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per cell (method version included): the selected trial, and the cell's executed and failed trials.

    A failed trial is one the rule could not select (not ok, or no finite validation loss).
    """
    selected = selected_with_workflow(trials).rename(
        columns={
            "n_trials": "trials",
            "n_failed": "failed",
            "selected_trial_index": "trial_index",
            "selected_config_json": "config_json",
        }
    )
    return selected[SHOW_COLUMNS]


def results_table(selected: pd.DataFrame) -> Table:
    table = Table(title="Selected results (lowest validation loss)")
    for column in (
        "method",
        "dataset",
        "regime",
        "split",
        "trials",
        "failed",
        "selected",
        "val loss",
        "test metric",
        "value",
    ):
        table.add_column(
            column,
            justify="left" if column in ("method", "dataset", "regime", "test metric") else "right",
            no_wrap=True,
        )
    versions = selected.groupby("method", observed=True)["method_version"].nunique()
    for row in selected.itertuples(index=False):
        chosen = pd.notna(row.trial_index)
        table.add_row(
            f"{row.method}@{row.method_version}" if versions[row.method] > 1 else row.method,
            row.dataset,
            row.regime,
            str(row.split),
            str(row.trials),
            str(row.failed),
            str(int(row.trial_index)) if chosen else "-",
            f"{row.val_loss:.4f}" if chosen else "-",
            row.primary_metric if chosen else "none selectable",
            f"{row.test_primary:.4f}" if chosen else "-",
        )
    return table


SUMMARY_ROWS = 20  # a failure summary fits one screen


def failures(records: list[TrialRecord]) -> pd.DataFrame:
    """Trials that ended other than ok/oom/timeout, grouped: method, dataset, status, first error line, count."""
    rows = [
        (r.method, r.dataset, r.status, (r.error or "").strip().splitlines()[0] if (r.error or "").strip() else "")
        for r in records
        if r.status not in ACCEPTED_STATUSES
    ]
    frame = pd.DataFrame(rows, columns=["method", "dataset", "status", "error"])
    grouped = frame.groupby(["method", "dataset", "status", "error"], sort=False).size().reset_index(name="count")
    return grouped.sort_values("count", ascending=False, kind="stable").reset_index(drop=True)


def failures_table(grouped: pd.DataFrame) -> Table:
    total = int(grouped["count"].sum())
    table = Table(
        title=(
            f"{total} trial(s) of this run did not succeed (unavailable ones are retried by a rerun; the others are "
            "stored outcomes)"
        )
    )
    for column in ("method", "dataset", "status", "count", "first error line"):
        table.add_column(column, justify="right" if column == "count" else "left", overflow="fold")
    for row in grouped.head(SUMMARY_ROWS).itertuples(index=False):
        status = f"{row.status} (retried)" if row.status in RETRIED_STATUSES else row.status
        table.add_row(row.method, row.dataset, status, str(row.count), row.error[:160])
    if len(grouped) > SUMMARY_ROWS:
        table.caption = f"... and {len(grouped) - SUMMARY_ROWS} more groups (orchestrator export lists every trial)"
    return table


# ---- export and workflow views ------------------------------------------------

#: Columns of the selected-results export, in order (README.md, "Export").
SELECTED_COLUMNS = (
    "method", "method_version", "family", "kind", "origin",
    "dataset", "dataset_hash", "task_type", "num_classes", "regime", "split",
    "n_trials", "n_ok", "n_failed",
    "selected_trial_index", "selected_trial_key", "selected_is_default", "selected_config_json",
    "val_loss", "val_accuracy", "val_auroc",
    "primary_metric", "test_primary", "test_accuracy", "test_macro_f1", "test_cross_entropy", "test_auroc",
    "test_precision",
    "training_tuning_s", "prediction_s", "workflow_s",
    "fit_peak_bytes", "predict_peak_bytes", "workflow_peak_bytes", "memory_kind",
)  # fmt: skip

_TRIAL_FIELDS = {
    "selected_trial_key": "trial_key",
    "selected_is_default": "is_default",
    "selected_config_json": "config_json",
    **{c: c for c in ("val_loss", "val_accuracy", "val_auroc", "primary_metric", "test_primary", "test_accuracy",
                      "test_macro_f1", "test_cross_entropy", "test_auroc", "test_precision")},
}  # fmt: skip


def selected_with_workflow(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per (method, version, dataset, regime, split): the selected trial and the cell's workflow figures.

    Selection and the cost figures both come from ``orchestrator.analysis.workflow.workflow_costs``
    (full search), the one selection rule.
    """
    from orchestrator.analysis.workflow import FULL, workflow_costs

    if trials.empty:
        return pd.DataFrame(columns=list(SELECTED_COLUMNS))
    costs = workflow_costs(trials, budgets=(), include_full=True)
    costs = costs[costs["budget"].astype(str) == FULL].drop(columns=["budget", "k"])
    keys = ["method", "method_version", "dataset", "regime", "split"]
    first = trials.sort_values("trial_index", kind="stable").groupby(keys, sort=False).head(1)
    ident = first[[*keys, "family", "kind", "origin", "dataset_hash", "task_type", "num_classes"]]
    out = costs.merge(ident, on=keys, how="left")
    out["n_failed"] = out["n_trials"] - out["n_ok"]
    chosen = trials[[*keys, "trial_index", *dict.fromkeys(_TRIAL_FIELDS.values())]].rename(
        columns={"trial_index": "selected_trial_index"}
    )
    chosen = chosen.astype({"selected_trial_index": "Int64"})
    out = out.merge(chosen, on=[*keys, "selected_trial_index"], how="left")
    for name, source in _TRIAL_FIELDS.items():
        if name != source:
            out[name] = out[source]
    out["memory_kind"] = out["memory_kind"].astype(str)
    return out[list(SELECTED_COLUMNS)].sort_values(["method", "dataset", "regime", "split"]).reset_index(drop=True)


def _seconds(value: Any) -> str:
    return "-" if value is None or pd.isna(value) else f"{float(value):.3f}"


def _bytes(value: Any) -> str:
    return "-" if value is None or pd.isna(value) else f"{float(value) / 2**20:.1f} MiB"


def workflow_table(selected: pd.DataFrame) -> Table:
    """The paper's per-cell workflow figures (full search) as a rich table."""
    table = Table(title="Workflow cost per cell (full search; service-side seconds, warm-up excluded)")
    headers = (
        "method",
        "dataset",
        "regime",
        "split",
        "trials",
        "ok",
        "selected",
        "tuning s",
        "predict s",
        "workflow s",
        "peak memory",
        "kind",
    )
    for column in headers:
        table.add_column(
            column, justify="left" if column in ("method", "dataset", "regime", "kind") else "right", no_wrap=True
        )
    for row in selected.itertuples(index=False):
        chosen = pd.notna(row.selected_trial_index)
        table.add_row(
            row.method, row.dataset, row.regime, str(row.split), str(row.n_trials), str(row.n_ok),
            str(int(row.selected_trial_index)) if chosen else "-",
            _seconds(row.training_tuning_s), _seconds(row.prediction_s), _seconds(row.workflow_s),
            _bytes(row.workflow_peak_bytes), row.memory_kind,
        )  # fmt: skip
    return table


def services_table(services: pd.DataFrame) -> Table:
    table = Table(title="Service warm-up (recorded apart, charged to no trial)")
    for column in ("family", "source", "endpoint", "started at", "start s", "warm-up s", "warmed up", "warm-up error"):
        table.add_column(
            column, justify="right" if column.endswith(" s") else "left", no_wrap=column != "warm-up error"
        )
    for row in services.itertuples(index=False):
        table.add_row(
            row.family, row.source, row.endpoint, str(row.started_at), _seconds(row.start_seconds),
            _seconds(row.warmup_seconds), row.warmup_methods or "-", row.warmup_error or "",
        )  # fmt: skip
    return table
