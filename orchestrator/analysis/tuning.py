"""Tuning requirements and the validation–test improvement gap (paper App. A.4, Table 7, Figure 18).

All figures are in points (x100 on the primary metric: accuracy, or AUROC for binary tasks),
per supervised method and regime, averaged first over a dataset's partitions and then with equal
dataset weight. Budget k selects among the first k trials by validation loss
(``workflow.workflow_costs``); the default configuration is k = 1.

- tuning gain: test score of the full search minus that of the default configuration;
- smallest k within one point: the smallest budget whose mean test score is at most 1 point
  below the full search's, over the cells whose search ran more than k trials (a budget at or
  beyond a search's size is that search itself); the search size when no smaller k qualifies;
- gain from k = 50: full search minus k = 50, where searches ran more than 50 trials;
- validation–test gap at k: (validation gain over the default) - (test gain over the default).
  A positive gap is improvement that selection saw on validation nodes and test nodes did not.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from orchestrator.trial_table.selection import FULL

POINT = 100.0
WITHIN = 1.0  # points
LATE_K = 50

_CELL = ["method", "dataset", "regime", "split"]


def _budget_cells(budget_points: pd.DataFrame) -> pd.DataFrame:
    """Budget points with the matched default (k = 1) and full-search scores of their cell."""
    bp = budget_points[~budget_points["imputed"].astype(bool)] if "imputed" in budget_points else budget_points
    is_full = bp["view"].str.endswith("@" + FULL)
    full = bp[is_full][[*_CELL, "score", "val_primary", "k"]].rename(
        columns={"score": "full_score", "val_primary": "full_val", "k": "search_k"}
    )
    default = bp[~is_full & (bp["k"] == 1)][[*_CELL, "score", "val_primary"]].rename(
        columns={"score": "default_score", "val_primary": "default_val"}
    )
    # build_results gives no budget point at or beyond its search's size: that search is the full point.
    return bp.assign(full_point=is_full).merge(full, on=_CELL, how="inner").merge(default, on=_CELL, how="inner")


def _dataset_means(df: pd.DataFrame, keys: list[str], cols: list[str]) -> pd.DataFrame:
    per_ds = df.groupby([*keys, "dataset"], observed=True)[cols].mean().reset_index()
    return per_ds


def _budget_means(cells: pd.DataFrame, means: list[str], k: str) -> pd.DataFrame:
    """Per (regime, method, budget): the ``means`` columns averaged over each dataset's splits, then with equal
    dataset weight; ``k`` the largest over datasets of each dataset's ``k`` (aggregated over its splits by ``k``);
    ``datasets`` how many."""
    per_ds = (
        cells.groupby(["regime", "method", "budget", "dataset"], observed=True)
        .agg(k=("k", k), **{c: (c, "mean") for c in means})
        .reset_index()
    )
    return (
        per_ds.groupby(["regime", "method", "budget"], observed=True)
        .agg(k=("k", "max"), **{c: (c, "mean") for c in means}, datasets=("dataset", "nunique"))
        .reset_index()
    )


def tuning_requirements(budget_points: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(table, curves): Table 7 per (regime, method), and the mean gap to the full search per budget k."""
    cells = _budget_cells(budget_points)
    cols = [
        "regime",
        "method",
        "datasets",
        "search_trials",
        "default_score",
        "tuned_score",
        "tuning_gain",
        "k_within_1pt",
        "gain_k50_to_full",
    ]
    ccols = ["regime", "method", "k", "budget", "gap_to_full", "datasets"]
    if cells.empty:
        return pd.DataFrame(columns=cols), pd.DataFrame(columns=ccols)
    cells["gap"] = (cells["full_score"] - cells["score"]) * POINT
    pts = cells.assign(budget=np.where(cells["full_point"], FULL, cells["k"].astype(str)))
    curves = _budget_means(pts, ["gap"], k="first").rename(columns={"gap": "gap_to_full"})
    # The full search is plotted at its own size; intermediate budgets at k.
    curves = curves.sort_values(["regime", "method", "k"]).reset_index(drop=True)[ccols]

    rows = []
    for (regime, method), g in pts.groupby(["regime", "method"], observed=True, sort=True):
        ends = _dataset_means(g[g["full_point"]], [], ["default_score", "full_score", "search_k"])
        search = int(ends["search_k"].max())
        c = curves[(curves["regime"] == regime) & (curves["method"] == method) & (curves["budget"] != FULL)]
        c = c[c["k"] < search]
        within = c.loc[c["gap_to_full"] <= WITHIN, "k"]
        late = c.loc[c["k"] == LATE_K, "gap_to_full"]
        rows.append(
            {
                "regime": regime,
                "method": method,
                "datasets": len(ends),
                "search_trials": search,
                "default_score": ends["default_score"].mean(),
                "tuned_score": ends["full_score"].mean(),
                "tuning_gain": (ends["full_score"] - ends["default_score"]).mean() * POINT,
                "k_within_1pt": int(within.min()) if len(within) else search,
                "gain_k50_to_full": float(late.iloc[0]) if len(late) else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=cols), curves


def validation_test_gap(budget_points: pd.DataFrame) -> pd.DataFrame:
    """Per (regime, method, budget): mean validation and test gains over the default, and their gap."""
    cells = _budget_cells(budget_points)
    cols = ["regime", "method", "budget", "k", "val_gain", "test_gain", "overstatement", "datasets"]
    if cells.empty:
        return pd.DataFrame(columns=cols)
    cells = cells.assign(
        budget=np.where(cells["full_point"], FULL, cells["k"].astype(str)),
        val_gain=(cells["val_primary"] - cells["default_val"]) * POINT,
        test_gain=(cells["score"] - cells["default_score"]) * POINT,
    )
    out = _budget_means(cells, ["val_gain", "test_gain"], k="max")
    out["overstatement"] = out["val_gain"] - out["test_gain"]
    return out.sort_values(["regime", "method", "k"]).reset_index(drop=True)[cols]
