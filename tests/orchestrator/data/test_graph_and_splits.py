import subprocess
import sys

import numpy as np
import pytest

from orchestrator.data.graph import GraphError, canonical_edges, canonicalize
from orchestrator.data.splits import SplitError, make_split
from orchestrator.data.synthetic import sbm_graph
from tests.conftest import tiny_graph


def test_canonical_edges_coalesce_symmetrize_and_one_self_loop():
    edges = np.array([[0, 0, 1, 2, 2], [1, 1, 0, 2, 0]])  # duplicate 0->1, reverse 1->0, self-loop 2->2
    out = canonical_edges(edges, num_nodes=4)
    pairs = set(map(tuple, out.T.tolist()))
    assert pairs == {(0, 0), (1, 1), (2, 2), (3, 3), (0, 1), (1, 0), (0, 2), (2, 0)}
    assert out.shape[1] == len(pairs)  # no repeats


def test_canonicalize_remaps_labels_and_keeps_unlabeled_as_minus_one():
    x, e, _ = tiny_graph(6)
    g = canonicalize("g", x, e, np.array([5, 9, -1, 5, 9, 7]))
    assert g.y.tolist() == [0, 2, -1, 0, 2, 1]
    assert g.num_classes == 3 and g.task_type == "multiclass"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda x, e, y: (x, np.array([[0, 1], [1, 99]]), y), "edge endpoints"),
        (lambda x, e, y: (np.where(np.arange(x.size).reshape(x.shape) == 3, np.nan, x), e, y), "NaN"),
        (lambda x, e, y: (x, e, np.zeros_like(y)), "at least two classes"),
        (lambda x, e, y: (x, e, y[:-1]), "one per node"),
    ],
)
def test_bad_graphs_are_refused_with_a_reason(mutate, message):
    with pytest.raises(GraphError, match=message):
        canonicalize("bad", *mutate(*tiny_graph()))


def test_split_is_stratified_disjoint_and_covers_labeled_nodes():
    g = sbm_graph("s", num_nodes=1000, num_classes=4, seed=0)
    s = make_split("s", g.y, "10/10/80", 0)
    assert not (set(s.train) & set(s.val)) and not (set(s.train) & set(s.test)) and not (set(s.val) & set(s.test))
    assert len(s.train) + len(s.val) + len(s.test) == 1000
    for c in range(4):
        share = np.mean(g.y[s.train] == c)
        assert abs(share - 0.25) < 0.02
    assert abs(len(s.train) / 1000 - 0.10) < 0.01
    s2 = make_split("s", g.y, "50/25/25", 0)
    assert abs(len(s2.train) / 1000 - 0.5) < 0.01 and abs(len(s2.val) / 1000 - 0.25) < 0.01


def test_unlabeled_nodes_never_enter_a_split():
    y = np.array([0, 1, -1, 0, 1, -1, 0, 1, 0, 1, 0, 1])
    s = make_split("u", y, "50/25/25", 2)
    used = np.concatenate([s.train, s.val, s.test])
    assert 2 not in used and 5 not in used and len(used) == 10


def test_splits_differ_by_index_and_regime_but_not_by_process():
    g = sbm_graph("s", num_nodes=500, seed=0)
    digests = {make_split("s", g.y, r, i).digest for r in ("10/10/80", "50/25/25") for i in range(5)}
    assert len(digests) == 10
    code = (
        "from orchestrator.data.synthetic import sbm_graph; from orchestrator.data.splits import make_split;"
        "g = sbm_graph('s', num_nodes=500, seed=0); print(make_split('s', g.y, '10/10/80', 3).digest)"
    )
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert fresh == make_split("s", g.y, "10/10/80", 3).digest


def test_pinned_split_hash():
    # Pins the split algorithm itself: changing it silently would make old results incomparable.
    y = np.arange(100) % 4
    assert make_split("pinned", y, "10/10/80", 0).digest[:16] == "3900498e3c2b306f"


def test_bad_regime_and_index_are_refused():
    y = np.arange(30) % 3
    with pytest.raises(SplitError, match="unknown regime"):
        make_split("x", y, "60/20/20", 0)
    with pytest.raises(SplitError, match="outside"):
        make_split("x", y, "10/10/80", 7)
    with pytest.raises(SplitError, match="at least 3"):
        make_split("x", np.array([0, 0, 0, 1, 1]), "10/10/80", 0)
