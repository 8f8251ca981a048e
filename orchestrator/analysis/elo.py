"""Elo ratings from partition-level battles on the primary metric, with dataset bootstrap.

Rules (SPEC §3): every pair of views that both have a result on the same (dataset, split)
plays one battle on the primary test metric; a tie counts half a win to each side; each battle
weighs 1 / (number of partitions of its dataset), i.e. 1/5, so every dataset weighs one;
ratings are the Bradley-Terry maximum-likelihood fit on the 400-point Elo scale; intervals are
the 2.5% and 97.5% quantiles over 200 bootstrap resamples of datasets; the point estimate is
shifted so a named anchor view has a fixed rating (the interval moves with it).

bencheval implements exactly these rules (``tests/orchestrator/analysis/test_elo.py`` pins that) and is used
as is when every view has every partition (its rank path). When the schedule has holes (a
user submission is never imputed), bencheval's battle-table bootstrap cannot run on numpy >= 2.4
(it calls the removed ``numpy.core.defchararray``), so that case uses bencheval's battle table
and point fit, and a small dataset-bootstrap here that draws the same resamples as bencheval.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits
from bencheval.elo_utils import BT_RIDGE, EloHelper
from bencheval.evaluator import BenchmarkEvaluator

SCALE = 400
INIT_RATING = 1000.0
BOOTSTRAP_ROUNDS = 200


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


def _helper() -> EloHelper:
    return EloHelper(method_col="view", task_col="dataset", error_col="error", split_col="split")


def battles(results: pd.DataFrame, metric: str = "score") -> pd.DataFrame:
    """bencheval's battle table: view_1, view_2, winner ("1", "2", "tie"), dataset, weight, split."""
    return _helper().convert_results_to_battles(partition_errors(results, metric))


def _bt_fit(u: np.ndarray, v: np.ndarray, su: np.ndarray, sv: np.ndarray, n: int, init: np.ndarray | None = None) -> np.ndarray:
    """Bradley-Terry ratings from pair totals (u won su, v won sv), with bencheval's ridge.

    Maximises the same penalised likelihood as bencheval (its logistic fit at C=1e6 is the ridge
    ``BT_RIDGE`` on natural-log strengths) by damped Newton steps on the pair totals.
    """
    t = np.zeros(n) if init is None else np.asarray(init, dtype=float).copy()

    def objective(t: np.ndarray) -> float:
        d = t[u] - t[v]
        return float(su @ np.logaddexp(0.0, -d) + sv @ np.logaddexp(0.0, d) + BT_RIDGE * (t @ t))

    f = objective(t)
    for _ in range(200):
        d = t[u] - t[v]
        p = 0.5 * (1.0 + np.tanh(0.5 * d))  # sigmoid(d): P(u beats v)
        gd = -su * (1.0 - p) + sv * p
        grad = np.bincount(u, weights=gd, minlength=n) - np.bincount(v, weights=gd, minlength=n) + 2 * BT_RIDGE * t
        h = (su + sv) * p * (1.0 - p)
        hess = np.zeros((n, n))
        np.add.at(hess, (u, u), h)
        np.add.at(hess, (v, v), h)
        np.add.at(hess, (u, v), -h)
        np.add.at(hess, (v, u), -h)
        hess[np.diag_indices(n)] += 2 * BT_RIDGE
        step = np.linalg.solve(hess, grad)
        lam = 1.0
        while True:
            t_new = t - lam * step
            f_new = objective(t_new)
            if f_new <= f - 1e-4 * lam * (grad @ step) or lam < 1e-8:
                break
            lam *= 0.5
        t, f = t_new, f_new
        # converged on the ratings themselves (Newton's last steps shrink quadratically): stopping on a small
        # change of the objective instead left them 1e-6 Elo short, by an amount that moved with the BLAS build
        if np.max(np.abs(lam * step)) < 1e-10 or lam < 1e-8:
            break
    return SCALE * t / np.log(10) + INIT_RATING


def _bootstrap_from_battles(b: pd.DataFrame, views: pd.Index, rounds: int, seed: int) -> pd.DataFrame:
    """Dataset-bootstrap ratings from a battle table, drawing resamples exactly as bencheval does."""
    idx = pd.Series(np.arange(len(views)), index=views)
    a, c = idx[b["view_1"]].to_numpy(), idx[b["view_2"]].to_numpy()
    w = b["weight"].to_numpy(dtype=float)
    win = b["winner"].to_numpy()
    score_a = np.where(win == "1", 1.0, np.where(win == "2", 0.0, 0.5)) * w
    score_c = w - score_a
    u, v = np.minimum(a, c), np.maximum(a, c)
    su = np.where(a == u, score_a, score_c)
    sv = np.where(a == u, score_c, score_a)
    tasks, task_of = np.unique(b["dataset"].to_numpy(), return_inverse=True)
    pair_keys, pair_of = np.unique(u * len(views) + v, return_inverse=True)
    n_tasks, n_pairs = len(tasks), len(pair_keys)
    SU = np.zeros((n_tasks, n_pairs))
    SV = np.zeros((n_tasks, n_pairs))
    np.add.at(SU, (task_of, pair_of), su)
    np.add.at(SV, (task_of, pair_of), sv)
    pu, pv = pair_keys // len(views), pair_keys % len(views)
    rng = np.random.default_rng(seed=seed)
    rows = []
    init = None
    for _ in range(rounds):
        counts = np.bincount(rng.choice(n_tasks, size=n_tasks, replace=True), minlength=n_tasks).astype(float)
        elo = _bt_fit(pu, pv, counts @ SU, counts @ SV, len(views), init=init)
        init = (elo - INIT_RATING) * np.log(10) / SCALE
        rows.append(elo)
    return pd.DataFrame(rows, columns=views)


def elo_ratings(
    results: pd.DataFrame,
    anchor: str | None = None,
    anchor_rating: float = INIT_RATING,
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = 0,
    metric: str = "score",
) -> pd.DataFrame:
    """Elo per view with a 95% dataset-bootstrap interval, for one regime's results.

    Returns columns view, elo, lower, upper, datasets, anchored (bool), path ("ranks" when
    bencheval's complete-schedule path ran, "battles" otherwise). ``anchor`` is a view (the report
    passes ``views.reference_view``); no anchor, or one that is absent, leaves ratings centred on
    ``anchor_rating``.
    """
    # The fits are tiny and repeated; a multi-threaded BLAS spends far longer spinning than computing.
    with threadpool_limits(limits=1, user_api="blas"):
        return _elo_ratings(results, anchor, anchor_rating, rounds, seed, metric)


def _elo_ratings(results, anchor, anchor_rating, rounds, seed, metric) -> pd.DataFrame:
    pe = partition_errors(results, metric)
    views = pd.Index(sorted(pe["view"].unique()))
    n_datasets = pe.groupby("view")["dataset"].nunique()
    if len(views) < 2:
        return pd.DataFrame(
            {"view": views, "elo": anchor_rating, "lower": anchor_rating, "upper": anchor_rating,
             "datasets": n_datasets.reindex(views).to_numpy(), "anchored": False, "path": "none"}
        )
    anchored = anchor is not None and anchor in views
    helper = _helper()
    if helper.can_compute_elo_from_ranks(pe):
        ev = BenchmarkEvaluator(
            method_col="view", task_col="dataset", error_col="error", seed_column="split", columns_to_agg_extra=None
        )
        bars = ev.compute_elo(
            results_per_task=pe,
            calibration_framework=anchor if anchored else None,
            calibration_elo=anchor_rating,
            INIT_RATING=anchor_rating if not anchored else INIT_RATING,
            BOOTSTRAP_ROUNDS=rounds,
            SCALE=SCALE,
            round_decimals=None,
            clip_negative_ci=False,
        )
        out = pd.DataFrame(
            {"elo": bars["elo"], "lower": bars["elo"] - bars["elo-"], "upper": bars["elo"] + bars["elo+"]}
        )
        path = "ranks"
    else:
        b = helper.convert_results_to_battles(pe)
        point = helper.compute_mle_elo(b, INIT_RATING=INIT_RATING, SCALE=SCALE).reindex(views)
        boot = _bootstrap_from_battles(b, views, rounds=rounds, seed=seed)
        offset = (anchor_rating - point[anchor]) if anchored else (anchor_rating - INIT_RATING)
        out = pd.DataFrame(
            {
                "elo": point + offset,
                "lower": point + offset - (point - boot.quantile(0.025)),
                "upper": point + offset + (boot.quantile(0.975) - point),
            }
        )
        path = "battles"
    out.index.name = "view"
    out = out.reset_index()
    out["datasets"] = out["view"].map(n_datasets).astype(int)
    out["anchored"] = anchored
    out["path"] = path
    return out.sort_values("elo", ascending=False).reset_index(drop=True)
