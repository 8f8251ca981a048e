"""A graph's sizes as a price reads them: from the catalog (no download), missing figures imputed.

A prior's terms name ``contract.cost.SIZE_NAMES``; ``size_values`` gives each for one graph under one regime.
A size the catalog does not publish and this machine has not processed is imputed from the catalog's median
degree or feature count, and the cell it prices says so (``Size.imputed``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from orchestrator.data.registry import DatasetError, dataset_size, tasks
from orchestrator.data.splits import REGIMES

PUBLIC_TRAIN_FRACTION = 0.1  # a published split's training share is the dataset's own; this stands for it


@dataclass(frozen=True)
class Size:
    nodes: float
    edges: float
    features: float
    classes: float
    imputed: bool  # some field was not known without the data and was imputed from the catalog


def train_fraction(regime: str) -> float:
    """The share of labeled nodes a regime trains on (``PUBLIC_TRAIN_FRACTION`` for a published split)."""
    return REGIMES[regime][0] if regime in REGIMES else PUBLIC_TRAIN_FRACTION


def size_values(size: Size, regime: str) -> dict[str, float]:
    """The sizes a prior's terms name, for one graph under one regime."""
    return {
        "nodes": size.nodes,
        "edges": size.edges,
        "arcs": size.nodes + 2 * size.edges,
        "features": max(size.features, 1.0),
        "classes": size.classes,
        "train": train_fraction(regime) * size.nodes,
    }


def _catalog_medians() -> tuple[float, float]:
    """The catalog's median average degree and median feature count, for sizes it does not publish."""
    degrees = [t["edges"] / t["nodes"] for t in tasks() if t.get("edges") and t.get("nodes")]
    features = [t["features"] for t in tasks() if t.get("features")]
    return float(np.median(degrees)), float(np.median(features))


def sizes_of(datasets: Iterable[str]) -> dict[str, Size]:
    """Each dataset's size (``dataset_size``), missing figures imputed; a name that no longer resolves is left out."""
    degree, features = _catalog_medians()
    out = {}
    for name in dict.fromkeys(datasets):
        try:
            size = dataset_size(name)
        except (DatasetError, OSError, ValueError):
            continue
        if size.nodes is None or size.classes is None:
            continue
        out[name] = Size(
            float(size.nodes),
            float(size.edges if size.edges is not None else degree * size.nodes),
            float(size.features if size.features is not None else features),
            float(size.classes),
            size.edges is None or size.features is None,
        )
    return out
