"""The canonical graph: what every method sees, and how raw graphs become it.

Canonical form (the paper's): repeated edges coalesced, undirected, exactly one
self-loop per node. Nodes without a valid label carry -1; classes are
remapped to 0..C-1 after exclusions, so ``num_classes`` counts real classes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from contract.errors import UserError
from orchestrator.records import TASK_BINARY, TASK_MULTICLASS


class GraphError(ValueError, UserError):
    """A graph cannot be used: shapes, ranges, non-finite features, too few classes."""


@dataclass(frozen=True)
class Graph:
    name: str
    x: np.ndarray  # float32 (N, F)
    edge_index: np.ndarray  # int64 (2, E), canonical
    y: np.ndarray  # int64 (N,), -1 = no valid label
    num_classes: int
    # Published train/val/test partitions shipped with the source (Planetoid's
    # public split, the 10 Heterophilous masks, OGB's split): sorted int64 node
    # ids over labeled nodes. Not part of the content hash (they are not model input).
    public_splits: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...] = field(default=(), compare=False, repr=False)

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def task_type(self) -> str:
        return TASK_BINARY if self.num_classes == 2 else TASK_MULTICLASS

    @property
    def content_hash(self) -> str:
        """sha256 of the canonical tensors: the dataset's identity in every record."""
        h = hashlib.sha256(
            f"nodeground-canonical-v1 C={self.num_classes} {self.x.shape} {self.edge_index.shape}\n".encode()
        )
        for array in (self.x, self.edge_index, self.y):
            h.update(np.ascontiguousarray(array).data.cast("B"))
        return h.hexdigest()


def canonicalize(
    name: str, x: np.ndarray, edge_index: np.ndarray, y: np.ndarray, public_masks=None, strict_splits: bool = False
) -> Graph:
    """Validate a raw graph and bring it to canonical form.

    ``y`` may hold any integer class ids; negative values mean "no valid label".
    ``public_masks`` optionally holds published partitions as (train, val, test)
    boolean masks of shape (N,) or (K, N) (K partitions), or node-id arrays.
    ``strict_splits`` (user data) refuses a partition with an empty part or
    overlapping parts instead of skipping it.
    """
    x = np.asarray(x)
    edge_index = np.asarray(edge_index)
    y = np.asarray(y)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise GraphError(
            f"{name}: features must be a non-empty N x F matrix (at least one node and one feature column), got shape "
            f"{x.shape}"
        )
    n = x.shape[0]
    if y.shape != (n,):
        raise GraphError(f"{name}: {y.shape[0] if y.ndim else 0} labels for {n} nodes (labels must be one per node)")
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise GraphError(f"{name}: edges must be a 2 x E array, got shape {edge_index.shape}")
    if not np.issubdtype(edge_index.dtype, np.integer) or not np.issubdtype(y.dtype, np.integer):
        raise GraphError(f"{name}: edges and labels must be integers")
    if edge_index.size and (edge_index.min() < 0 or edge_index.max() >= n):
        raise GraphError(
            f"{name}: edge endpoints range over [{edge_index.min()}, {edge_index.max()}] but node ids are [0, {n})"
        )
    x = np.ascontiguousarray(x, dtype=np.float32)
    if not np.isfinite(x).all():
        bad = int((~np.isfinite(x)).any(axis=1).sum())
        raise GraphError(f"{name}: features contain NaN or infinite values in {bad} rows")
    labels, num_classes = remap_labels(y.astype(np.int64))
    if num_classes < 2:
        raise GraphError(f"{name}: needs at least two classes among labeled nodes, found {num_classes}")
    splits = public_partitions(name, public_masks, labels, strict_splits) if public_masks is not None else ()
    return Graph(name, x, canonical_edges(edge_index.astype(np.int64), n), labels, num_classes, splits)


def public_partitions(
    name: str, masks, labels: np.ndarray, strict: bool = False
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
    """Published (train, val, test) partitions as sorted node ids over labeled nodes.

    Each of the three parts is a boolean mask of shape (N,), (K, N) or (N, K),
    or an array of node ids; a part with one row is shared by all K partitions
    (WikiCS ships 20 train/val masks and one test mask).
    """
    n = labels.shape[0]

    def as_rows(part) -> list[np.ndarray]:
        part = np.asarray(part)
        if part.dtype != bool:
            ids = part.astype(np.int64).reshape(-1)
            if ids.size and (ids.min() < 0 or ids.max() >= n):
                raise GraphError(f"{name}: published split holds node ids outside [0, {n})")
            return [ids]
        if part.ndim == 1:
            part = part[None, :]
        elif part.ndim == 2 and part.shape[1] != n and part.shape[0] == n:
            part = part.T
        if part.ndim != 2 or part.shape[1] != n:
            raise GraphError(
                f"{name}: published split mask has shape {part.shape}; expected ({n},), (K, {n}) or ({n}, K)"
            )
        return [np.flatnonzero(row) for row in part]

    rows = [as_rows(p) for p in masks]
    k = max(len(r) for r in rows)
    partitions: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for i in range(k):
        triple = []
        for r in rows:
            ids = r[min(i, len(r) - 1)]
            triple.append(np.unique(ids[labels[ids] >= 0]).astype(np.int64))
        if strict:
            _check_partition(name, i, triple)
        if all(t.size for t in triple):
            train, val, test = triple
            partitions.append((train, val, test))
    return tuple(partitions)


def _check_partition(name: str, index: int, triple: list[np.ndarray]) -> None:
    """A supplied partition must give labeled nodes to each part, and no node to two parts."""
    parts = ("train", "val", "test")
    for part, ids in zip(parts, triple, strict=True):
        if not ids.size:
            raise GraphError(f"{name}: supplied split {index}: the {part} mask holds no labeled node")
    for a in range(3):
        for b in range(a + 1, 3):
            shared = np.intersect1d(triple[a], triple[b]).size
            if shared:
                raise GraphError(
                    f"{name}: supplied split {index}: {parts[a]} and {parts[b]} masks share {shared} node(s); they "
                    "must be disjoint"
                )


def canonical_edges(edge_index: np.ndarray, num_nodes: int) -> np.ndarray:
    """Coalesce, symmetrize, and give every node exactly one self-loop; sorted by (source, target)."""
    src, dst = edge_index
    keep = src != dst
    src, dst = src[keep], dst[keep]
    loops = np.arange(num_nodes, dtype=np.int64)
    both_src = np.concatenate([src, dst, loops])
    both_dst = np.concatenate([dst, src, loops])
    keys = both_src * num_nodes + both_dst
    keys.sort()  # then coalesce repeats; an explicit sort is much faster than np.unique here
    if keys.size:
        keep = np.empty(keys.size, dtype=bool)
        keep[0] = True
        np.not_equal(keys[1:], keys[:-1], out=keep[1:])
        keys = keys[keep]
    src = keys // num_nodes
    return np.stack([src, keys - src * num_nodes]).astype(np.int64)


def remap_labels(y: np.ndarray) -> tuple[np.ndarray, int]:
    """Map the valid (non-negative) label values to 0..C-1 in sorted order; others to -1."""
    valid = y >= 0
    classes = np.unique(y[valid])
    out = np.full(y.shape, -1, dtype=np.int64)
    out[valid] = np.searchsorted(classes, y[valid])
    return out, int(classes.size)


MIN_CLASS_SIZE = 3  # one labeled node each for train, validation and test


def exclude_small_classes(graph: Graph, minimum: int = MIN_CLASS_SIZE) -> Graph:
    """Unlabel the nodes of classes too small to stratify, then remap classes to 0..C-1.

    The protocol's "classes are remapped after exclusions": e.g. texas has a
    class with a single node, which no train/val/test split can hold.
    """
    counts = np.bincount(graph.y[graph.y >= 0], minlength=graph.num_classes)
    if graph.num_classes == 0 or counts.min() >= minimum:
        return graph
    y = graph.y.copy()
    y[(y >= 0) & (counts[np.maximum(y, 0)] < minimum)] = -1
    labels, num_classes = remap_labels(y)
    if num_classes < 2:
        raise GraphError(f"{graph.name}: fewer than two classes have at least {minimum} labeled nodes")
    public = tuple(tuple(part[labels[part] >= 0] for part in triple) for triple in graph.public_splits)
    return Graph(graph.name, graph.x, graph.edge_index, labels, num_classes, public)
