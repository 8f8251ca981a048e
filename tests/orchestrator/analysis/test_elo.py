"""Elo: the protocol's battle rules, the virtual-draw prior, anchoring, bootstrap, and one answer per input."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from bencheval.elo_utils import EloHelper

from orchestrator.analysis import elo

from .conftest import results_rows

# Ten partitions (2 datasets x 5 splits) of a three-method toy with ties. Pairwise results:
# A beats B 7.5/10, B beats C 7.5/10, A beats C 9/10 -> Bradley-Terry fits exactly with
# P(A>B) = P(B>C) = 3/4 and P(A>C) = 9/10, i.e. Elo gaps of 400*log10(3) each.
UNITS = (
    [(0.9, 0.8, 0.7)] * 4  # A > B > C
    + [(0.5, 0.5, 0.5)] * 2  # three-way tie
    + [(0.8, 0.9, 0.7)]  # B > A > C
    + [(0.9, 0.7, 0.8)]  # A > C > B
    + [(0.9, 0.9, 0.7)]  # A = B > C
    + [(0.9, 0.7, 0.7)]  # A > B = C
)
GAP = 400 * math.log10(3)


def toy() -> pd.DataFrame:
    scores = {m: [[UNITS[d * 5 + s][i] for s in range(5)] for d in range(2)] for i, m in enumerate("ABC")}
    return results_rows(scores)


def _fit(totals: elo.PairTotals, prior: float) -> pd.Series:
    ratings = elo.bradley_terry(
        totals.first, totals.second, totals.won_first.sum(0), totals.won_second.sum(0), len(totals.views), prior=prior
    )
    return pd.Series(ratings, index=totals.views)


def test_without_the_prior_the_toy_with_ties_matches_the_closed_form():
    r = _fit(elo.pair_totals(elo.partition_errors(toy())), prior=0.0)
    assert r["A"] - r["B"] == pytest.approx(GAP, abs=1e-6)
    assert r["B"] - r["C"] == pytest.approx(GAP, abs=1e-6)


def test_the_prior_shrinks_gaps_toward_the_centre_and_keeps_the_order():
    out = elo.elo_ratings(toy(), anchor="C", rounds=20).set_index("view")
    assert out.loc["C", "elo"] == pytest.approx(1000.0, abs=1e-9)
    ab, bc = out.loc["A", "elo"] - out.loc["B", "elo"], out.loc["B", "elo"] - out.loc["C", "elo"]
    # one virtual draw per view against two opponents on two datasets: about a quarter of each gap
    assert 0.7 * GAP < ab < GAP and 0.7 * GAP < bc < GAP


def test_pair_totals_are_bencheval_battles_with_ties_half_and_each_partition_one_fifth():
    pe = elo.partition_errors(toy())
    totals = elo.pair_totals(pe)
    b = EloHelper(
        method_col="view", task_col="dataset", error_col="error", split_col="split"
    ).convert_results_to_battles(pe)
    assert len(b) == 3 * 10 and np.allclose(b["weight"], 1 / 5)
    for p, (i, j) in enumerate(zip(totals.first, totals.second, strict=True)):
        x, y = totals.views[i], totals.views[j]
        pair = b[((b["view_1"] == x) & (b["view_2"] == y)) | ((b["view_1"] == y) & (b["view_2"] == x))]
        won = sum(
            w * (0.5 if win == "tie" else float((win == "1") == (v1 == x)))
            for v1, win, w in zip(pair["view_1"], pair["winner"], pair["weight"], strict=True)
        )
        assert totals.won_first[:, p].sum() == pytest.approx(won)
        assert totals.won_second[:, p].sum() == pytest.approx(pair["weight"].sum() - won)
    # in whole partitions: A beats B 7.5 of 10, B beats C 7.5, A beats C 9
    whole = dict(
        zip(
            zip(totals.views[totals.first], totals.views[totals.second], strict=True),
            5 * totals.won_first.sum(0),
            strict=True,
        )
    )
    assert whole == pytest.approx({("A", "B"): 7.5, ("A", "C"): 9.0, ("B", "C"): 7.5})


def test_each_dataset_weighs_one_however_many_partitions():
    # d0: A wins on all five partitions; d1 (one partition recorded): B wins. Equal weight -> equal Elo.
    res = results_rows({"A": [[0.9] * 5, [0.1]], "B": [[0.1] * 5, [0.9]]})
    out = elo.elo_ratings(res, anchor="B", rounds=10).set_index("view")
    assert out.loc["A", "elo"] == pytest.approx(out.loc["B", "elo"], abs=1e-6)
    totals = elo.pair_totals(elo.partition_errors(res))
    assert sorted((totals.won_first + totals.won_second).sum(axis=1).round(9)) == [1.0, 1.0]


def test_bootstrap_interval_contains_point_estimate_and_anchor_is_fixed(rng):
    views = ["A", "B", "C", "D", "E"]
    skill = {"A": 0.05, "B": 0.03, "C": 0.0, "D": -0.02, "E": -0.04}
    scores = {v: [[0.7 + skill[v] + rng.normal(0, 0.05) for _ in range(5)] for _ in range(12)] for v in views}
    out = elo.elo_ratings(results_rows(scores), anchor="C", anchor_rating=1200, rounds=200)
    assert (out["lower"] <= out["elo"] + 1e-9).all() and (out["elo"] <= out["upper"] + 1e-9).all()
    assert (out["upper"] - out["lower"] > 0).all()
    assert out.set_index("view").loc["C", "elo"] == pytest.approx(1200.0)
    # anchoring only shifts: gaps are the same with another anchor
    other = elo.elo_ratings(results_rows(scores), anchor="E", rounds=200).set_index("view")
    a = out.set_index("view")
    assert a.loc["A", "elo"] - a.loc["B", "elo"] == pytest.approx(other.loc["A", "elo"] - other.loc["B", "elo"])


def test_the_bootstrap_draws_bencheval_resamples(rng, monkeypatch):
    # with the prior off, on a field with no perfect record, each resample's fit is bencheval's
    views = ["A", "B", "C", "D"]
    scores = {v: [[round(rng.uniform(0.5, 0.9), 2) for _ in range(5)] for _ in range(8)] for v in views}
    pe = elo.partition_errors(results_rows(scores))
    helper = EloHelper(method_col="view", task_col="dataset", error_col="error", split_col="split")
    ref = helper.compute_elo_ratings_from_ranks(pe, seed=0, BOOTSTRAP_ROUNDS=25, show_process=False)
    monkeypatch.setattr(elo, "PRIOR_DRAWS", 0.0)
    fit = elo.bradley_terry
    monkeypatch.setattr(elo, "bradley_terry", lambda *args, prior=0.0: fit(*args, prior=0.0))
    ours = elo._bootstrap(elo.pair_totals(pe), rounds=25, seed=0)
    assert np.allclose(ours[ref.columns].to_numpy(), ref.to_numpy(), atol=0.05)


def test_incomplete_schedule_gets_ratings_and_counts_datasets():
    res = results_rows({"A": [[0.9] * 5, [0.8] * 5], "B": [[0.7] * 5, [0.85] * 5], "U": [[0.95] * 5]})
    out = elo.elo_ratings(res, anchor="B", rounds=20)
    assert (out["lower"] <= out["elo"] + 1e-6).all() and (out["elo"] <= out["upper"] + 1e-6).all()
    assert out.set_index("view").loc["U", "datasets"] == 1


# Three datasets: "W" wins every battle, "L" loses every one, "M" and "N" split theirs.
PERFECT = {
    "W": [[0.95] * 5, [0.9] * 5, [0.97] * 5],
    "M": [[0.80, 0.70, 0.80, 0.70, 0.75]] * 3,
    "N": [[0.70, 0.80, 0.70, 0.80, 0.75]] * 3,
    "L": [[0.10] * 5, [0.20] * 5, [0.15] * 5],
}


def _perfect_ratings(order_seed: int | None = None) -> pd.DataFrame:
    res = results_rows(PERFECT)
    if order_seed is not None:
        res = res.sample(frac=1.0, random_state=order_seed).reset_index(drop=True)
    return elo.elo_ratings(res, anchor="M", rounds=200).set_index("view").sort_index()


def test_perfect_records_get_finite_ratings_that_do_not_depend_on_the_input_order():
    base = _perfect_ratings()
    assert np.isfinite(base[["elo", "lower", "upper"]].to_numpy()).all()
    assert base.loc["W", "elo"] > base.loc["M", "elo"] > base.loc["L", "elo"]
    assert base.loc["W", "elo"] - base.loc["L", "elo"] < 4000  # an unregularised fit reports wherever it stopped
    for seed in (1, 2):
        assert np.allclose(
            _perfect_ratings(seed)[["elo", "lower", "upper"]], base[["elo", "lower", "upper"]], rtol=0, atol=1e-6
        )


_CHILD = """
import json, sys
from tests.orchestrator.analysis.test_elo import _perfect_ratings
print(json.dumps(_perfect_ratings()[["elo", "lower", "upper"]].to_dict()))
"""


def test_perfect_records_get_the_same_ratings_under_another_blas_thread_count():
    ratings = []
    for threads in ("1", "2"):
        env = {**os.environ, "OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        done = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True)
        ratings.append(pd.DataFrame(json.loads(done.stdout)))
    pd.testing.assert_frame_equal(ratings[0], ratings[1], rtol=0, atol=1e-6)
