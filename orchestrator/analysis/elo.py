"""Elo ratings from partition-level battles on the primary metric, with dataset bootstrap.

Rules (``docs/analysis.md``, "Aggregations"): every pair of views that both have a result on
the same (dataset, split) plays one battle on the primary test metric; a tie counts half a win
to each side; each battle weighs 1 / (number of partitions of its dataset), i.e. 1/5, so every
dataset weighs one; ratings are the Bradley-Terry fit on the 400-point Elo scale; intervals are
the 2.5% and 97.5% quantiles over 200 bootstrap resamples of datasets (drawn as bencheval draws
them); the point estimate is shifted so a named anchor view has a fixed rating (the interval
moves with it).

Why a prior: a view that wins (or loses) every battle has no finite maximum-likelihood rating,
so an unregularised fit reports wherever its solver stopped (15,000 Elo, machine-dependent).
Each view is therefore credited ``PRIOR_DRAWS`` virtual draws, of one dataset's weight, against
a fixed reference at the centre of the scale (the "virtual draw" prior of Coulom's BayesElo and
Whole-History Rating). The penalised likelihood is then strictly convex and coercive: every
input, perfect records included, has one finite optimum, which damped Newton steps reach to
machine precision, so two machines agree far below what the report prints (the golden tables
compare at 1e-6 Elo). The cost is a shrinkage toward the centre that shrinks with the data:
about 1/(datasets x opponents) of each gap, well under one Elo on the paper's 51-dataset field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

SCALE = 400
INIT_RATING = 1000.0
BOOTSTRAP_ROUNDS = 200
PRIOR_DRAWS = 1.0  # virtual draws per view against the centre, in datasets' worth of battles
TAIL = 0.025  # each tail of the 95% interval: its ends are the TAIL and 1 - TAIL quantiles of the resamples
_STEP_TOL = 1e-12  # Newton stops when no log-strength moves more than this (about 2e-10 Elo)
_MAX_NEWTON = 100


def partition_errors(results: pd.DataFrame, metric: str = "score") -> pd.DataFrame:
    """(view, dataset, split, error) with error = 1 - metric (lower is better)."""
    df = results[["view", "dataset", "split", metric]].dropna(subset=[metric])
    return pd.DataFrame(
        {
            "view": df["view"].astype(str).to_numpy(),
            "dataset": df["dataset"].astype(str).to_numpy(),
            "split": df["split"].astype(int).to_numpy(),
            "error": 1.0 - df[metric].to_numpy(dtype=float),
        }
    )


@dataclass(frozen=True)
class PairTotals:
    """Battle scores summed per dataset and unordered pair of views: the fit's sufficient statistics.

    ``first[p]`` < ``second[p]`` index ``views``; ``won_first[d, p]`` is what ``first[p]`` scored
    against ``second[p]`` on dataset ``d`` (ties half, each partition 1 / partitions of ``d``),
    ``won_second[d, p]`` the rest of that pair's weight there.
    """

    views: pd.Index
    datasets: np.ndarray
    first: np.ndarray
    second: np.ndarray
    won_first: np.ndarray
    won_second: np.ndarray


def pair_totals(pe: pd.DataFrame) -> PairTotals:
    """Every battle of ``partition_errors`` output, summed per dataset and pair (no battle table is built)."""
    if pe.duplicated(subset=["view", "dataset", "split"]).any():
        raise ValueError("a view has more than one result on one (dataset, split)")
    views = pd.Index(sorted(pe["view"].unique()))
    datasets, dataset_of = np.unique(pe["dataset"].to_numpy(), return_inverse=True)
    units = pd.MultiIndex.from_arrays([dataset_of, pe["split"].to_numpy()]).unique().sort_values()
    unit_of = units.get_indexer(pd.MultiIndex.from_arrays([dataset_of, pe["split"].to_numpy()]))
    errors = np.full((len(views), len(units)), np.nan)
    errors[views.get_indexer(pe["view"]), unit_of] = pe["error"].to_numpy(dtype=float)
    unit_dataset = units.get_level_values(0).to_numpy()
    weight = 1.0 / np.bincount(unit_dataset, minlength=len(datasets))[unit_dataset]  # 1 / partitions of the dataset
    first, second = np.triu_indices(len(views), k=1)
    a, b = errors[first], errors[second]  # (pairs, units)
    met = ~(np.isnan(a) | np.isnan(b))
    score = np.where(a < b, 1.0, np.where(a > b, 0.0, 0.5)) * weight * met
    per_dataset = np.zeros((len(units), len(datasets)))
    per_dataset[np.arange(len(units)), unit_dataset] = 1.0
    won_first = (score @ per_dataset).T
    won_second = ((met * weight - score) @ per_dataset).T
    return PairTotals(views, datasets, first, second, won_first, won_second)


def bradley_terry(
    first: np.ndarray,
    second: np.ndarray,
    won_first: np.ndarray,
    won_second: np.ndarray,
    n: int,
    prior: float = PRIOR_DRAWS,
) -> np.ndarray:
    """Elo ratings (centre ``INIT_RATING``) maximising the Bradley-Terry likelihood plus the virtual-draw prior.

    Minimises ``sum_p won_first*log(1+e^-d) + won_second*log(1+e^d)`` (``d`` = log-strength gap of the
    pair) ``+ prior/2 * sum_i [log(1+e^-t_i) + log(1+e^t_i)]`` by Newton steps with a backtracking line
    search, from zero. ``prior > 0`` makes the objective strictly convex and coercive, so the answer is
    unique whatever the order of the input; ``prior = 0`` is the plain maximum-likelihood fit.
    """
    t = np.zeros(n)

    def objective(t: np.ndarray) -> float:
        d = t[first] - t[second]
        data = won_first @ np.logaddexp(0.0, -d) + won_second @ np.logaddexp(0.0, d)
        return float(data + 0.5 * prior * np.sum(np.logaddexp(0.0, -t) + np.logaddexp(0.0, t)))

    f = objective(t)
    for _ in range(_MAX_NEWTON):
        d = t[first] - t[second]
        p = 0.5 * (1.0 + np.tanh(0.5 * d))  # P(first beats second)
        gd = won_second * p - won_first * (1.0 - p)
        q = 0.5 * (1.0 + np.tanh(0.5 * t))
        grad = np.bincount(first, gd, n) - np.bincount(second, gd, n) + prior * (q - 0.5)
        h = (won_first + won_second) * p * (1.0 - p)
        hess = np.zeros((n, n))
        hess[first, second] = -h  # each unordered pair appears once, so plain assignment is exact
        hess[second, first] = -h
        hess[np.diag_indices(n)] = np.bincount(first, h, n) + np.bincount(second, h, n) + prior * q * (1.0 - q)
        step = np.linalg.solve(hess, grad) if prior > 0 else np.linalg.lstsq(hess, grad, rcond=None)[0]
        lam = 1.0
        while True:
            t_new = t - lam * step
            f_new = objective(t_new)
            if f_new <= f - 1e-4 * lam * (grad @ step) or lam < 1e-10:
                break
            lam *= 0.5
        moved = np.max(np.abs(t_new - t), initial=0.0)
        t, f = t_new, f_new
        if moved < _STEP_TOL or lam < 1e-10:
            break
    return SCALE * t / np.log(10) + INIT_RATING


def bootstrap_supported(datasets: int, tail: float = TAIL) -> bool:
    """Whether a dataset bootstrap over ``datasets`` datasets can resolve an interval cut at ``tail`` each side.

    A resample is a multiset of d datasets drawn from d, so there are at most C(2d - 1, d) distinct
    ones, however many rounds are drawn; a quantile at ``tail`` falls between distinct resamples only
    when there are at least 1 / ``tail`` of them (40 for a 95% interval). Below that the ends are
    single resamples such as one dataset repeated d times (d = 2: three resamples in all).
    """
    return datasets >= 1 and math.comb(2 * datasets - 1, datasets) >= math.ceil(1 / tail - 1e-9)


def min_bootstrap_datasets(tail: float = TAIL) -> int:
    """The fewest datasets whose bootstrap supports the interval (5 for 95%: C(9, 5) = 126; C(7, 4) = 35 < 40)."""
    d = 1
    while not bootstrap_supported(d, tail):
        d += 1
    return d


MIN_BOOTSTRAP_DATASETS = min_bootstrap_datasets()


def interval_resolved(native_datasets: float, regime_datasets: int) -> bool:
    """Whether a view's Elo interval is a confidence interval: its regime and its own results both span
    ``MIN_BOOTSTRAP_DATASETS`` datasets (the pages mark every other interval, and the findings say so)."""
    native = 0 if native_datasets != native_datasets else native_datasets  # NaN: no native dataset
    return min(native, regime_datasets) >= MIN_BOOTSTRAP_DATASETS


def _bootstrap(totals: PairTotals, rounds: int, seed: int) -> pd.DataFrame:
    """Ratings of ``rounds`` dataset resamples (with replacement, drawn as bencheval draws them)."""
    n_tasks = len(totals.datasets)
    rng = np.random.default_rng(seed=seed)
    rows = []
    for _ in range(rounds):
        counts = np.bincount(rng.choice(n_tasks, size=n_tasks, replace=True), minlength=n_tasks).astype(float)
        rows.append(
            bradley_terry(
                totals.first, totals.second, counts @ totals.won_first, counts @ totals.won_second, len(totals.views)
            )
        )
    return pd.DataFrame(rows, columns=totals.views)


def elo_ratings(
    results: pd.DataFrame,
    anchor: str | None = None,
    anchor_rating: float = INIT_RATING,
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = 0,
    metric: str = "score",
) -> pd.DataFrame:
    """Elo per view with a 95% dataset-bootstrap interval, for one regime's results.

    Returns columns view, elo, lower, upper, datasets, anchored (bool). ``anchor`` is a view (the
    report passes ``views.reference_view``); no anchor, or one that is absent, leaves ratings centred
    on ``anchor_rating``.
    """
    # The fits are tiny and repeated: a multi-threaded BLAS spends far longer spinning than computing.
    with threadpool_limits(limits=1, user_api="blas"):
        return _elo_ratings(partition_errors(results, metric), anchor, anchor_rating, rounds, seed)


def _elo_ratings(pe: pd.DataFrame, anchor: str | None, anchor_rating: float, rounds: int, seed: int) -> pd.DataFrame:
    views = pd.Index(sorted(pe["view"].unique()))
    n_datasets = pe.groupby("view")["dataset"].nunique()
    if len(views) < 2:
        return pd.DataFrame(
            {
                "view": views,
                "elo": anchor_rating,
                "lower": anchor_rating,
                "upper": anchor_rating,
                "datasets": n_datasets.reindex(views).to_numpy(),
                "anchored": False,
            }
        )
    anchored = anchor is not None and anchor in views
    totals = pair_totals(pe)
    point = pd.Series(
        bradley_terry(
            totals.first, totals.second, totals.won_first.sum(axis=0), totals.won_second.sum(axis=0), len(views)
        ),
        index=views,
    )
    boot = _bootstrap(totals, rounds=rounds, seed=seed)
    offset = (anchor_rating - point[anchor]) if anchored else (anchor_rating - INIT_RATING)
    out = pd.DataFrame(
        {"elo": point + offset, "lower": boot.quantile(TAIL) + offset, "upper": boot.quantile(1 - TAIL) + offset}
    )
    out.index.name = "view"
    out = out.reset_index()
    out["datasets"] = out["view"].map(n_datasets).astype(int)
    out["anchored"] = anchored
    return out.sort_values("elo", ascending=False).reset_index(drop=True)
