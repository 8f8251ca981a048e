"""Elo: bencheval's rules checked against the protocol, anchoring, bootstrap, our fallback path."""

from __future__ import annotations

import math

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


def toy() -> pd.DataFrame:
    scores = {m: [[UNITS[d * 5 + s][i] for s in range(5)] for d in range(2)] for i, m in enumerate("ABC")}
    return results_rows(scores)


def test_three_method_toy_with_ties_matches_closed_form():
    out = elo.elo_ratings(toy(), anchor="C", rounds=20).set_index("view")
    gap = 400 * math.log10(3)
    assert out.loc["C", "elo"] == pytest.approx(1000.0, abs=1e-9)
    assert out.loc["B", "elo"] == pytest.approx(1000 + gap, abs=0.05)
    assert out.loc["A", "elo"] == pytest.approx(1000 + 2 * gap, abs=0.05)
    assert set(out["path"]) == {"ranks"}


def test_battles_count_ties_half_and_weigh_each_partition_one_fifth():
    b = elo.battles(toy())
    assert len(b) == 3 * 10  # three pairs on ten partitions
    assert np.allclose(b["weight"], 1 / 5)
    assert (b["winner"] == "tie").sum() == 2 * 3 + 2  # the two three-way ties, plus A=B and B=C
    # wins per pair, ties as half
    def score(x, y):
        s = 0.0
        for _, r in b.iterrows():
            if {r["view_1"], r["view_2"]} == {x, y}:
                s += 0.5 if r["winner"] == "tie" else float((r["winner"] == "1") == (r["view_1"] == x))
        return s
    assert score("A", "B") == 7.5 and score("B", "C") == 7.5 and score("A", "C") == 9.0


def test_each_dataset_weighs_one_however_many_partitions():
    # d0: A wins on all five partitions; d1 (one partition recorded): B wins. Equal weight -> equal Elo.
    res = results_rows({"A": [[0.9] * 5, [0.1]], "B": [[0.1] * 5, [0.9]]})
    out = elo.elo_ratings(res, anchor="B", rounds=10).set_index("view")
    assert out.loc["A", "elo"] == pytest.approx(out.loc["B", "elo"], abs=1e-6)
    b = elo.battles(res)
    assert sorted(b.groupby("dataset")["weight"].sum().round(9)) == [1.0, 1.0]


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


def test_fallback_bootstrap_matches_bencheval_on_a_complete_schedule(rng):
    views = ["A", "B", "C", "D"]
    scores = {v: [[round(rng.uniform(0.5, 0.9), 2) for _ in range(5)] for _ in range(8)] for v in views}
    pe = elo.partition_errors(results_rows(scores))
    helper = EloHelper(method_col="view", task_col="dataset", error_col="error", split_col="split")
    ref = helper.compute_elo_ratings_from_ranks(pe, seed=0, BOOTSTRAP_ROUNDS=25, show_process=False)
    ours = elo._bootstrap_from_battles(helper.convert_results_to_battles(pe), pd.Index(views), rounds=25, seed=0)
    assert np.allclose(ours[ref.columns].to_numpy(), ref.to_numpy(), atol=0.05)
    # and the battle-path point estimate agrees with the rank path
    point = helper.compute_mle_elo(helper.convert_results_to_battles(pe))
    rank_point = helper.compute_mle_elo_from_ranks(pe)
    assert np.allclose(point[views], rank_point[views], atol=0.05)


def test_incomplete_schedule_uses_battle_path():
    res = results_rows({"A": [[0.9] * 5, [0.8] * 5], "B": [[0.7] * 5, [0.85] * 5], "U": [[0.95] * 5]})
    out = elo.elo_ratings(res, anchor="B", rounds=20)
    assert set(out["path"]) == {"battles"}
    assert (out["lower"] <= out["elo"] + 1e-6).all() and (out["elo"] <= out["upper"] + 1e-6).all()
    assert out.set_index("view").loc["U", "datasets"] == 1
