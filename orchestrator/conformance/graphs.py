"""The graphs the conformance check sends: small, canonical, built here, test labels hidden.

Each case carries its split; the bundle shows labels only for train ∪ val
(every other label is -1 by construction), and the guard in ``guard.py``
re-checks that on every upload and fit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from contract.wire import CHUNK_BYTES, GraphBundle, make_bundle
from orchestrator.data.graph import canonical_edges


@dataclass(frozen=True)
class GraphCase:
    name: str
    description: str
    bundle: GraphBundle
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    labels: np.ndarray  # the true labels, never sent

    @property
    def num_nodes(self) -> int:
        return self.bundle.num_nodes

    @property
    def num_classes(self) -> int:
        return self.bundle.num_classes


def _split(
    y: np.ndarray, classes: int, rng: np.random.Generator, train_per_class: int = 3, val_per_class: int = 2
) -> tuple[np.ndarray, ...]:
    train, val = [], []
    for c in range(classes):
        ids = rng.permutation(np.flatnonzero(y == c))
        train.append(ids[:train_per_class])
        val.append(ids[train_per_class : train_per_class + val_per_class])
    train_ids, val_ids = np.sort(np.concatenate(train)), np.sort(np.concatenate(val))
    test = np.setdiff1d(np.arange(y.size), np.concatenate([train_ids, val_ids]))
    return train_ids.astype(np.int64), val_ids.astype(np.int64), test.astype(np.int64)


def make_case(
    name: str,
    description: str,
    num_nodes: int,
    num_classes: int,
    num_features: int,
    avg_degree: float = 4.0,
    isolated: int = 0,
    seed: int = 0,
) -> GraphCase:
    """A homophilous random graph with class-informative features; the last ``isolated`` nodes have no edges."""
    rng = np.random.default_rng(seed)
    y = np.arange(num_nodes) % num_classes
    rng.shuffle(y)
    centers = rng.normal(size=(num_classes, num_features))
    x = (centers[y] + rng.normal(scale=1.5, size=(num_nodes, num_features))).astype(np.float32)
    connected = num_nodes - isolated
    m = int(connected * avg_degree / 2)
    src = rng.integers(0, connected, size=m)
    same = rng.random(m) < 0.8
    candidates = rng.integers(0, connected, size=(m, 8))
    match = y[candidates] == y[src][:, None]
    pick = np.where(same & match.any(axis=1), candidates[np.arange(m), match.argmax(axis=1)], candidates[:, 0])
    ring = np.arange(connected)  # every node but the isolated ones has a neighbour
    edges = np.concatenate([np.stack([src, pick]), np.stack([ring, np.roll(ring, 1)])], axis=1)
    edges = canonical_edges(edges.astype(np.int64), num_nodes)
    train, val, test = _split(y, num_classes, rng)
    visible = np.full(num_nodes, -1, dtype=np.int64)
    seen = np.concatenate([train, val])
    visible[seen] = y[seen]
    bundle = make_bundle(x, edges, visible, num_classes)
    return GraphCase(name, description, bundle, train, val, test, y.astype(np.int64))


def standard_cases(
    max_classes: int = 0, max_features: int = 0, large_bytes: int = 2 * CHUNK_BYTES + (1 << 20)
) -> list[GraphCase]:
    """Binary, many classes, isolated nodes, and one graph larger than a 4 MiB message.

    The large graph is large in bytes, not in nodes: wide features (as Cora's
    1,433) carry it past the message size on ~1,300 nodes, so that what it checks,
    chunked upload, costs every method seconds, not a full training on 20k nodes.
    """
    many = 40 if not max_classes else max(2, min(40, max_classes))

    def cap(f: int) -> int:
        return f if not max_features else min(f, max_features)

    large_f = cap(1024)
    large_n = int(large_bytes // (4 * large_f)) + 1
    return [
        make_case("binary", "binary task, 80 nodes", 80, 2, cap(6), seed=1),
        make_case("many-classes", f"{many} classes, {many * 8} nodes", many * 8, many, cap(12), seed=2),
        make_case("isolated-nodes", "multiclass, 10 of 60 nodes without any edge", 60, 3, cap(5), isolated=10, seed=3),
        make_case(
            "large",
            f"{large_n} x {large_f} features: more than one 4 MiB message",
            large_n,
            5,
            large_f,
            avg_degree=3.0,
            seed=4,
        ),
    ]
