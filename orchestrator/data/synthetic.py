"""Deterministic synthetic graphs: a stochastic block model with a homophily knob.

Features are class-informative (a class mean plus noise) so that both
feature-only and graph methods have something to learn; ``homophily`` is the
expected fraction of edges that join nodes of the same class.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
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


# ---- calibration graphs ------------------------------------------------------------
# The cost probe (orchestrator/price/probe.py) times methods on graphs of chosen sizes; each is named by its
# size, so a record's dataset says what the graph was, and the estimate reads the size from the name alone.
CALIBRATION_PREFIX = "calibration-"
_CALIBRATION_NAME = re.compile(r"calibration-n([1-9][0-9]*)-d([1-9][0-9]*)-f([1-9][0-9]*)-c([1-9][0-9]*)")
# what a name may ask for: the probe's own design stays far inside, and a mistyped name cannot ask for terabytes
CALIBRATION_LIMITS = {"nodes": 2_000_000, "degree": 200, "features": 10_000, "classes": 100}
CALIBRATION_MAX_FLOATS = 2**28  # nodes x features: 1 GiB of float32 features
CALIBRATION_HOMOPHILY = 0.5


class CalibrationNameError(ValueError):
    """A name that starts like a calibration graph's but asks for no graph the probe can make."""


@dataclass(frozen=True)
class CalibrationGraph:
    """A synthetic graph of a given size (a stochastic block model), made on demand from its name alone."""

    nodes: int
    degree: int  # mean degree: about nodes * degree / 2 undirected edges
    features: int
    classes: int

    @property
    def name(self) -> str:
        return f"{CALIBRATION_PREFIX}n{self.nodes}-d{self.degree}-f{self.features}-c{self.classes}"

    @property
    def edges(self) -> int:
        """Undirected edges without self-loops, as drawn (repeats, rare at these degrees, are not subtracted)."""
        return self.nodes * self.degree // 2

    @classmethod
    def parse(cls, name: str) -> CalibrationGraph | None:
        """The graph a name stands for; None for a name that is not a calibration graph's; CalibrationNameError for
        one that is, beyond the limits."""
        match = _CALIBRATION_NAME.fullmatch(name.strip().lower())
        if match is None:
            if name.strip().lower().startswith(CALIBRATION_PREFIX):
                raise CalibrationNameError(
                    f"{name!r}: a calibration graph is named calibration-n<nodes>-d<degree>-f<features>-c<classes>"
                )
            return None
        graph = cls(*(int(v) for v in match.groups()))
        values = {"nodes": graph.nodes, "degree": graph.degree, "features": graph.features, "classes": graph.classes}
        over = [f"{k} {v:,} > {CALIBRATION_LIMITS[k]:,}" for k, v in values.items() if v > CALIBRATION_LIMITS[k]]
        if graph.classes < 2 or graph.degree >= graph.nodes:
            over.append("at least 2 classes and fewer neighbours than nodes")
        if graph.nodes * graph.features > CALIBRATION_MAX_FLOATS:
            over.append(f"nodes x features {graph.nodes * graph.features:,} > {CALIBRATION_MAX_FLOATS:,}")
        if over:
            raise CalibrationNameError(f"{name!r}: beyond what a calibration graph may be ({'; '.join(over)})")
        return graph

    def generate(self) -> Graph:
        seed = int.from_bytes(hashlib.sha256(self.name.encode()).digest()[:4], "little")
        return sbm_graph(
            self.name,
            num_nodes=self.nodes,
            num_classes=self.classes,
            num_features=self.features,
            avg_degree=float(self.degree),
            homophily=CALIBRATION_HOMOPHILY,
            seed=seed,
        )
