from __future__ import annotations

import numpy as np
import pytest

from orchestrator.analysis import ranking as rk

from .conftest import results_rows


def test_mean_rank_averages_partitions_before_ranking():
    # d0: A wins 3 of 5 partitions narrowly but loses 2 badly -> lower mean score -> rank 2 on d0.
    res = results_rows(
        {"A": [[0.81, 0.81, 0.81, 0.1, 0.1], [0.9] * 5, [0.9] * 5], "B": [[0.8] * 5, [0.5] * 5, [0.9] * 5]}
    )
    mr = rk.mean_rank(res).set_index("view")
    assert mr.loc["A", "mean_rank"] == pytest.approx((2 + 1 + 1.5) / 3)
    assert mr.loc["B", "mean_rank"] == pytest.approx((1 + 2 + 1.5) / 3)
    assert mr.loc["A", "rank_iqr"] == pytest.approx(np.quantile([2, 1, 1.5], 0.75) - np.quantile([2, 1, 1.5], 0.25))


def test_winrate_counts_ties_half_and_datasets_equally():
    res = results_rows({"A": [[0.9] * 5, [0.5]], "B": [[0.5] * 5, [0.5]]})
    m = rk.winrate_matrix(res)
    assert m.loc["A", "B"] == pytest.approx((1.0 + 0.5) / 2)
    assert m.loc["B", "A"] == pytest.approx((0.0 + 0.5) / 2)


def test_pairwise_tests_holm_correction_and_records(rng):
    n = 20
    scores = {
        "A": [[0.9 + rng.normal(0, 0.01)] for _ in range(n)],
        "B": [[0.7 + rng.normal(0, 0.01)] for _ in range(n)],
        "C": [[0.7 + rng.normal(0, 0.01)] for _ in range(n)],
    }
    t = rk.pairwise_tests(results_rows(scores)).set_index(["view_a", "view_b"])
    assert t.loc[("A", "B"), "significant"] and t.loc[("A", "B"), "better"] == "A"
    assert t.loc[("A", "B"), "a_wins"] == n
    assert not t.loc[("B", "C"), "significant"]
    assert (t["p_holm"] >= t["p_value"] - 1e-12).all()
    rec = rk.significant_record(t.reset_index()).set_index("view")
    assert rec.loc["A", "sig_wins"] == 2 and rec.loc["A", "sig_losses"] == 0


def test_identical_methods_are_not_significant():
    res = results_rows({"A": [[0.8]] * 10, "B": [[0.8]] * 10})
    t = rk.pairwise_tests(res)
    assert t["p_value"].item() == 1.0 and not t["significant"].item()


def test_friedman_nemenyi_and_rule_sensitivity(rng):
    scores = {v: [[0.7 + 0.02 * i + rng.normal(0, 0.01)] for _ in range(15)] for i, v in enumerate("ABCD")}
    stat, nem = rk.friedman_nemenyi(results_rows(scores))
    assert stat["p_value"] < 0.01 and nem.shape == (4, 4)
    import pandas as pd

    s = rk.rule_sensitivity(
        {"x": pd.Series([1, 2, 3, 4], index=list("ABCD")), "y": pd.Series([1, 2, 4, 3], index=list("ABCD"))}
    )
    assert s.loc["x", "y"] == pytest.approx(0.8)
