"""Shared, class-stratified splits, bit-for-bit the same on every machine.

The order within each class comes from a keyed integer hash (splitmix64) of
the node id, written here in numpy integer arithmetic, so it does not depend
on any library's random stream. The key derives from (dataset, regime, index),
where a user dataset is its content (``split_identity``): the same graph registered
under two names gets the same splits. Catalog and built-in tasks keep their names,
so no published split moves.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from contract.errors import UserError

if TYPE_CHECKING:
    from orchestrator.data.graph import Graph

REGIMES: dict[str, tuple[float, float, float]] = {
    "10/10/80": (0.10, 0.10, 0.80),
    "50/25/25": (0.50, 0.25, 0.25),
}
SPLIT_INDICES = range(5)
PUBLIC = "public"  # the partitions a source publishes (Planetoid, Heterophilous masks, OGB)
ALL_REGIMES = (*REGIMES, PUBLIC)


class SplitError(ValueError, UserError):
    """Unknown regime, index out of range, or classes too small to stratify."""


@dataclass(frozen=True)
class Split:
    regime: str
    index: int
    train: np.ndarray  # sorted int64 node ids
    val: np.ndarray
    test: np.ndarray

    @property
    def digest(self) -> str:
        h = hashlib.sha256()
        for part in (self.train, self.val, self.test):
            h.update(np.ascontiguousarray(part, dtype="<i8").tobytes())
            h.update(b"|")
        return h.hexdigest()


def _splitmix64(values: np.ndarray, key: int) -> np.ndarray:
    z = values.astype(np.uint64) + np.uint64(key) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def split_key(dataset: str, regime: str, index: int) -> int:
    digest = hashlib.sha256(f"nodeground-split-v1|{dataset}|{regime}|{index}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def make_split(dataset: str, labels: np.ndarray, regime: str, index: int) -> Split:
    """Stratified train/val/test over nodes with a valid label (labels >= 0)."""
    if regime not in REGIMES:
        raise SplitError(f"unknown regime {regime!r}; choose from {', '.join(REGIMES)}")
    if index not in SPLIT_INDICES:
        raise SplitError(f"split index {index} is outside 0..{SPLIT_INDICES[-1]}")
    train_frac, val_frac, _ = REGIMES[regime]
    key = split_key(dataset, regime, index)
    with np.errstate(over="ignore"):
        order_key = _splitmix64(np.arange(labels.shape[0]), key)
    parts: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])
    for c in np.unique(labels[labels >= 0]):
        nodes = np.flatnonzero(labels == c)
        if nodes.size < 3:
            raise SplitError(f"{dataset}: class {c} has {nodes.size} labeled nodes; at least 3 are needed to stratify")
        nodes = nodes[np.argsort(order_key[nodes], kind="stable")]
        n_train = min(max(1, round(train_frac * nodes.size)), nodes.size - 2)
        n_val = min(max(1, round(val_frac * nodes.size)), nodes.size - n_train - 1)
        parts[0].append(nodes[:n_train])
        parts[1].append(nodes[n_train : n_train + n_val])
        parts[2].append(nodes[n_train + n_val :])
    train, val, test = (np.sort(np.concatenate(p)).astype(np.int64) for p in parts)
    return Split(regime, index, train, val, test)


def split_identity(graph: Graph) -> str:
    """What a graph's splits are keyed by: a user dataset's content hash, a catalog or built-in task's name."""
    from orchestrator.data.user import user_registry

    registered = user_registry().get(graph.name)
    if registered is None:
        return graph.name
    return f"content:{registered.get('content_hash') or graph.content_hash}"


def graph_split(graph: Graph, regime: str, index: int) -> Split:
    """The split of ``graph`` for a regime: the two stratified ratios, or ``public``.

    ``public`` index i is the source's i-th published partition (the
    Heterophilous files ship 10, of which indices 0-4 are used; Planetoid and
    OGB ship one, index 0).
    """
    if regime != PUBLIC:
        return make_split(split_identity(graph), graph.y, regime, index)
    if index not in SPLIT_INDICES:
        raise SplitError(f"split index {index} is outside 0..{SPLIT_INDICES[-1]}")
    published = graph.public_splits
    if not published:
        raise SplitError(f"{graph.name} has no published split; use a regime from {', '.join(REGIMES)}")
    if index >= len(published):
        raise SplitError(
            f"{graph.name} publishes {len(published)} split(s); public index {index} does not exist (use "
            f"0..{len(published) - 1})"
        )
    train, val, test = (np.asarray(part, dtype=np.int64) for part in published[index])
    return Split(PUBLIC, index, train, val, test)


def export_splits(graph: Graph, out_dir, regimes=None) -> list[dict]:
    """Write every split of ``graph`` as ``<out>/<regime>_<index>.npz`` (train/val/test node ids)
    plus ``manifest.json`` (dataset content hash, split digests and sizes) so results can be shared
    and checked. ``regimes`` defaults to the two ratio regimes plus ``public`` when published."""
    import json
    from pathlib import Path

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if regimes is None:
        regimes = [*REGIMES, *([PUBLIC] if graph.public_splits else [])]
    manifest = []
    for regime in regimes:
        count = min(len(graph.public_splits), len(SPLIT_INDICES)) if regime == PUBLIC else len(SPLIT_INDICES)
        for index in range(count):
            split = graph_split(graph, regime, index)
            file = f"{regime.replace('/', '-')}_{index}.npz"
            np.savez(out / file, train=split.train, val=split.val, test=split.test)
            manifest.append(
                {
                    "regime": regime,
                    "index": index,
                    "file": file,
                    "digest": split.digest,
                    "train": int(split.train.size),
                    "val": int(split.val.size),
                    "test": int(split.test.size),
                }
            )
    (out / "manifest.json").write_text(
        json.dumps({"dataset": graph.name, "content_hash": graph.content_hash, "splits": manifest}, indent=2)
    )
    return manifest
