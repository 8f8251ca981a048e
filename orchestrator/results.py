"""Selected results: per cell, the trial that the one selection rule picks, as `show` and `export` print them.

The rule (the lowest finite validation loss among ok trials, ties to the earlier trial) is
``orchestrator.trial_table.selection.workflow_costs``; `show`, `export` and the report all read it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import OverflowMethod
from rich.table import Table

from orchestrator.metrics import TEST_METRICS, VAL_METRICS
from orchestrator.protocols import without_calibration
from orchestrator.records import ACCEPTED_STATUSES, RETRIED_STATUSES, TrialRecord
from orchestrator.trial_table.load import read_store_columns
from orchestrator.trial_table.selection import (
    FULL,
    default_view,
    single_trial_searches_dropped,
    unselectable_reasons,
    workflow_costs,
)

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


#: The trial columns `show` reads for its selection, results and summary; the rest of each row stays in the store.
SHOWN_TRIAL_COLUMNS = (
    "method",
    "method_version",
    "kind",
    "dataset",
    "regime",
    "split",
    "trial_index",
    "status",
    "val_loss",
    "primary_metric",
    "test_primary",
    "protocol",
)
#: What `show --workflow` reads besides: the costs it prints (``orchestrator.trial_table.selection.workflow_costs``).
# A table: service seconds, then peak bytes: the formatter keeps the two rows.
SHOWN_COST_COLUMNS = (
    "fit_service_s", "predict_service_s", "fit_cpu_s", "predict_cpu_s",
    "fit_peak_rss_bytes", "fit_peak_gpu_bytes", "predict_peak_rss_bytes", "predict_peak_gpu_bytes",
)  # fmt: skip


def read_shown(path: Path, costs: bool = False) -> pd.DataFrame:
    """The trials `show` prints from, in bounded memory: ``SHOWN_TRIAL_COLUMNS`` (and, with ``costs``,
    ``SHOWN_COST_COLUMNS``) only, the repeated strings as categoricals.

    At two million rows `show --summary` peaks at about 0.4 KB a row, where reading whole rows took 5.4 KB
    (``make bench BENCH=show``).
    """
    return without_calibration(read_store_columns(path, SHOWN_TRIAL_COLUMNS + (SHOWN_COST_COLUMNS if costs else ())))


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


def _table(
    title: str,
    columns: tuple[str, ...],
    right: tuple[str, ...],
    wrap: tuple[str, ...] = (),
    overflow: OverflowMethod = "ellipsis",
) -> Table:
    """An empty rich table: the ``right`` columns right-justified, the ``wrap`` ones wrapped, the others on one line."""
    table = Table(title=title)
    for column in columns:
        table.add_column(
            column, justify="right" if column in right else "left", no_wrap=column not in wrap, overflow=overflow
        )
    return table


# What the terminal's tables abbreviate, said once under each table that uses it (issue 52: never explained).
SELECTED_LEGEND = (
    "selected: the trial validation loss chose in its cell, by its place in the configuration sequence (0 = the "
    "default configuration; `orchestrator export` lists each one's configuration)"
)
DEFAULT_LEGEND = (
    "METHOD-Default: the default configuration alone (trial 0, a budget of 1); METHOD: what its whole search selected"
)
SPLITS_LEGEND = "s0:2: on split 0 the selected trial is trial 2 (0 = the default configuration)"


def _legend(table: Table, *lines: str) -> Table:
    """``table`` with what its columns abbreviate said under it."""
    table.caption = "\n".join(lines)
    table.caption_justify = "left"
    return table


def results_table(selected: pd.DataFrame) -> Table:
    table = _table(
        "Selected results (lowest validation loss)",
        ("method", "dataset", "regime", "split", "trials", "failed", "selected", "val loss", "test metric", "value"),
        right=("split", "trials", "failed", "selected", "val loss", "value"),
    )
    _legend(table, SELECTED_LEGEND)
    versions = selected.groupby("method", observed=True)["method_version"].nunique()
    for row in selected.itertuples(index=False):
        chosen = pd.notna(row.trial_index)
        table.add_row(
            f"{_cell(row.method)}@{_cell(row.method_version)}"
            if versions.get(row.method, 1) > 1
            else _cell(row.method),
            _cell(row.dataset),
            _cell(row.regime),
            str(row.split),
            str(row.trials),
            str(row.failed),
            str(int(row.trial_index)) if chosen else "-",
            f"{row.val_loss:.4f}" if chosen else "-",
            _cell(row.primary_metric) if chosen else "none selectable",
            f"{row.test_primary:.4f}" if chosen else "-",
        )
    return table


def _cell(value: Any, missing: str = "-") -> str:
    """A text cell of a store that may hold NULL, NaN or a number where text belongs (a store we did not write)."""
    if value is None or (isinstance(value, float) and value != value) or (value is pd.NA) or value == "":
        return missing
    return str(value)


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

#: Columns of the selected-results export, in order (docs/records.md#export).
# A table: one line per group of columns (identity, task, counts, selection, metrics, costs), kept as written.
SELECTED_COLUMNS = (
    "method", "method_version", "family", "kind", "origin",
    "dataset", "dataset_hash", "task_type", "num_classes", "regime", "split",
    "n_trials", "n_ok", "n_failed",
    "selected_trial_index", "selected_trial_key", "selected_is_default", "selected_config_json",
    *VAL_METRICS,
    "primary_metric", "test_primary", *TEST_METRICS,
    "training_tuning_s", "prediction_s", "workflow_s",
    "fit_peak_bytes", "predict_peak_bytes", "workflow_peak_bytes", "memory_kind",
)  # fmt: skip

_TRIAL_FIELDS = {
    "selected_trial_key": "trial_key",
    "selected_is_default": "is_default",
    "selected_config_json": "config_json",
    **{c: c for c in (*VAL_METRICS, "primary_metric", "test_primary", *TEST_METRICS)},
}


def selected_with_workflow(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per (method, version, dataset, regime, split): the selected trial and the cell's workflow figures.

    Selection and the cost figures both come from ``orchestrator.trial_table.selection.workflow_costs``
    (full search), the one selection rule. A column the trial table lacks (`show` reads only
    ``SHOWN_TRIAL_COLUMNS``) is left empty.
    """
    if trials.empty:
        return pd.DataFrame(columns=list(SELECTED_COLUMNS))
    costs = workflow_costs(trials, budgets=(), include_full=True)
    costs = costs[costs["budget"].astype(str) == FULL].drop(columns=["budget", "k"])
    keys = ["method", "method_version", "dataset", "regime", "split"]
    first = trials.sort_values("trial_index", kind="stable").groupby(keys, sort=False, observed=True).head(1)
    ident = first[[*keys, *_present(trials, ("family", "kind", "origin", "dataset_hash", "task_type", "num_classes"))]]
    out = costs.merge(ident, on=keys, how="left")
    out["n_failed"] = out["n_trials"] - out["n_ok"]
    fields = _present(trials, dict.fromkeys(_TRIAL_FIELDS.values()))
    chosen = trials[[*keys, "trial_index", *fields]].rename(columns={"trial_index": "selected_trial_index"})
    chosen = chosen.astype({"selected_trial_index": "Int64"})
    out = out.merge(chosen, on=[*keys, "selected_trial_index"], how="left")
    for name, source in _TRIAL_FIELDS.items():
        if name != source and source in fields:
            out[name] = out[source]
    out["memory_kind"] = out["memory_kind"].astype(str)
    out = out.reindex(columns=list(SELECTED_COLUMNS))
    return out.sort_values(["method", "dataset", "regime", "split"]).reset_index(drop=True)


def _present(trials: pd.DataFrame, columns: Iterable[str]) -> list[str]:
    return [c for c in columns if c in trials.columns]


def _seconds(value: Any) -> str:
    return "-" if value is None or pd.isna(value) else f"{float(value):.3f}"


def _bytes(value: Any) -> str:
    return "-" if value is None or pd.isna(value) else f"{float(value) / 2**20:.1f} MiB"


def workflow_table(selected: pd.DataFrame) -> Table:
    """The paper's per-cell workflow figures (full search) as a rich table."""
    table = _legend(
        Table(title="Workflow cost per cell (full search; service-side seconds, warm-up excluded)"), SELECTED_LEGEND
    )
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
            _cell(row.method),
            _cell(row.dataset),
            _cell(row.regime),
            str(row.split),
            str(row.n_trials),
            str(row.n_ok),
            str(int(row.selected_trial_index)) if chosen else "-",
            _seconds(row.training_tuning_s),
            _seconds(row.prediction_s),
            _seconds(row.workflow_s),
            _bytes(row.workflow_peak_bytes),
            _cell(row.memory_kind),
        )
    return table


def services_table(services: pd.DataFrame) -> Table:
    table = Table(title="Service warm-up (recorded apart, charged to no trial)")
    for column in ("family", "source", "endpoint", "started at", "start s", "warm-up s", "warmed up", "warm-up error"):
        table.add_column(
            column, justify="right" if column.endswith(" s") else "left", no_wrap=column != "warm-up error"
        )
    for row in services.itertuples(index=False):
        table.add_row(
            _cell(row.family),
            _cell(row.source),
            _cell(row.endpoint),
            _cell(row.started_at),
            _seconds(row.start_seconds),
            _seconds(row.warmup_seconds),
            _cell(row.warmup_methods),
            _cell(row.warmup_error, ""),
        )
    return table


# ---- summary over splits ------------------------------------------------------

#: Columns of ``summarize`` (what `show --summary` prints), in order.
SUMMARY_COLUMNS = (
    "view",
    "method",
    "method_version",
    "variant",
    "dataset",
    "regime",
    "splits",
    "selected_splits",
    "primary_metric",
    "mean",
    "std",
    "selected",
    "reason",
)


def summarize(trials: pd.DataFrame) -> pd.DataFrame:
    """Per view, dataset and regime: the primary test metric's mean and std over the splits, and what was selected.

    Views as the report names them (``<METHOD>-Default``: trial 0; ``<METHOD>``: the full search; a
    GFM: its search), selected by the one rule (``workflow_costs``); a method whose every search in a
    regime ran one trial is shown once, as its default (``single_trial_searches_dropped``).
    ``selected`` gives the selected trial index per split (``s0:2 s1:0``); ``reason`` says, for the
    splits without a selectable trial, what their trials ended as (``unselectable_reasons``).
    """
    if trials.empty:
        return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    cells = _summary_cells(trials)
    versions = trials.groupby("method", observed=True)["method_version"].nunique()
    rows = [
        _summary_row(cell, g.sort_values("split"), versions)
        for cell, g in cells.groupby(["method", "method_version", "variant", "dataset", "regime"], observed=True)
    ]
    out = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    order = {"default": 0, "tuned": 1, "gfm": 1}
    out["_o"] = out["variant"].map(order)
    return out.sort_values(["regime", "dataset", "method", "_o"]).drop(columns="_o").reset_index(drop=True)


_CELL_KEYS = ["method", "method_version", "dataset", "regime", "split"]


def _summary_cells(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per view and cell: its ``variant``, the selected trial's index, metric and score, and the ``reason``
    a cell without a selectable trial has none (the default view: trial 0's outcome alone)."""
    costs = workflow_costs(trials, budgets=(1,), include_full=True)
    costs["budget"] = costs["budget"].astype(str)
    kind = trials.drop_duplicates("method").set_index("method")["kind"].astype(str)
    costs["kind"] = costs["method"].map(kind)
    sup = costs["kind"] == "supervised"
    full = costs[costs["budget"] == FULL]
    default = costs[(costs["budget"] == "1") & sup].copy()
    # The default view holds trial 0 alone: selectable or not, its reason is trial 0's outcome.
    default.loc[default["selected_trial_index"].fillna(-1) != 0, "selected_trial_index"] = pd.NA
    tuned = single_trial_searches_dropped(full[full["kind"] == "supervised"])
    parts = [
        default.assign(variant="default", _first_only=True),
        tuned.assign(variant="tuned", _first_only=False),
        full[full["kind"] != "supervised"].assign(variant="gfm", _first_only=False),
    ]
    cells = pd.concat(parts, ignore_index=True)
    score = trials[[*_CELL_KEYS, "trial_index", "primary_metric", "test_primary"]].rename(
        columns={"trial_index": "selected_trial_index"}
    )
    cells = cells.astype({"selected_trial_index": "Int64"}).merge(
        score.astype({"selected_trial_index": "Int64"}), on=[*_CELL_KEYS, "selected_trial_index"], how="left"
    )
    first = trials[trials["trial_index"] == 0]
    why = pd.concat(
        [
            unselectable_reasons(first, _CELL_KEYS).assign(_first_only=True),
            unselectable_reasons(trials, _CELL_KEYS).assign(_first_only=False),
        ],
        ignore_index=True,
    )
    return cells.merge(why, on=[*_CELL_KEYS, "_first_only"], how="left")


def _summary_row(cell: tuple, g: pd.DataFrame, versions: pd.Series) -> dict[str, Any]:
    """The summary of one view on one dataset and regime, from its splits' cells ``g`` (in split order)."""
    method, version, variant, dataset, regime = cell
    chosen = g[g["selected_trial_index"].notna()]
    label = f"{method}@{version}" if versions.get(method, 1) > 1 else str(method)
    metric = chosen["primary_metric"].dropna()
    values = chosen["test_primary"].astype(float)
    return {
        "view": default_view(label) if variant == "default" else label,
        "method": method,
        "method_version": version,
        "variant": variant,
        "dataset": dataset,
        "regime": regime,
        "splits": len(g),
        "selected_splits": len(chosen),
        "primary_metric": metric.iloc[0] if len(metric) else "",
        "mean": values.mean() if len(values) else float("nan"),
        "std": values.std(ddof=1) if len(values) > 1 else float("nan"),
        "selected": " ".join(
            f"s{s}:{int(i)}" for s, i in zip(chosen["split"], chosen["selected_trial_index"], strict=True)
        ),
        "reason": "; ".join(f"s{s}: {r}" for s, r in zip(g["split"], g["reason"], strict=True) if isinstance(r, str)),
    }


def summary_table(summary: pd.DataFrame) -> Table:
    """``summarize`` as a rich table: mean ± std over splits, the selections, and why a split has none."""
    table = _table(
        "Summary over splits (primary test metric of the validation-selected trial; std over splits)",
        ("regime", "dataset", "method", "splits", "metric", "mean ± std", "selected trial per split", "not selectable"),
        right=("splits", "mean ± std"),
        wrap=("selected trial per split", "not selectable"),
        overflow="fold",
    )
    views = summary["view"].astype(str) if len(summary) else pd.Series(dtype=str)
    legend = [DEFAULT_LEGEND] * bool(views.str.endswith("-Default").any())
    legend += [SPLITS_LEGEND] * bool(summary["selected"].astype(str).str.len().gt(0).any() if len(summary) else 0)
    _legend(table, *legend)
    for row in summary.itertuples(index=False):
        if row.selected_splits:
            spread = f" ± {row.std:.4f}" if pd.notna(row.std) else " (1 split)"
            value = f"{row.mean:.4f}{spread}"
        else:
            value = "none selectable"
        table.add_row(
            _cell(row.regime),
            _cell(row.dataset),
            _cell(row.view),
            f"{row.selected_splits}/{row.splits}",
            _cell(row.primary_metric),
            value,
            _cell(row.selected),
            _cell(row.reason, ""),
        )
    return table
