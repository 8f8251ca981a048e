"""Deterministic synthetic graphs: a stochastic block model with a homophily knob.

Features are class-informative (a class mean plus noise) so that both
feature-only and graph methods have something to learn; ``homophily`` is the
expected fraction of edges that join nodes of the same class.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrator.data.graph import Graph, canonicalize


def sbm_graph(
    name: str,
    num_nodes: int = 2000,
    num_classes: int = 5,
    num_features: int = 32,
    avg_degree: float = 8.0,
    homophily: float = 0.8,
    feature_signal: float = 0.6,
    seed: int = 0,
) -> Graph:
    if not 0.0 <= homophily <= 1.0:
        raise ValueError(f"homophily must lie in [0, 1], got {homophily}")
    rng = np.random.Generator(np.random.PCG64(seed))
    labels = np.arange(num_nodes) % num_classes  # balanced classes
    rng.shuffle(labels)
    num_edges = int(num_nodes * avg_degree / 2)
    src = rng.integers(0, num_nodes, num_edges)
    same = rng.random(num_edges) < homophily
    by_class = [np.flatnonzero(labels == c) for c in range(num_classes)]
    dst = np.empty(num_edges, dtype=np.int64)
    # same-class partner: a random member of src's class; other: a random member of another class
    src_class = labels[src]
    offset = rng.integers(1, num_classes, num_edges)
    target_class = np.where(same, src_class, (src_class + offset) % num_classes)
    for c in range(num_classes):
        mask = target_class == c
        dst[mask] = by_class[c][rng.integers(0, by_class[c].size, int(mask.sum()))]
    means = rng.normal(0.0, 1.0, (num_classes, num_features))
    x = feature_signal * means[labels] + rng.normal(0.0, 1.0, (num_nodes, num_features))
    return canonicalize(name, x.astype(np.float32), np.stack([src, dst]), labels)


SYNTHETIC: dict[str, dict[str, Any]] = {
    "synthetic-homophilous": dict(homophily=0.8, seed=1),
    "synthetic-heterophilous": dict(homophily=0.2, seed=2),
    # a few hundred nodes: for smoke runs and for measuring per-call overhead
    "synthetic-tiny": dict(num_nodes=300, num_classes=3, num_features=8, homophily=0.8, seed=3),
    "synthetic-binary": dict(num_nodes=600, num_classes=2, num_features=8, homophily=0.7, seed=4),
}


def load_synthetic(name: str) -> Graph:
    return sbm_graph(name, **SYNTHETIC[name])
