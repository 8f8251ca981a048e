"""Statistics: definitions on hand-checkable graphs, column names, the 22 subgroups."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.data.graph import canonicalize
from orchestrator.data.stats import SUBGROUPS, adjusted_homophily, dataset_stats, subgroups
from orchestrator.data.synthetic import load_synthetic

SUBGROUP_COLUMNS = [
    "num_nodes",
    "avg_degree",
    "adjusted_homophily",
    "feature_dim",
    "feature_nonzero_fraction",
    "num_classes",
    "class_imbalance",
]


def square():
    # 4-cycle 0-1-2-3-0 plus a repeated edge and a self-loop (both ignored by the statistics)
    edges = np.array([[0, 1, 2, 3, 1, 2], [1, 2, 3, 0, 0, 2]])
    x = np.array([[1, 0], [1, 0], [0, 1], [0, 0]], np.float32)
    return canonicalize("square", x, edges, np.array([0, 0, 1, 1]))


def test_structure_on_the_simple_graph():
    stats = dataset_stats(square())
    assert stats["num_edges"] == 4
    assert stats["avg_degree"] == 2.0
    assert stats["density"] == pytest.approx(4 / 6)
    assert stats["feature_nonzero_fraction"] == pytest.approx(3 / 8)
    assert stats["class_imbalance"] == 1.0 and stats["label_entropy"] == pytest.approx(1.0)


def test_adjusted_homophily_definition():
    # edges 0-1 (same), 1-2, 3-0 (different), 2-3 (same): h_edge 0.5; p = (0.5, 0.5): h_adj = 0
    assert dataset_stats(square())["adjusted_homophily"] == pytest.approx(0.0)
    # perfectly homophilous: 1; perfectly heterophilous two-class: -1
    y = np.array([0, 0, 1, 1])
    assert adjusted_homophily(np.array([0, 2]), np.array([1, 3]), y) == pytest.approx(1.0)
    assert adjusted_homophily(np.array([0, 1]), np.array([2, 3]), y) == pytest.approx(-1.0)
    # edges with an unlabeled endpoint are left out
    y = np.array([0, 0, 1, 1, -1])
    assert adjusted_homophily(np.array([0, 2, 0]), np.array([1, 3, 4]), y) == pytest.approx(1.0)


def test_subgroup_columns_and_22_subgroups():
    stats = dataset_stats(load_synthetic("synthetic-homophilous"))
    for column in SUBGROUP_COLUMNS:
        assert column in stats
    assert list(SUBGROUPS) == SUBGROUP_COLUMNS
    assert sum(len(b) for b in SUBGROUPS.values()) == 22
    groups = subgroups(stats)
    assert groups["num_nodes"] == "nodes 1k-10k" and groups["num_classes"] == "3-10 classes"
    for prop, bins in SUBGROUPS.items():  # bins tile the line: every value lands in exactly one
        for value in (0, 1, 2, 5, 10, 0.1, -0.5, 1e9):
            assert sum(low <= value < high for _, low, high in bins) <= 1, (prop, value)


def test_stats_are_deterministic():
    graph = load_synthetic("synthetic-heterophilous")
    a, b = dataset_stats(graph), dataset_stats(graph)
    assert a == b
    assert 0.0 <= a["feature_similarity_auroc"] <= 1.0 and a["feature_similarity_auroc"] > 0.5


def test_cli_stats_writes_csv(cache, tmp_path):
    out = tmp_path / "stats.csv"
    result = CliRunner().invoke(app, ["datasets", "stats", "synthetic-homophilous", "--out", str(out)])
    assert result.exit_code == 0, result.output
    header = out.read_text().splitlines()[0].split(",")
    assert set(SUBGROUP_COLUMNS) <= set(header)
