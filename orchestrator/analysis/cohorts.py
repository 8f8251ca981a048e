"""Missing results: imputation with the matched GCN-Default result, coverage, analysis cohorts.

Rules (docs/analysis.md, "Missing results and cohorts"):

- Only built-in views are imputed; a user submission (``origin`` "user:<id>") never is, so its
  holes stay holes and every aggregation handles it on the datasets it covers.
- A missing (view, dataset, regime, split) result is replaced by the matched reference result
  (the default configuration of ``views.REFERENCE_METHOD``, GCN, found by ``views.reference_view``,
  on the same dataset, regime and split): its metrics *and* its costs. The row is
  flagged ``imputed=True``. A dataset counts as imputed for a view if any of its partitions is.
- Cohorts: ``all`` = all datasets, with imputation (the designated comparison of the main
  leaderboard); ``complete`` = datasets on which every built-in view has native results on every
  partition (no imputation); ``near_complete`` = only views whose native dataset coverage is at
  least ``near_complete_min`` (default 0.9), on the datasets complete for all of them.
"""

from __future__ import annotations

import pandas as pd

from orchestrator.analysis.views import reference_view
from orchestrator.trial_table.selection import count_words, trial_outcomes

COHORT_TITLES = {
    "all": "All datasets, built-in gaps imputed with gcn-Default",
    "complete": "Complete-case datasets only (no imputation)",
    "near_complete": "Near-complete methods only (no imputation)",
}

_IDENTITY = ["view", "method", "method_name", "variant", "k", "kind", "origin"]


def is_user(origin: pd.Series) -> pd.Series:
    """User submissions: a bundle's (``user:<id>``) or, against the reference, the store's own (``user:store``)."""
    return origin.astype(str).str.startswith("user:")


def impute(results: pd.DataFrame, reference: str | None = None) -> pd.DataFrame:
    """Fill built-in views' missing partitions with the matched ``reference`` view's result, flagged.

    ``reference`` defaults to ``reference_view(results)`` (GCN's default configuration).
    """
    results = results.copy()
    results["imputed"] = results.get("imputed", False)
    out = [results]
    reference = reference or reference_view(results)
    ref = results[(results["view"] == reference) & ~results["imputed"]]
    if ref.empty:
        return results
    views = results[~is_user(results["origin"])][_IDENTITY + ["regime"]].drop_duplicates(["view", "regime"])
    cells = results[["dataset", "regime", "split"]].drop_duplicates()
    grid = views.merge(cells, on="regime")
    have = results[["view", "dataset", "regime", "split"]].assign(_have=True)
    grid = grid.merge(have, on=["view", "dataset", "regime", "split"], how="left")
    missing = grid[grid["_have"].isna()].drop(columns=["_have"])
    if missing.empty:
        return results
    fill_cols = [c for c in results.columns if c not in _IDENTITY and c not in ("dataset", "regime", "split")]
    filled = missing.merge(
        ref[["dataset", "regime", "split", *fill_cols]], on=["dataset", "regime", "split"], how="inner"
    )
    filled["imputed"] = True
    out.append(filled[results.columns])
    return (
        pd.concat(out, ignore_index=True)
        .sort_values(["regime", "dataset", "view", "split"], kind="stable")
        .reset_index(drop=True)
    )


def coverage(results: pd.DataFrame) -> pd.DataFrame:
    """Per (regime, view): datasets with native results on every partition, imputed, and missing."""
    cells = results[["dataset", "regime", "split"]].drop_duplicates()
    n_splits = cells.groupby(["regime", "dataset"]).size().rename("n_splits")
    per = (
        results.groupby(["regime", "view", "dataset"])
        .agg(
            native=("imputed", lambda s: int((~s.astype(bool)).sum())),
            imputed=("imputed", lambda s: int(s.astype(bool).sum())),
        )
        .reset_index()
        .merge(n_splits.reset_index(), on=["regime", "dataset"])
    )
    per["native_dataset"] = per["native"] == per["n_splits"]
    per["imputed_dataset"] = per["imputed"] > 0
    n_datasets = cells.groupby("regime")["dataset"].nunique().rename("datasets")
    cov = (
        per.groupby(["regime", "view"])
        .agg(native_datasets=("native_dataset", "sum"), imputed_datasets=("imputed_dataset", "sum"))
        .reset_index()
        .merge(n_datasets.reset_index(), on="regime")
    )
    cov["missing_datasets"] = cov["datasets"] - cov["native_datasets"] - cov["imputed_datasets"]
    cov["native_fraction"] = cov["native_datasets"] / cov["datasets"]
    origin = results.drop_duplicates("view").set_index("view")["origin"]
    cov["origin"] = cov["view"].map(origin)
    return cov.sort_values(["regime", "native_fraction", "view"], ascending=[True, False, True]).reset_index(drop=True)


def regime_datasets(coverage: pd.DataFrame, regime: str) -> int:
    """The datasets ``regime`` compares methods on, from the ``coverage`` table (0 for a regime it lacks)."""
    n = coverage.loc[coverage["regime"] == regime, "datasets"]
    return int(n.iloc[0]) if len(n) else 0


CELL = ["method", "dataset", "regime", "split"]
_CELL_COUNTS = ["regime", "method", "kind", "origin", "planned_cells", "selected_cells", "unselectable_cells"]


def cell_coverage(trials: pd.DataFrame) -> pd.DataFrame:
    """Per (regime, method): the cells planned, with a selectable result, with trials but none selectable, absent.

    The store does not record a sweep's plan, so the planned grid is what the store implies: each
    regime's methods times the (dataset, split) partitions any trial of that regime ran on. A cell
    is one method on one partition. ``unselectable_statuses`` counts the trials of the unselectable
    cells by outcome, in the words of ``workflow.unselectable_reasons`` (what `show --summary` prints).
    """
    outcome, selectable = trial_outcomes(trials)
    t = trials[CELL].assign(_outcome=outcome, _sel=selectable)
    has = t.groupby(CELL, observed=True)["_sel"].transform("any").to_numpy(dtype=bool)
    per_cell = t.groupby(CELL, observed=True)["_sel"].any().rename("selectable").reset_index()
    per_cell[["regime", "method"]] = per_cell[["regime", "method"]].astype(str)
    parts = per_cell[["regime", "dataset", "split"]].drop_duplicates().groupby("regime").size()
    cov = per_cell.groupby(["regime", "method"]).agg(
        present_cells=("selectable", "size"), selected_cells=("selectable", "sum")
    )
    cov = cov.reset_index()
    cov["planned_cells"] = cov["regime"].map(parts).astype(int)
    cov["unselectable_cells"] = cov["present_cells"] - cov["selected_cells"]
    cov["absent_cells"] = cov["planned_cells"] - cov["present_cells"]
    bad = t[~has].astype({"regime": str, "method": str})
    words = bad.groupby(["regime", "method"])["_outcome"].agg(lambda o: count_words(o.value_counts()))
    cov["unselectable_statuses"] = cov.join(words, on=["regime", "method"])["_outcome"].fillna("")
    ident = trials.drop_duplicates("method")[["method", "kind", "origin"]].astype(str)
    cov = cov.merge(ident, on="method", how="left")
    cols = [*_CELL_COUNTS, "absent_cells", "unselectable_statuses"]
    return cov[cols].sort_values(["regime", "method"]).reset_index(drop=True)


def _complete_datasets(native: pd.DataFrame, views: pd.Index, regime: str) -> list[str]:
    cells = native[["dataset", "split"]].drop_duplicates()
    n_splits = cells.groupby("dataset").size()
    got = native[native["view"].isin(views)].groupby(["dataset", "view"]).size().unstack("view")
    got = got.reindex(columns=views)
    ok = got.eq(n_splits.reindex(got.index), axis=0).all(axis=1)
    return sorted(ok[ok].index)


def cohorts(
    results: pd.DataFrame,
    near_complete_min: float = 0.9,
    reference: str | None = None,
) -> dict[str, pd.DataFrame]:
    """The three analysis cohorts as result tables (see the module docstring)."""
    native = results[~results.get("imputed", pd.Series(False, index=results.index)).astype(bool)]
    out = {"all": impute(native, reference=reference)}
    complete, near = [], []
    cov = coverage(native.assign(imputed=False))
    for regime, rr in native.groupby("regime"):
        builtin = pd.Index(sorted(rr.loc[~is_user(rr["origin"]), "view"].unique()))
        ds = _complete_datasets(rr, builtin, regime)
        complete.append(rr[rr["dataset"].isin(ds)])
        c = cov[(cov["regime"] == regime) & (cov["native_fraction"] >= near_complete_min)]
        keep = pd.Index(sorted(c["view"]))
        ds2 = _complete_datasets(rr, keep, regime)
        near.append(rr[rr["view"].isin(keep) & rr["dataset"].isin(ds2)])
    out["complete"] = pd.concat(complete, ignore_index=True) if complete else native.iloc[:0]
    out["near_complete"] = pd.concat(near, ignore_index=True) if near else native.iloc[:0]
    return out
