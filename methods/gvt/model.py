"""RGVT (Lee et al., "View Space", ICML 2026): a frozen graph view transformation applied recurrently.

For node features X (N x F), the view stack of each (node, feature) pair is the
vector [X, A_rw X, A_sym X, A_rw^2 X, A_sym^2 X] (5 views; A_rw = D^-1 A and
A_sym = D^-1/2 A D^-1/2 on the canonical graph, which carries one self-loop per
node as upstream's loader adds). A shared MLP (5 -> 5, GELU, 5 -> 1) maps every
view vector to a scalar, giving a new N x F matrix; RGVT repeats this L times
with the same frozen parameters. Every feature column is transformed on its own,
so columns are processed in chunks without changing the result. ``Head`` is the predictor
trained on those representations (``method.py`` trains it).
"""

from __future__ import annotations

import warnings
from itertools import pairwise

import torch
from torch import nn


class ViewMLP(nn.Module):
    """Upstream's view-vector MLP: ``lins`` with GELU between them."""

    def __init__(self, views: int = 5, depth: int = 2) -> None:
        super().__init__()
        dims = [views] * depth + [1]
        self.lins = nn.ModuleList(nn.Linear(a, b) for a, b in pairwise(dims))

    def forward(self, v: torch.Tensor) -> torch.Tensor:
        for lin in self.lins[:-1]:
            v = torch.nn.functional.gelu(lin(v))
        return self.lins[-1](v)


class GraphViewTransformation(nn.Module):
    def __init__(self, max_hop: int = 2, depth: int = 2) -> None:
        super().__init__()
        self.max_hop = max_hop
        self.mlp = ViewMLP(1 + 2 * max_hop, depth)

    @classmethod
    def from_state_dict(cls, state: dict[str, torch.Tensor]) -> GraphViewTransformation:
        lins = sorted({k.split(".")[2] for k in state if k.startswith("mlp.lins.")})
        views = state["mlp.lins.0.weight"].shape[1]
        if views % 2 != 1 or any(not k.startswith("mlp.lins.") for k in state):
            raise ValueError(f"not an RGVT view-MLP state dict: keys {sorted(state)}")
        module = cls(max_hop=(views - 1) // 2, depth=len(lins))
        module.load_state_dict(state, strict=True)
        module.eval()
        for p in module.parameters():
            p.requires_grad_(False)
        return module

    def forward(self, x: torch.Tensor, a_rw: torch.Tensor, a_sym: torch.Tensor) -> torch.Tensor:
        views = [x]
        rw = sym = x
        for _ in range(self.max_hop):
            rw = torch.sparse.mm(a_rw, rw)
            sym = torch.sparse.mm(a_sym, sym)
            views += [rw, sym]
        stacked = torch.stack(views, dim=-1)  # (N, F, V)
        return self.mlp(stacked).squeeze(-1)


def propagation_matrices(
    edge_index: torch.Tensor, num_nodes: int, dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """A_rw (row-normalized) and A_sym (symmetric-normalized) as sparse CSR; the edges already hold self-loops."""
    row, col = edge_index
    ones = torch.ones(row.numel(), dtype=dtype, device=edge_index.device)
    deg = torch.zeros(num_nodes, dtype=dtype, device=edge_index.device).index_add_(0, row, ones)
    inv = torch.where(deg > 0, 1.0 / deg.clamp(min=1), torch.zeros_like(deg))
    inv_sqrt = torch.where(deg > 0, deg.clamp(min=1).rsqrt(), torch.zeros_like(deg))
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    a_rw = (
        torch.sparse_coo_tensor(edge_index, inv[row], (num_nodes, num_nodes), check_invariants=False)
        .coalesce()
        .to_sparse_csr()
    )
    a_sym = (
        torch.sparse_coo_tensor(
            edge_index, inv_sqrt[row] * inv_sqrt[col], (num_nodes, num_nodes), check_invariants=False
        )
        .coalesce()
        .to_sparse_csr()
    )
    return a_rw, a_sym


def recurrent_representations(
    gvt: GraphViewTransformation,
    x: torch.Tensor,
    edge_index: torch.Tensor,
    depths: int,
    chunk_elements: int = 1 << 22,
    check=lambda: None,
) -> list[torch.Tensor]:
    """[X_1, ..., X_depths]: X_l is the view transformation of X_{l-1}, computed column chunk by column chunk."""
    n, f = x.shape
    a_rw, a_sym = propagation_matrices(edge_index, n, x.dtype)
    width = max(1, chunk_elements // max(1, n * (1 + 2 * gvt.max_hop)))
    outs = [torch.empty_like(x) for _ in range(depths)]
    with torch.no_grad():
        for start in range(0, f, width):
            h = x[:, start : start + width]
            for level in range(depths):
                h = gvt(h, a_rw, a_sym)
                outs[level][:, start : start + width] = h
            check()
    return outs


class Head(nn.Module):
    """Upstream's predictor: Linear, or Linear -> ReLU -> Linear (hidden 128); orthogonal weights, zero biases."""

    def __init__(self, in_dim: int, out_dim: int, kind: str, hidden: int) -> None:
        super().__init__()
        layers = (
            [nn.Linear(in_dim, out_dim)]
            if kind == "linear"
            else [nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, out_dim)]
        )
        self.net = nn.Sequential(*layers)
        for m in self.net:
            if isinstance(m, nn.Linear):
                nn.init.orthogonal_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
