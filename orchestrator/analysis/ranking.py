"""Mean ranks, win rates, paired significance tests and aggregation-rule sensitivity.

Mean rank (docs/analysis.md, "Aggregations"): average each view's score over the partitions of a dataset, rank the views
per dataset (1 = best, ties share the average rank), then average ranks with equal dataset
weight; the interquartile range is over the per-dataset ranks. bencheval ranks each partition
first and averages those ranks, which is a different rule, so mean rank is computed here.

Win rates come from bencheval (ties half, each dataset weighs one across its partitions).
Significance: a Wilcoxon signed-rank test per pair of views on their per-dataset mean scores
(scipy), Holm-corrected over all pairs (statsmodels); and a Friedman test with the Nemenyi
post-hoc over the views that share every dataset (scipy, scikit-posthocs).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pandas as pd
import scikit_posthocs
from bencheval.winrate_utils import compute_winrate_matrix
from scipy import stats
from statsmodels.stats.multitest import multipletests


def dataset_scores(results: pd.DataFrame, metric: str = "score") -> pd.DataFrame:
    """Wide table: rows dataset, columns view, values the mean of ``metric`` over partitions."""
    return results.pivot_table(index="dataset", columns="view", values=metric, aggfunc="mean", observed=True)


def per_dataset_ranks(results: pd.DataFrame, metric: str = "score") -> pd.DataFrame:
    wide = dataset_scores(results, metric)
    return wide.rank(axis=1, ascending=False, method="average")


def mean_rank(results: pd.DataFrame, metric: str = "score") -> pd.DataFrame:
    """view, mean_rank, rank_q25, rank_q75, rank_iqr, datasets (one regime's results)."""
    ranks = per_dataset_ranks(results, metric)
    out = pd.DataFrame(
        {
            "mean_rank": ranks.mean(),
            "rank_q25": ranks.quantile(0.25),
            "rank_q75": ranks.quantile(0.75),
            "datasets": ranks.notna().sum(),
        }
    )
    out["rank_iqr"] = out["rank_q75"] - out["rank_q25"]
    out.index.name = "view"
    return out.reset_index().sort_values("mean_rank").reset_index(drop=True)


def winrate_matrix(results: pd.DataFrame, metric: str = "score") -> pd.DataFrame:
    """(i, j) = share of partition battles i wins against j (ties half, datasets weigh one)."""
    df = results[["view", "dataset", "split", metric]].dropna().copy()
    df["error"] = 1.0 - df[metric]
    df["view"] = df["view"].astype(str)
    m = compute_winrate_matrix(df, task_col="dataset", method_col="view", error_col="error", seed_col="split")
    m.index.name, m.columns.name = "view", "opponent"
    return m


def mean_winrate(matrix: pd.DataFrame) -> pd.Series:
    return matrix.mean(axis=1, skipna=True).rename("mean_winrate")


def pairwise_tests(results: pd.DataFrame, metric: str = "score", alpha: float = 0.05) -> pd.DataFrame:
    """One row per unordered pair: dataset wins/losses/ties, Wilcoxon p, Holm-adjusted p.

    Pairs sharing the same datasets are tested in one vectorised scipy call.
    """
    wide = dataset_scores(results, metric)
    views = sorted(wide.columns)
    pairs = list(itertools.combinations(views, 2))
    cols = ["view_a", "view_b", "datasets", "a_wins", "b_wins", "ties", "mean_diff", "p_value"]
    if not pairs:  # one view: nothing to test, the same columns
        return pd.DataFrame(columns=[*cols, "p_holm", "significant", "better"]).astype({"significant": bool})
    x = wide[views].to_numpy(dtype=float)
    ia = np.array([views.index(a) for a, _ in pairs])
    ib = np.array([views.index(b) for _, b in pairs])
    diff = x[:, ia] - x[:, ib]  # datasets x pairs, NaN where either is missing
    present = ~np.isnan(diff)
    p = np.ones(len(pairs))
    # Batch pairs by which datasets they share.
    patterns, inverse = np.unique(present.T, axis=0, return_inverse=True)
    for pi, pattern in enumerate(patterns):
        members = np.flatnonzero(inverse.ravel() == pi)
        if pattern.sum() == 0:
            continue
        block = diff[pattern][:, members]
        testable = np.any(block != 0, axis=0)
        # Exact null distribution for small samples without zeros or tied magnitudes, the normal
        # approximation otherwise (scipy's "auto" would fall back to a slow permutation test).
        srt = np.sort(np.abs(block), axis=0)
        clean = np.all(srt != 0, axis=0) & np.all(np.diff(srt, axis=0) != 0, axis=0)
        for sel, method in (
            (testable & clean, "exact" if block.shape[0] <= 50 else "approx"),
            (testable & ~clean, "approx"),
        ):
            if sel.any():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    res = stats.wilcoxon(block[:, sel], zero_method="zsplit", method=method, axis=0)
                p[members[sel]] = np.nan_to_num(np.atleast_1d(res.pvalue), nan=1.0)
    n = present.sum(axis=0)
    d0 = np.where(present, diff, 0.0)
    wins, losses = (d0 > 0).sum(axis=0), (d0 < 0).sum(axis=0)
    with np.errstate(invalid="ignore"):
        mean_diff = d0.sum(axis=0) / np.where(n > 0, n, np.nan)
    out = pd.DataFrame(
        {
            "view_a": [a for a, _ in pairs],
            "view_b": [b for _, b in pairs],
            "datasets": n,
            "a_wins": wins,
            "b_wins": losses,
            "ties": n - wins - losses,
            "mean_diff": mean_diff,
            "p_value": p,
        }
    )
    reject, p_holm, _, _ = multipletests(out["p_value"], alpha=alpha, method="holm")
    out["p_holm"] = p_holm
    out["significant"] = reject
    out["better"] = np.where(out["significant"], np.where(out["mean_diff"] > 0, out["view_a"], out["view_b"]), "")
    return out


def significant_record(tests: pd.DataFrame) -> pd.DataFrame:
    """Per view: number of significant wins and losses after correction."""
    if tests.empty:
        return pd.DataFrame(columns=["view", "sig_wins", "sig_losses"])
    sig = tests[tests["significant"]]
    loser = np.where(sig["better"] == sig["view_a"], sig["view_b"], sig["view_a"])
    views = pd.Index(sorted(set(tests["view_a"]) | set(tests["view_b"])))
    wins = sig["better"].value_counts().reindex(views, fill_value=0)
    losses = pd.Series(loser).value_counts().reindex(views, fill_value=0)
    return pd.DataFrame({"view": views, "sig_wins": wins.to_numpy(), "sig_losses": losses.to_numpy()})


def friedman_nemenyi(results: pd.DataFrame, metric: str = "score") -> tuple[dict, pd.DataFrame]:
    """Friedman test over datasets shared by every view, and the Nemenyi post-hoc p-value matrix."""
    wide = dataset_scores(results, metric).dropna(axis=0, how="any")
    if wide.shape[0] < 2 or wide.shape[1] < 3:
        return {
            "datasets": int(wide.shape[0]),
            "views": int(wide.shape[1]),
            "statistic": np.nan,
            "p_value": np.nan,
        }, pd.DataFrame()
    stat = stats.friedmanchisquare(*[wide[c].to_numpy() for c in wide.columns])
    nem = scikit_posthocs.posthoc_nemenyi_friedman(wide.to_numpy())
    nem.index = nem.columns = wide.columns
    return {
        "datasets": int(wide.shape[0]),
        "views": int(wide.shape[1]),
        "statistic": float(stat.statistic),
        "p_value": float(stat.pvalue),
    }, nem


def rule_sensitivity(rankings: dict[str, pd.Series]) -> pd.DataFrame:
    """Spearman correlation between the orderings of different aggregation rules.

    ``rankings`` maps a rule name to a Series over views where *higher is better*.
    """
    frame = pd.DataFrame(rankings).dropna()
    names = list(frame.columns)
    out = pd.DataFrame(np.eye(len(names)), index=names, columns=names)
    for a, b in itertools.combinations(names, 2):
        # undefined (NaN) with under three views or a rule that ranks them all alike: said as NaN, not as a warning
        varied = len(frame) > 2 and frame[a].nunique() > 1 and frame[b].nunique() > 1
        rho = stats.spearmanr(frame[a], frame[b]).statistic if varied else np.nan
        out.loc[a, b] = out.loc[b, a] = rho
    out.index.name = "rule"
    return out
