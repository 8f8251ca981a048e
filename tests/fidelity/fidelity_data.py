"""Fidelity datasets with their published splits, read from verified upstream files.

Cora comes with the Planetoid public split (20 labels per class, 500
validation, 1,000 test nodes) from PyG's reader; the Heterophilous-collection
graphs come with the ten masks published alongside them (Platonov et al., ICLR
2023). Files are fetched through the project's verified fetch (sha256 from
the mirror's manifest, or downloaded and checked when no mirror is set).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from contract.wire import GraphBundle, make_bundle
from orchestrator.data.fetch import cache_dir, fetch
from orchestrator.data.graph import canonical_edges

PLANETOID = "https://github.com/kimiyoung/planetoid/raw/master/data/ind.{name}.{ext}"
PLANETOID_EXTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
HETEROPHILOUS = "https://github.com/yandex-research/heterophilous-graphs/raw/main/data/{name}.npz"
# The Texas variant upstream GFM code evaluates on: texas.npz with its one-node class out of every mask.
TEXAS_4_CLASSES = HETEROPHILOUS.format(name="texas_4_classes")


@dataclass
class Split:
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


@dataclass
class FidelityData:
    bundle: GraphBundle
    labels: np.ndarray  # all labels, for scoring only: the bundle hides test labels
    splits: list[Split]


def _checksums() -> dict[str, str]:
    """sha256 per upstream URL, from the mirror's manifest."""
    mirror = os.environ.get("NODEGROUND_MIRROR")
    if not mirror or not (Path(mirror) / "MANIFEST.tsv").exists():
        raise FileNotFoundError("set NODEGROUND_MIRROR to a mirror with MANIFEST.tsv for the fidelity checks")
    with open(Path(mirror) / "MANIFEST.tsv", newline="") as f:
        return {row["url"]: row["sha256"] for row in csv.DictReader(f, delimiter="\t")}


def _bundle(x: np.ndarray, edge_index: np.ndarray, y: np.ndarray, train: np.ndarray, val: np.ndarray) -> GraphBundle:
    visible = np.full_like(y, -1)
    keep = np.concatenate([train, val])
    visible[keep] = y[keep]
    return make_bundle(x, canonical_edges(edge_index.astype(np.int64), x.shape[0]), visible, int(y.max()) + 1)


def cora_public() -> FidelityData:
    from torch_geometric.datasets import Planetoid

    sums = _checksums()
    root = cache_dir() / "fidelity" / "planetoid"
    for ext in PLANETOID_EXTS:
        url = PLANETOID.format(name="cora", ext=ext)
        fetch(url, sums[url], dest=root / "Cora" / "raw" / Path(url).name)
    data = Planetoid(str(root), "Cora")[0]
    x = data.x.numpy()
    x = x / np.maximum(x.sum(1, keepdims=True), 1e-12)  # row-normalized, as in the GCN/GAT/APPNP/GCNII papers
    y = data.y.numpy()
    split = Split(*(np.flatnonzero(m.numpy()) for m in (data.train_mask, data.val_mask, data.test_mask)))
    return FidelityData(_bundle(x, data.edge_index.numpy(), y, split.train, split.val), y, [split])


def heterophilous(name: str, num_splits: int = 5) -> FidelityData:
    sums = _checksums()
    url = HETEROPHILOUS.format(name=name)
    raw = np.load(fetch(url, sums[url]))
    x, y = raw["node_features"].astype(np.float32), raw["node_labels"].astype(np.int64)
    edges = raw["edges"].T
    splits = [
        Split(*(np.flatnonzero(raw[f"{part}_masks"][i]) for part in ("train", "val", "test")))
        for i in range(num_splits)
    ]
    # the bundle's visible labels are train ∪ val of split 0; later splits get their own bundles
    return FidelityData(_bundle(x, edges, y, splits[0].train, splits[0].val), y, splits)


def load_npz_masks(url: str) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The published (train, val, test) node ids of every mask in a Heterophilous-collection file."""
    sums = _checksums()
    with np.load(fetch(url, sums[url])) as raw:
        masks = [raw[f"{part}_masks"] for part in ("train", "val", "test")]
        return [tuple(np.flatnonzero(m[i]) for m in masks) for i in range(masks[0].shape[0])]


def bundle_for(data: FidelityData, split: Split) -> GraphBundle:
    visible = np.full_like(data.labels, -1)
    keep = np.concatenate([split.train, split.val])
    visible[keep] = data.labels[keep]
    bundle = make_bundle(data.bundle.features, data.bundle.edge_index, visible, data.bundle.num_classes)
    return bundle
