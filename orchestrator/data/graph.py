"""The canonical graph: what every method sees, and how raw graphs become it.

Canonical form (the paper's): repeated edges coalesced, undirected, exactly one
self-loop per node. Nodes without a valid label carry -1; classes are
remapped to 0..C-1 after exclusions, so ``num_classes`` counts real classes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from orchestrator.records import TASK_BINARY, TASK_MULTICLASS


class GraphError(ValueError):
    """A graph cannot be used: shapes, ranges, non-finite features, too few classes."""


@dataclass(frozen=True)
class Graph:
    name: str
    x: np.ndarray  # float32 (N, F)
    edge_index: np.ndarray  # int64 (2, E), canonical
    y: np.ndarray  # int64 (N,), -1 = no valid label
    num_classes: int

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def task_type(self) -> str:
        return TASK_BINARY if self.num_classes == 2 else TASK_MULTICLASS

    @property
    def content_hash(self) -> str:
        """sha256 of the canonical tensors: the dataset's identity in every record."""
        h = hashlib.sha256(f"nodeground-canonical-v1 C={self.num_classes} {self.x.shape} {self.edge_index.shape}\n".encode())
        for array in (self.x, self.edge_index, self.y):
            h.update(memoryview(np.ascontiguousarray(array)).cast("B"))
        return h.hexdigest()


def canonicalize(name: str, x: np.ndarray, edge_index: np.ndarray, y: np.ndarray) -> Graph:
    """Validate a raw graph and bring it to canonical form.

    ``y`` may hold any integer class ids; negative values mean "no valid label".
    """
    x = np.asarray(x)
    edge_index = np.asarray(edge_index)
    y = np.asarray(y)
    if x.ndim != 2 or x.shape[0] == 0:
        raise GraphError(f"{name}: features must be a non-empty N x F matrix, got shape {x.shape}")
    n = x.shape[0]
    if y.shape != (n,):
        raise GraphError(f"{name}: {y.shape[0] if y.ndim else 0} labels for {n} nodes (labels must be one per node)")
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise GraphError(f"{name}: edges must be a 2 x E array, got shape {edge_index.shape}")
    if not np.issubdtype(edge_index.dtype, np.integer) or not np.issubdtype(y.dtype, np.integer):
        raise GraphError(f"{name}: edges and labels must be integers")
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= n):
        raise GraphError(f"{name}: edge endpoints range over [{edge_index.min()}, {edge_index.max()}] but node ids are [0, {n})")
    x = np.ascontiguousarray(x, dtype=np.float32)
    if not np.isfinite(x).all():
        bad = int((~np.isfinite(x)).any(axis=1).sum())
        raise GraphError(f"{name}: features contain NaN or infinite values in {bad} rows")
    labels, num_classes = remap_labels(y.astype(np.int64))
    if num_classes < 2:
        raise GraphError(f"{name}: needs at least two classes among labeled nodes, found {num_classes}")
    return Graph(name, x, canonical_edges(edge_index.astype(np.int64), n), labels, num_classes)


def canonical_edges(edge_index: np.ndarray, num_nodes: int) -> np.ndarray:
    """Coalesce, symmetrize, and give every node exactly one self-loop; sorted by (source, target)."""
    src, dst = edge_index
    keep = src != dst
    src, dst = src[keep], dst[keep]
    loops = np.arange(num_nodes, dtype=np.int64)
    both_src = np.concatenate([src, dst, loops])
    both_dst = np.concatenate([dst, src, loops])
    keys = np.unique(both_src * num_nodes + both_dst)  # sorts and coalesces
    return np.stack([keys // num_nodes, keys % num_nodes]).astype(np.int64)


def remap_labels(y: np.ndarray) -> tuple[np.ndarray, int]:
    """Map the valid (non-negative) label values to 0..C-1 in sorted order; others to -1."""
    valid = y >= 0
    classes = np.unique(y[valid])
    out = np.full(y.shape, -1, dtype=np.int64)
    out[valid] = np.searchsorted(classes, y[valid])
    return out, int(classes.size)
