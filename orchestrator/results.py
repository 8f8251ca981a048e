"""Selected results: per (method, dataset, regime, split), the ok trial with the lowest validation loss."""

from __future__ import annotations

import pandas as pd
from rich.table import Table

from orchestrator.records import STATUS_OK

CELL = ["method", "dataset", "regime", "split"]


def selected_results(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: the selected trial plus counts of executed and failed trials."""
    counts = trials.groupby(CELL).agg(trials=("trial_key", "size"), failed=("status", lambda s: int((s != STATUS_OK).sum())))
    ok = trials[trials["status"] == STATUS_OK]
    if ok.empty:
        best = pd.DataFrame(columns=[*CELL, "trial_index", "val_loss", "primary_metric", "test_primary"]).set_index(CELL)
    else:
        # lowest validation loss; ties go to the earlier trial (the default first)
        order = ok.sort_values(["val_loss", "trial_index"], kind="stable")
        best = order.groupby(CELL).head(1).set_index(CELL)
    columns = ["trial_index", "val_loss", "primary_metric", "test_primary", "test_accuracy", "config_json"]
    out = counts.join(best[[c for c in columns if c in best.columns]], how="left").reset_index()
    return out.sort_values(CELL).reset_index(drop=True)


def results_table(selected: pd.DataFrame) -> Table:
    table = Table(title="Selected results (lowest validation loss)")
    for column in ("method", "dataset", "regime", "split", "trials", "failed", "selected", "val loss", "test metric", "value"):
        table.add_column(column, justify="left" if column in ("method", "dataset", "regime", "test metric") else "right", no_wrap=True)
    for row in selected.itertuples(index=False):
        chosen = pd.notna(row.trial_index)
        table.add_row(
            row.method,
            row.dataset,
            row.regime,
            str(row.split),
            str(row.trials),
            str(row.failed),
            str(int(row.trial_index)) if chosen else "-",
            f"{row.val_loss:.4f}" if chosen else "-",
            row.primary_metric if chosen else "no ok trial",
            f"{row.test_primary:.4f}" if chosen else "-",
        )
    return table
