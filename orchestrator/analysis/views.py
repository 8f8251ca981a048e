"""From trials to *results*: one row per (view, dataset, regime, split).

A view is what a leaderboard row compares:

- ``<METHOD>-Default``: a supervised method's default configuration (trial_index 0) alone;
- ``<METHOD>``: a supervised method tuned over every executed trial (lowest validation loss);
- ``<GFM>``: a foundation model at its selected setting (lowest validation loss over its trials);
- budget points ``<METHOD>@k``: the lowest validation loss among the first k trials, with cost
  interpolated linearly in k between the measured default and full-search costs.

Selection never looks at test metrics. Each result carries the selected trial's metrics and the
workflow costs of ``orchestrator.trial_table.selection.workflow_costs``.

Naming: ``<METHOD>`` is the method's registered name as the records store it (``gcn``), so a
synthetic table and a real store spell views the same way. Code that needs a particular view
(the Elo anchor, the imputation reference) finds it by identity with ``reference_view``: the
row whose ``method_name`` is the method and whose ``variant`` is ``default``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from orchestrator.records import TASK_BINARY, primary_metric_name
from orchestrator.trial_table.load import METRIC_COLUMNS, complete_columns
from orchestrator.trial_table.selection import (
    BUDGETS,
    FULL,
    default_view,
    single_trial_searches_dropped,
    workflow_costs,
)
from orchestrator.trial_table.selection import COST_COLUMNS as WORKFLOW_COST_COLUMNS

GROUP = ["method", "dataset", "regime", "split"]
COST_COLUMNS = [*WORKFLOW_COST_COLUMNS, "n_trials", "n_ok"]
# What the pretraining-overlap audit reads of the selected trial (its content and checkpoint); not published.
AUDIT_COLUMNS = ["dataset_hash", "config_json"]
RESULT_COLUMNS = [
    "view",
    "method",  # the label: the registered name, suffixed @version when a store holds several
    "method_name",  # the registered name as recorded
    "variant",  # default | tuned | gfm | budget
    "k",
    "kind",
    "origin",
    "dataset",
    "task_type",
    "regime",
    "split",
    "selected_trial_index",
    "val_loss",
    "val_primary",  # the primary metric on validation nodes (accuracy, or AUROC for binary tasks)
    "score",  # test_primary of the selected trial (higher is better)
    "primary_metric",
    *METRIC_COLUMNS[1:],
    *COST_COLUMNS,
    "imputed",
    *AUDIT_COLUMNS,
]


def budget_view(method: str, k: int | str) -> str:
    return f"{method}@{k}"


#: The reference method: its default configuration anchors Elo at 1000 and fills missing
#: built-in results (the paper's GCN-Default).
REFERENCE_METHOD = "gcn"


def reference_view(results: pd.DataFrame, method: str = REFERENCE_METHOD) -> str | None:
    """The view of ``method``'s default configuration (a GFM's own view: it has no default), or None.

    Found by identity (registered name and variant), never by spelling a view name. When a store
    holds several versions of the method, the one with the most native results is the reference.
    """
    rows = results[results["method_name"].astype(str) == method]
    if "imputed" in rows.columns:
        rows = rows[~rows["imputed"].astype(bool)]
    for variant in ("default", "gfm"):
        cand = rows[rows["variant"] == variant]
        if not cand.empty:
            counts = cand.groupby("view").size()
            return str(counts[counts == counts.max()].index.sort_values()[-1])
    return None


def _method_labels(trials: pd.DataFrame) -> pd.Series:
    """Method name, suffixed with @version only when one method appears under several versions."""
    pairs = trials[["method", "method_version"]].drop_duplicates()
    multi = pairs.groupby("method", observed=True).size()
    multi = set(multi[multi > 1].index)
    if not multi:
        return trials["method"]
    lab = trials["method"].astype(str)
    mask = lab.isin(multi)
    lab[mask] = lab[mask] + "@" + trials.loc[mask, "method_version"].astype(str)
    return lab.astype("category")


def prepare(trials: pd.DataFrame) -> pd.DataFrame:
    """The trial table with versioned method labels where needed (a light copy); ``method_name`` keeps the name."""
    t = complete_columns(trials)
    t["method_name"] = t["method"]
    t["method"] = _method_labels(t)
    return t


def _attach_trial_columns(sel: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """Join the selected trial's metrics and identity columns onto cost rows."""
    wanted = [
        "method_name",
        "kind",
        "origin",
        "task_type",
        "val_loss",
        "val_accuracy",
        "val_auroc",
        "test_primary",
        "primary_metric",
        *METRIC_COLUMNS[1:],
        "dataset_hash",
        "config_json",
    ]
    ok = sel["selected_trial_index"].notna()
    sel = sel[ok].copy()
    sel["trial_index"] = sel["selected_trial_index"].astype("int32")
    # Restrict the big table to candidate rows before merging (cheap boolean filter).
    cand = trials[trials["status"] == "ok"][[*GROUP, "trial_index", *wanted]]
    merged = sel.merge(cand, on=[*GROUP, "trial_index"], how="left", validate="many_to_one")
    merged = merged.drop(columns=["trial_index"]).rename(columns={"test_primary": "score"})
    primary = merged["task_type"].astype(str).map(primary_metric_name)  # the sweep's rule for test_primary
    merged["val_primary"] = np.nan
    for name in primary.unique():
        merged.loc[primary == name, "val_primary"] = merged.loc[primary == name, f"val_{name}"]
    return merged.drop(columns=["val_accuracy", "val_auroc"])


def build_results(
    trials: pd.DataFrame,
    costs: pd.DataFrame | None = None,
    budgets: tuple[int, ...] = BUDGETS,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(results, budget_points) from the trial table.

    ``results`` holds the Default, tuned and GFM views; ``budget_points`` the intermediate
    budgets of supervised methods (including k=1, the default, and the full search).
    """
    t = prepare(trials)
    if costs is None:
        costs = workflow_costs(t.drop(columns=["method_version", "method_name"]), budgets=budgets)
    costs = costs.drop(columns=["method_version"], errors="ignore")
    kind = t[["method", "kind"]].drop_duplicates("method").set_index("method")["kind"].astype(str)
    costs = costs.assign(kind=costs["method"].map(kind).astype(str))
    sup = costs["kind"] == "supervised"

    full = costs[costs["budget"] == FULL]
    default = costs[(costs["budget"] == "1") & sup]
    # A default view exists only when trial 0 itself is selectable.
    default = default[default["selected_trial_index"] == 0]

    def label(df: pd.DataFrame, variant: str) -> pd.DataFrame:
        df = _attach_trial_columns(df.drop(columns=["kind"]), t)
        m = df["method"].astype(str)
        df["view"] = [default_view(x) for x in m] if variant == "default" else m
        df["variant"] = variant
        return df

    tuned = label(full[full["kind"] == "supervised"], "tuned")
    gfm = label(full[full["kind"] != "supervised"], "gfm")
    dflt = label(default, "default")
    results = pd.concat([dflt, single_trial_searches_dropped(tuned), gfm], ignore_index=True)
    results["imputed"] = False
    results = _finish(results)

    # Budget points: measured selection at k, cost interpolated between default and full.
    bud = costs[sup & (costs["budget"] != FULL)]
    bud = label(bud, "budget")
    ends = costs[sup & costs["budget"].isin(["1", FULL])]
    values = ["workflow_s", "workflow_peak_bytes", "k"]
    ends = ends.pivot_table(index=GROUP, columns="budget", values=values, observed=True)
    # pivot_table drops a column that is NaN everywhere (no cell had a selectable default, so no cost
    # at k = 1): every endpoint column must exist, NaN where unknown.
    ends = ends.reindex(columns=pd.MultiIndex.from_product([values, ["1", FULL]]))
    ends.columns = [f"{a}__{b}" for a, b in ends.columns]
    ends = ends.reset_index()
    bud = bud.merge(ends, on=GROUP, how="left")
    # A budget at or beyond its search's size is that search (the full point below), never a point
    # of its own: a 5-trial search has no k = 10 or k = 200. k = 1, the default, always starts the path.
    bud = bud[(bud["k"] == 1) | (bud["k"] < bud[f"k__{FULL}"])]
    n_slots = bud[f"k__{FULL}"].to_numpy()
    kk = bud["k"].to_numpy(dtype=float)
    frac = np.where(n_slots > 1, (kk - 1) / np.maximum(n_slots - 1, 1), 1.0)
    for col in ("workflow_s", "workflow_peak_bytes"):
        lo, hi = bud[f"{col}__1"].to_numpy(), bud[f"{col}__{FULL}"].to_numpy()
        bud[f"{col}_measured"] = bud[col]
        bud[col] = lo + frac * (hi - lo)
    bud["view"] = [budget_view(m, k) for m, k in zip(bud["method"].astype(str), bud["k"], strict=True)]
    bud = bud.drop(columns=[c for c in bud.columns if "__" in c])
    bud["imputed"] = False
    # The full search is the last point of every trajectory.
    full_pts = tuned.copy()
    full_pts["variant"] = "budget"
    full_pts["view"] = [budget_view(m, FULL) for m in full_pts["method"].astype(str)]
    full_pts["workflow_s_measured"] = full_pts["workflow_s"]
    full_pts["workflow_peak_bytes_measured"] = full_pts["workflow_peak_bytes"]
    full_pts["imputed"] = False
    budget_points = _finish(
        pd.concat([bud, full_pts], ignore_index=True), extra=["workflow_s_measured", "workflow_peak_bytes_measured"]
    )
    return results, budget_points


def _finish(df: pd.DataFrame, extra: list[str] | None = None) -> pd.DataFrame:
    cols = [c for c in RESULT_COLUMNS if c in df.columns] + (extra or [])
    df = df[cols].copy()
    for c in (
        "view",
        "method",
        "method_name",
        "variant",
        "kind",
        "origin",
        "dataset",
        "task_type",
        "regime",
        "primary_metric",
        "memory_kind",
    ):
        if c in df.columns:
            df[c] = df[c].astype(str)
    df["split"] = df["split"].astype(int)
    df["k"] = pd.to_numeric(df["k"]).astype(int)
    return df.sort_values(["regime", "dataset", "view", "split"], kind="stable").reset_index(drop=True)


def below_chance(results: pd.DataFrame) -> pd.DataFrame:
    """Selected binary results (native, not imputed) whose test AUROC is below 0.5: worse than chance.

    Such a result usually means an untrained or inverted head was kept; the report flags each one.
    """
    r = results[(results["task_type"] == TASK_BINARY) & (results["test_auroc"] < 0.5)]
    if "imputed" in r.columns:
        r = r[~r["imputed"].astype(bool)]
    cols = ["regime", "view", "dataset", "split", "selected_trial_index", "val_loss", "test_auroc"]
    return r[cols].sort_values(["regime", "test_auroc", "view", "dataset", "split"]).reset_index(drop=True)
