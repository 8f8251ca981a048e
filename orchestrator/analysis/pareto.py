"""Mean Improvability, Mean Overhead, and their Pareto frontiers (docs/analysis.md, "Aggregations"; paper §D.5).

Both axes are computed on per-dataset means over partitions, then averaged with equal dataset
weight; lower is better on both.

- Improvability of a point on a dataset: (err - best_err) / err, with err = 1 - score and
  best_err the lowest error of any evaluated point (default, tuned, GFM, or intermediate budget)
  in the comparison on that dataset; 0 when err is 0.
- Overhead of a point on a dataset: log2(cost / cheapest eligible reference cost on that
  dataset), the reference being the cheapest point with a positive, finite cost there. A Mean
  Overhead of 1.0 is a geometric-mean cost multiplier of 2.
- A point is on the frontier when no other point is at least as good on both axes and strictly
  better on one.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

TIME = "workflow_s"
MEMORY = "workflow_peak_bytes"


def dataset_means(points: pd.DataFrame, cost: str) -> pd.DataFrame:
    """Per (view, dataset): mean score and mean cost over partitions."""
    g = points.groupby(["view", "dataset"], observed=True)
    return g.agg(score=("score", "mean"), cost=(cost, "mean")).reset_index()


def improvability(dm: pd.DataFrame, best_error: pd.Series | None = None) -> pd.Series:
    """Per-row improvability; ``best_error`` (indexed by dataset) defaults to the best in ``dm``."""
    err = 1.0 - dm["score"]
    if best_error is None:
        best = err.groupby(dm["dataset"]).transform("min")
    else:
        best = dm["dataset"].map(best_error).astype(float)  # float: mapping no rows at all gives text
    with np.errstate(divide="ignore", invalid="ignore"):
        imp = np.where(err > 0, (err - best) / err, 0.0)
    return pd.Series(imp, index=dm.index, name="improvability")


def overhead(dm: pd.DataFrame, reference_cost: pd.Series | None = None) -> pd.Series:
    """Per-row log2(cost / cheapest eligible cost on the dataset); NaN where cost is unusable."""
    cost = dm["cost"].where(np.isfinite(dm["cost"]) & (dm["cost"] > 0))
    if reference_cost is None:
        ref = cost.groupby(dm["dataset"]).transform("min")
    else:
        ref = dm["dataset"].map(reference_cost).astype(float)
    return pd.Series(np.log2(cost / ref), index=dm.index, name="overhead")


def best_error_by_dataset(*frames: pd.DataFrame) -> pd.Series:
    allp = pd.concat([f[["view", "dataset", "score"]] for f in frames])
    m = allp.groupby(["view", "dataset"])["score"].mean()
    return (1.0 - m).groupby(level="dataset").min()


def cheapest_by_dataset(cost: str, *frames: pd.DataFrame) -> pd.Series:
    allp = pd.concat([f[["view", "dataset", cost]] for f in frames])
    m = allp.groupby(["view", "dataset"])[cost].mean()
    m = m[np.isfinite(m) & (m > 0)]
    return m.groupby(level="dataset").min()


def tradeoff(
    points: pd.DataFrame, cost: str, best_error: pd.Series | None = None, reference_cost: pd.Series | None = None
) -> pd.DataFrame:
    """Per view: mean_improvability, mean_overhead, datasets (one regime)."""
    dm = dataset_means(points, cost)
    dm["improvability"] = improvability(dm, best_error)
    dm["overhead"] = overhead(dm, reference_cost)
    out = dm.groupby("view").agg(
        mean_improvability=("improvability", "mean"),
        mean_overhead=("overhead", "mean"),
        datasets=("dataset", "nunique"),
    )
    return out.reset_index()


def pareto_front(df: pd.DataFrame, x: str = "mean_improvability", y: str = "mean_overhead") -> pd.Series:
    """Boolean mask of the non-dominated rows (lower is better on both axes; NaN rows are off)."""
    xv, yv = df[x].to_numpy(dtype=float), df[y].to_numpy(dtype=float)
    ok = np.isfinite(xv) & np.isfinite(yv)
    on = np.zeros(len(df), dtype=bool)
    idx = np.flatnonzero(ok)
    for i in idx:
        le = (xv[idx] <= xv[i]) & (yv[idx] <= yv[i])
        lt = (xv[idx] < xv[i]) | (yv[idx] < yv[i])
        on[i] = not np.any(le & lt)
    return pd.Series(on, index=df.index, name="on_front")
