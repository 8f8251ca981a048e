from __future__ import annotations

from itertools import pairwise

import pandas as pd

from orchestrator.analysis import subgroups as sg
from tests.synthetic_trials import synthetic_dataset_stats

from .conftest import results_rows


def test_twenty_two_subgroups_over_seven_properties_without_gaps():
    assert len(sg.SUBGROUPS) == 22
    props = {s.property for s in sg.SUBGROUPS}
    assert props == set(sg.PROPERTY_COLUMNS) and len(props) == 7
    for p in props:
        bins = sorted((s for s in sg.SUBGROUPS if s.property == p), key=lambda s: s.low)
        assert bins[0].low <= {"num_classes": 2}.get(p, 0) and bins[-1].high == float("inf")
        assert all(a.high == b.low for a, b in pairwise(bins))


def test_each_dataset_falls_in_exactly_one_subgroup_per_property():
    stats = synthetic_dataset_stats(30, seed=3)
    m = sg.assign_subgroups(stats)
    assert (m.groupby(["dataset", "property"]).size() == 1).all()
    assert len(m) == 30 * 7


def test_boundaries_are_half_open():
    stats = pd.DataFrame(
        [
            {
                "dataset": "x",
                "num_nodes": 1000,
                "avg_degree": 5,
                "adjusted_homophily": 0.0,
                "feature_dim": 1000,
                "feature_nonzero_fraction": 0.5,
                "num_classes": 11,
                "class_imbalance": 10,
            }
        ]
    )
    got = set(sg.assign_subgroups(stats)["subgroup"])
    assert got == {
        "nodes 1k-10k",
        "degree 5-20",
        "h_adj 0-0.3",
        "features>=1000",
        "dense features (>=10% nonzero)",
        ">10 classes",
        "imbalanced (>=10x)",
    }
    stats["num_classes"] = 2
    assert "binary" in set(sg.assign_subgroups(stats)["subgroup"])


def test_subgroup_ranks_rank_within_the_subgroup():
    res = results_rows({"A": [[0.9] * 5, [0.1] * 5], "B": [[0.5] * 5, [0.5] * 5]})
    stats = pd.DataFrame(
        {
            "dataset": ["d0", "d1"],
            "num_nodes": [100, 500_000],
            "avg_degree": 3,
            "adjusted_homophily": 0.5,
            "feature_dim": 50,
            "feature_nonzero_fraction": 1.0,
            "num_classes": 4,
            "class_imbalance": 1.5,
        }
    )
    r = sg.subgroup_ranks(res, stats).set_index(["subgroup", "view"])
    assert r.loc[("nodes<1k", "A"), "mean_rank"] == 1.0
    assert r.loc[("nodes>=100k", "A"), "mean_rank"] == 2.0
    assert r.loc[("3-10 classes", "A"), "mean_rank"] == 1.5
