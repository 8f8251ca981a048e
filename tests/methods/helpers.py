"""Tiny graphs and a CPU fit context for the method tests."""

from __future__ import annotations

import numpy as np
import torch

from contract.wire import GraphBundle, make_bundle
from methods.sdk.method import FitContext
from orchestrator.data.graph import canonical_edges


def tiny_bundle(n: int = 48, classes: int = 3, features: int = 6, seed: int = 0) -> tuple[GraphBundle, np.ndarray, np.ndarray]:
    """A ring with chords and class-informative features; returns (bundle, train, val)."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    x = (rng.normal(size=(n, features)) + y[:, None]).astype(np.float32)
    ring = np.stack([np.arange(n), (np.arange(n) + 1) % n])
    chords = np.stack([np.arange(0, n, 2), (np.arange(0, n, 2) + classes) % n])
    edges = canonical_edges(np.concatenate([ring, chords], axis=1), n)
    idx = rng.permutation(n)
    train, val = np.sort(idx[: n // 2]), np.sort(idx[n // 2 : 3 * n // 4])
    visible = np.full(n, -1)
    visible[train], visible[val] = y[train], y[val]
    return make_bundle(x, edges, visible, classes), train, val


def homophilous_bundle(n: int = 90, classes: int = 3, seed: int = 0) -> tuple[GraphBundle, np.ndarray, np.ndarray, np.ndarray]:
    """A small homophilous SBM graph every graph method should learn; returns (bundle, train, val, labels)."""
    from orchestrator.data.synthetic import sbm_graph

    g = sbm_graph("learnable", num_nodes=n, num_classes=classes, num_features=8, avg_degree=6, homophily=0.9,
                  feature_signal=0.8, seed=seed)
    idx = np.random.default_rng(seed).permutation(n)
    train, val = np.sort(idx[: n // 2]), np.sort(idx[n // 2 : 3 * n // 4])
    visible = np.full(n, -1)
    visible[train], visible[val] = g.y[train], g.y[val]
    return make_bundle(g.x, g.edge_index, visible, classes), train, val, g.y


def cpu_context(seed: int = 0) -> FitContext:
    return FitContext(seed=seed, device=torch.device("cpu"))
