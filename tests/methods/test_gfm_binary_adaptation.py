"""GFM heads on imbalanced binary graphs: selected on validation cross-entropy, degenerate fits flagged.

The graphs are 70/30 and homophilous: a node's own features are weak evidence
of its label and its neighbourhood is strong evidence, so a frozen encoder that
propagates features carries the label, while an untrained head does not. Upstream's
validation-accuracy rule never beats the majority class on such a graph and keeps
the head of the first epoch; NodeGround's default rule (validation loss) trains it.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from contract.wire import make_bundle
from methods.graphany import GraphAny
from methods.gvt import RGVT
from methods.node4all import Node4All
from methods.sdk import ConfigError
from orchestrator.data.graph import canonical_edges
from tests.methods.helpers import cpu_context as ctx

TRAINED_HEADS = (RGVT, Node4All)
EPOCHS = {"max_epochs": 600, "patience": 100}


def imbalanced_binary(
    feature_shift: float, n: int = 1000, positive: float = 0.3, degree: int = 8, homophily: float = 0.8, seed: int = 0
):
    """A 70/30 graph: each node links to ``degree / 2`` others, of its own class with probability ``homophily``.

    Features are standard normal, shifted by ``feature_shift`` on positive nodes.
    Returns the bundle (test labels hidden), the train/val/test halves-and-quarters and the true labels.
    """
    rng = np.random.default_rng(seed)
    y = np.zeros(n, dtype=np.int64)
    y[rng.permutation(n)[: round(positive * n)]] = 1
    src = np.repeat(np.arange(n), degree // 2)
    same = rng.random(src.size) < homophily
    members = [np.flatnonzero(y == c) for c in (0, 1)]
    wanted = np.where(same, y[src], 1 - y[src])
    dst = np.array([rng.choice(members[c]) for c in wanted])
    x = rng.normal(size=(n, 8)).astype(np.float32) + feature_shift * y[:, None].astype(np.float32)
    order = np.random.default_rng(seed + 1).permutation(n)
    train, val, test = order[: n // 2], order[n // 2 : 3 * n // 4], order[3 * n // 4 :]
    labels = y.copy()
    labels[test] = -1
    return make_bundle(x, canonical_edges(np.stack([src, dst]), n), labels, 2), train, val, test, y


def _fit(method, graph, config: dict):
    bundle, train, val, test, y = graph
    m, context = method(), ctx()
    state = m.fit(bundle, train, val, m.resolve_config({**EPOCHS, **config}), context)
    probs = m.predict(state, bundle)
    return float(roc_auc_score(y[test], probs[test, 1])), context.info


@pytest.mark.parametrize("method", TRAINED_HEADS, ids=lambda m: m.name)
def test_trained_heads_beat_chance_on_an_imbalanced_binary_graph(weights, method):
    auroc, info = _fit(method, imbalanced_binary(feature_shift=0.3), {})
    assert info["selection"] == "val_loss"
    assert info["best_epoch"] > 0 and info["untrained_head"] is False and info["constant_probabilities"] is False
    assert auroc > 0.7, f"{method.name}: test AUROC {auroc:.3f}"


def test_accuracy_rule_keeps_an_untrained_head_and_says_so(weights):
    """Weak features: upstream's rule keeps RGVT's first-epoch head (below chance here); the loss rule trains it."""
    graph = imbalanced_binary(feature_shift=0.1)
    upstream_auroc, upstream = _fit(RGVT, graph, {"selection": "val_accuracy"})
    assert upstream["best_epoch"] == 0 and upstream["untrained_head"] is True
    auroc, info = _fit(RGVT, graph, {})
    assert info["best_epoch"] > 0 and info["untrained_head"] is False
    assert auroc > 0.7 and auroc > upstream_auroc + 0.2, (auroc, upstream_auroc)


@pytest.mark.parametrize("method", TRAINED_HEADS, ids=lambda m: m.name)
def test_constant_representations_are_flagged(weights, method):
    """Identical features on a ring: every node gets the same representation, so the same probabilities."""
    n = 40
    ring = np.stack([np.arange(n), (np.arange(n) + 1) % n])
    y = np.arange(n) % 2
    bundle = make_bundle(np.ones((n, 3), np.float32), canonical_edges(ring, n), y, 2)
    m, context = method(), ctx()
    m.fit(
        bundle,
        np.arange(20),
        np.arange(20, 30),
        m.resolve_config(
            {"max_epochs": 20, "patience": 5, "max_depth": 2} if method is RGVT else {"max_epochs": 20, "patience": 5}
        ),
        context,
    )
    assert context.info["constant_probabilities"] is True


def test_graphany_reports_whether_its_probabilities_vary(weights):
    bundle, train, val, _, _ = imbalanced_binary(feature_shift=0.3, n=200)
    m, context = GraphAny(), ctx()
    m.fit(bundle, train, val, m.resolve_config({}), context)
    assert context.info["constant_probabilities"] is False


@pytest.mark.parametrize("method", TRAINED_HEADS, ids=lambda m: m.name)
def test_selection_is_a_checked_setting_outside_the_search_space(method):
    assert method.default_config["selection"] == "val_loss"
    assert "selection" not in {p.name for p in method.search_space}  # sweeps never sample upstream's rule
    assert method.resolve_config({"selection": "val_accuracy"})["selection"] == "val_accuracy"
    with pytest.raises(ConfigError, match="selection"):
        method.resolve_config({"selection": "val_acc"})
