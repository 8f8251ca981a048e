"""In-context inference helpers shared by the PFN families (GraphPFN, NodePFN, G2T-FM).

In-context attention is quadratic in the context; every fit estimates its peak
working set before running (``param_bytes`` for the frozen weights,
``attention_chunk`` for the score matrices) and calls
``methods.sdk.memory.require_memory`` with it.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def attention_chunk(n_queries: int, n_keys: int, batch: int, heads: int, cap_bytes: int = 256 << 20) -> int:
    """Queries per chunk so that one chunk's score matrix (batch x heads x q x k floats) stays under cap."""
    per_query = max(1, batch * heads * n_keys * 4)
    return int(max(1, min(n_queries, cap_bytes // per_query)))


def chunked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk: int) -> torch.Tensor:
    """SDPA over query chunks; q (B, H, Lq, D), k/v (B, H, Lk, D). Queries never interact, so chunking is exact."""
    if q.shape[-2] <= chunk:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return torch.cat(
        [
            torch.nn.functional.scaled_dot_product_attention(q[..., s : s + chunk, :], k, v)
            for s in range(0, q.shape[-2], chunk)
        ],
        dim=-2,
    )


def param_bytes(module: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters()) + sum(
        b.numel() * b.element_size() for b in module.buffers()
    )


def edge_array_without_self_loops(edge_index: np.ndarray) -> np.ndarray:
    """The 2 x E edge array without its self-loops (the PFNs add their own, or none)."""
    return edge_index[:, edge_index[0] != edge_index[1]]


def finish_probs(probs: np.ndarray) -> np.ndarray:
    """Finite, non-negative rows that sum to one; a row with no mass becomes uniform."""
    probs = np.nan_to_num(np.asarray(probs, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    probs = np.clip(probs, 0.0, None)
    s = probs.sum(axis=1, keepdims=True)
    bad = s[:, 0] <= 0
    probs[bad] = 1.0
    s[bad] = probs.shape[1]
    return (probs / s).astype(np.float32)
