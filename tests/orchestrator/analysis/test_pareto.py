from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from orchestrator.analysis import pareto as pa


def points(costs: dict[str, list[float]], scores: dict[str, list[float]] | None = None) -> pd.DataFrame:
    rows = []
    for view, cs in costs.items():
        for d, c in enumerate(cs):
            for s in range(5):
                sc = scores[view][d] if scores else 0.8
                rows.append({"view": view, "dataset": f"d{d}", "split": s, "workflow_s": c, "score": sc})
    return pd.DataFrame(rows)


def test_mean_overhead_is_one_for_twice_the_cost_everywhere():
    p = points({"REF": [1.0, 30.0, 0.2], "M": [2.0, 60.0, 0.4], "Q": [4.0, 120.0, 0.8]})
    t = pa.tradeoff(p, "workflow_s").set_index("view")
    assert t.loc["REF", "mean_overhead"] == pytest.approx(0.0)
    assert t.loc["M", "mean_overhead"] == pytest.approx(1.0)
    assert t.loc["Q", "mean_overhead"] == pytest.approx(2.0)


def test_improvability_relative_to_best_error_on_each_dataset():
    p = points({"A": [1, 1], "B": [1, 1]}, scores={"A": [0.9, 0.6], "B": [0.8, 0.8]})
    t = pa.tradeoff(p, "workflow_s").set_index("view")
    # A: d0 best (0), d1 err .4 vs best .2 -> 0.5; B: d0 err .2 vs .1 -> 0.5, d1 best
    assert t.loc["A", "mean_improvability"] == pytest.approx(0.25)
    assert t.loc["B", "mean_improvability"] == pytest.approx(0.25)


def test_pareto_front_drops_dominated_points():
    df = pd.DataFrame(
        {
            "view": ["a", "b", "c", "d", "e"],
            "mean_improvability": [0.10, 0.20, 0.30, 0.10, np.nan],
            "mean_overhead": [3.0, 1.0, 2.0, 4.0, 0.0],
        }
    )
    on = pa.pareto_front(df)
    assert list(df.loc[on, "view"]) == ["a", "b"]  # c dominated by b, d by a, e has no value


def test_nonpositive_costs_are_not_references():
    p = points({"A": [0.0, 2.0], "B": [4.0, 4.0]})
    t = pa.tradeoff(p, "workflow_s").set_index("view")
    assert t.loc["B", "mean_overhead"] == pytest.approx(np.mean([0.0, 1.0]))
