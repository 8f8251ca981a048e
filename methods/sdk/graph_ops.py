"""Derived graph tensors that several methods need, computed once per (graph, device).

A method receives the canonical graph (undirected, coalesced, one self-loop per
node). Some operators want something else: GraphSAGE and GIN aggregate over
neighbours without the node itself, propagation-based models (GPRGNN,
NAGphormer) use the symmetrically normalized adjacency. These helpers derive
those tensors and keep them in ``graph.cache`` so that every fit of a sweep on
the same graph reuses them.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor
from torch_geometric.nn import MessagePassing

from contract.wire import GraphBundle
from methods.sdk.method import graph_tensors


def edges_without_self_loops(graph: GraphBundle, device: torch.device) -> Tensor:
    key = ("edges_without_self_loops", str(device))
    if key not in graph.cache:
        edge_index = graph_tensors(graph, device).edge_index
        graph.cache[key] = edge_index[:, edge_index[0] != edge_index[1]].contiguous()
    return graph.cache[key]


def sym_norm_weights(graph: GraphBundle, device: torch.device) -> Tensor:
    """Edge weights of D^-1/2 (A + I) D^-1/2 on the canonical edge list (self-loops included)."""
    key = ("sym_norm_weights", str(device))
    if key not in graph.cache:
        edge_index = graph_tensors(graph, device).edge_index
        n = graph.num_nodes
        deg = torch.zeros(n, device=device).index_add_(0, edge_index[1], torch.ones(edge_index.shape[1], device=device))
        inv_sqrt = deg.clamp(min=1).pow(-0.5)
        graph.cache[key] = inv_sqrt[edge_index[0]] * inv_sqrt[edge_index[1]]
    return graph.cache[key]


class WeightedPropagation(MessagePassing):
    """``out_i = sum_j w_ij x_j``: one step of propagation with fixed edge weights (no parameters)."""

    def __init__(self) -> None:
        super().__init__(aggr="add")

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor) -> Tensor:
        return self.propagate(edge_index, x=x, edge_weight=edge_weight)

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:
        return edge_weight.view(-1, 1) * x_j


def laplacian_eigenvectors(graph: GraphBundle, k: int, seed: int = 0) -> np.ndarray:
    """The ``k`` non-trivial eigenvectors of the normalized Laplacian with the smallest eigenvalues (N x k).

    They are the top eigenvectors of the normalized adjacency, which Lanczos
    finds quickly; small graphs use a dense solver. Columns beyond the graph's
    size are zero. Deterministic: the Lanczos start vector is seeded.
    """
    key = ("laplacian_eigenvectors", k)
    if key in graph.cache:
        return graph.cache[key]
    import scipy.sparse as sp
    from scipy.sparse.linalg import eigsh

    n = graph.num_nodes
    src, dst = graph.edge_index
    deg = np.bincount(dst, minlength=n).astype(np.float64)
    inv_sqrt = 1.0 / np.sqrt(np.maximum(deg, 1.0))
    adj = sp.csr_matrix((inv_sqrt[src] * inv_sqrt[dst], (src, dst)), shape=(n, n))
    wanted = min(k + 1, n)
    if n <= 2000 or wanted >= n - 1:
        vals, vecs = np.linalg.eigh(adj.toarray())
        order = np.argsort(-vals)[:wanted]
    else:
        v0 = np.random.default_rng(seed).random(n)
        vals, vecs = eigsh(adj, k=wanted, which="LA", tol=1e-3, v0=v0)
        order = np.argsort(-vals)
    vecs = vecs[:, order][:, 1:]  # drop the trivial eigenvector (largest eigenvalue of Â)
    out = np.zeros((n, k), dtype=np.float32)
    out[:, : vecs.shape[1]] = vecs
    graph.cache[key] = out
    return out
