"""Dataset statistics and the 22 property subgroups.

Structural statistics use the simple undirected graph without self-loops
(each unordered pair {u, v}, u != v, counted once). Everything is vectorized
(numpy / scipy.sparse): a 500k-node, 5M-edge graph takes seconds.

Definitions
- avg_degree = 2E / N; density = 2E / (N (N - 1)).
- degree quantiles: min, 25%, median, 75%, 90%, 99%, max of node degrees.
- hub_concentration: share of edge endpoints held by the top 1% highest-degree
  nodes (at least one node).
- adjusted_homophily (Platonov et al. 2022, "Characterizing graph datasets for
  node classification: homophily-heterophily dichotomy and beyond"), over the
  edges whose endpoints are both labeled:
  h_adj = (h_edge - sum_k p_k^2) / (1 - sum_k p_k^2), with h_edge the share of
  those edges joining same-class nodes and p_k = D_k / (2 E_L) the share of
  their endpoints in class k.
- feature_nonzero_fraction: share of nonzero entries in a seeded sample of up
  to 4,096 rows (rows chosen by a keyed integer hash of the node id, so the
  sample does not depend on any library's random stream).
- feature_similarity_auroc: AUROC with which the cosine similarity of two
  labeled nodes' features separates same-class from different-class pairs,
  over up to 20,000 hashed node pairs (0.5 = features carry no class signal).
- class_imbalance: largest class size / smallest class size (labeled nodes).
- label_entropy: Shannon entropy of the class distribution / log(C) (1 = balanced).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from orchestrator.data.graph import Graph
from orchestrator.data.splits import _splitmix64

FEATURE_SAMPLE_ROWS = 4096
SIMILARITY_PAIRS = 20_000

# The seven subgroup properties, in report order, with their fixed boundaries.
# Each bin is [low, high); a dataset falls in exactly one bin per property.
# 4 + 3 + 4 + 3 + 2 + 3 + 3 = 22 subgroups.
INF = float("inf")
SUBGROUPS: dict[str, list[tuple[str, float, float]]] = {
    "num_nodes": [
        ("nodes<1k", 0, 1_000),
        ("nodes 1k-10k", 1_000, 10_000),
        ("nodes 10k-100k", 10_000, 100_000),
        ("nodes>=100k", 100_000, INF),
    ],
    "avg_degree": [("degree<5", 0, 5), ("degree 5-20", 5, 20), ("degree>=20", 20, INF)],
    "adjusted_homophily": [
        ("h_adj<0", -INF, 0.0),
        ("h_adj 0-0.3", 0.0, 0.3),
        ("h_adj 0.3-0.6", 0.3, 0.6),
        ("h_adj>=0.6", 0.6, INF),
    ],
    "feature_dim": [("features<100", 0, 100), ("features 100-1000", 100, 1_000), ("features>=1000", 1_000, INF)],
    "feature_nonzero_fraction": [
        ("sparse features (<10% nonzero)", 0, 0.10),
        ("dense features (>=10% nonzero)", 0.10, INF),
    ],
    "num_classes": [("binary", 2, 3), ("3-10 classes", 3, 11), (">10 classes", 11, INF)],
    "class_imbalance": [("balanced (<2x)", 0, 2), ("moderate (2-10x)", 2, 10), ("imbalanced (>=10x)", 10, INF)],
}
SUBGROUP_PROPERTIES = tuple(SUBGROUPS)


def _hash_order(count: int, label: str) -> np.ndarray:
    key = int.from_bytes(hashlib.sha256(f"nodeground-stats-v1|{label}".encode()).digest()[:8], "little")
    with np.errstate(over="ignore"):
        return _splitmix64(np.arange(count, dtype=np.int64), key)


def simple_edges(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """Each undirected edge once (u < v), self-loops dropped. Canonical graphs are symmetric."""
    src, dst = graph.edge_index
    keep = src < dst
    return src[keep], dst[keep]


def adjusted_homophily(src: np.ndarray, dst: np.ndarray, y: np.ndarray) -> float:
    """Platonov et al. (2022) adjusted homophily over edges whose endpoints are both labeled."""
    both = (y[src] >= 0) & (y[dst] >= 0)
    a, b = y[src[both]], y[dst[both]]
    if a.size == 0:
        return float("nan")
    h_edge = float(np.mean(a == b))
    num_classes = int(max(a.max(), b.max())) + 1
    degree_mass = np.bincount(a, minlength=num_classes) + np.bincount(b, minlength=num_classes)
    p = degree_mass / (2.0 * a.size)
    expected = float(np.sum(p * p))
    if expected >= 1.0:
        return float("nan")
    return (h_edge - expected) / (1.0 - expected)


def edge_homophily(src: np.ndarray, dst: np.ndarray, y: np.ndarray) -> float:
    both = (y[src] >= 0) & (y[dst] >= 0)
    return float(np.mean(y[src[both]] == y[dst[both]])) if both.any() else float("nan")


def feature_nonzero_fraction(x: np.ndarray) -> float:
    rows = np.argsort(_hash_order(x.shape[0], "feature-rows"), kind="stable")[:FEATURE_SAMPLE_ROWS]
    sample = x[np.sort(rows)]
    return float(np.count_nonzero(sample) / sample.size) if sample.size else 0.0


def feature_similarity_auroc(x: np.ndarray, y: np.ndarray) -> float:
    labeled = np.flatnonzero(y >= 0)
    if labeled.size < 2:
        return float("nan")
    count = SIMILARITY_PAIRS
    i = labeled[(_hash_order(count, "pairs-a") % np.uint64(labeled.size)).astype(np.int64)]
    j = labeled[(_hash_order(count, "pairs-b") % np.uint64(labeled.size)).astype(np.int64)]
    keep = i != j
    i, j = i[keep], j[keep]
    xi, xj = x[i].astype(np.float64), x[j].astype(np.float64)
    norms = np.linalg.norm(xi, axis=1) * np.linalg.norm(xj, axis=1)
    similarity = np.where(norms > 0, np.einsum("ij,ij->i", xi, xj) / np.where(norms > 0, norms, 1.0), 0.0)
    same = y[i] == y[j]
    if same.all() or not same.any():
        return float("nan")
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(same, similarity))


def dataset_stats(graph: Graph) -> dict[str, Any]:
    """Every statistic of the dataset (the 7 subgroup properties under their column names)."""
    n = graph.num_nodes
    src, dst = simple_edges(graph)
    num_edges = int(src.size)
    degree = np.bincount(src, minlength=n) + np.bincount(dst, minlength=n)
    q = np.quantile(degree, [0.0, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0]) if n else np.zeros(7)
    top = max(1, int(np.ceil(0.01 * n)))
    hub = float(np.sort(degree)[-top:].sum() / max(1, degree.sum()))
    y = graph.y
    labeled = y[y >= 0]
    counts = np.bincount(labeled, minlength=graph.num_classes)
    p = counts / max(1, counts.sum())
    nz = p[p > 0]
    entropy = float(-(nz * np.log(nz)).sum() / np.log(graph.num_classes)) if graph.num_classes > 1 else 0.0
    return {
        "dataset": graph.name,
        "num_nodes": n,
        "num_edges": num_edges,
        "avg_degree": 2.0 * num_edges / n if n else 0.0,
        "density": 2.0 * num_edges / (n * (n - 1)) if n > 1 else 0.0,
        "degree_min": float(q[0]),
        "degree_q25": float(q[1]),
        "degree_median": float(q[2]),
        "degree_q75": float(q[3]),
        "degree_q90": float(q[4]),
        "degree_q99": float(q[5]),
        "degree_max": float(q[6]),
        "hub_concentration": hub,
        "edge_homophily": edge_homophily(src, dst, y),
        "adjusted_homophily": adjusted_homophily(src, dst, y),
        "feature_dim": int(graph.x.shape[1]),
        "feature_nonzero_fraction": feature_nonzero_fraction(graph.x),
        "feature_similarity_auroc": feature_similarity_auroc(graph.x, y),
        "num_classes": graph.num_classes,
        "labeled_fraction": float(labeled.size / n) if n else 0.0,
        "class_imbalance": float(counts.max() / counts.min()) if counts.size and counts.min() > 0 else float("inf"),
        "label_entropy": entropy,
        "content_hash": graph.content_hash,
    }


def subgroups(stats: dict[str, Any]) -> dict[str, str]:
    """The subgroup label of a dataset for each of the seven properties."""
    out = {}
    for prop, bins in SUBGROUPS.items():
        value = stats[prop]
        out[prop] = next((label for label, low, high in bins if low <= value < high), "n/a")
    return out


def stats_rows(names: list[str]) -> list[dict[str, Any]]:
    """Statistics plus subgroup labels for each named dataset (loading it if needed)."""
    from orchestrator.data.registry import load_dataset

    rows = []
    for name in names:
        row = dataset_stats(load_dataset(name))
        row.update({f"subgroup_{k}": v for k, v in subgroups(row).items()})
        rows.append(row)
    return rows
