"""NodePFN's network, written from its published structure: a TabPFN-v1-style PFN
transformer whose layers combine, GPS-style, a GCN message-passing branch and
the in-context attention branch.

Per layer (post-norm, as upstream): ``h_local = LN_local(h + GCN(h))``,
``h_attn = LN_global(h + Attn(h))`` where context rows attend to context rows
and query rows attend to context rows only, ``h = h_local + h_attn``, then
``h = LN2(h + W2 gelu(W1 h))``. Inputs: features (zero-padded to
``num_features``) through a linear encoder; context rows add a linear embedding
of their label. The decoder maps query rows to ``max_num_classes`` logits.

Parameter names follow the upstream modules (``nn.MultiheadAttention``,
PyG ``GCNConv``), so the released checkpoint's state_dict loads as it is.

The GCN branch is GCNConv's arithmetic (``lin``, then the sum over
``gcn_norm``'s weighted edges, then ``bias``) with the normalized adjacency
built once per forward as a CSR matrix: one sparse product per layer instead of
gathering and scattering a copy of the hidden states per edge (the same sums in
another order; on a 20k-node graph about a fifth of the forward's time and most
of its peak memory).
"""

from __future__ import annotations

import warnings
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GCNConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from methods.sdk import (
    chunked_attention,
)

DEFAULT_ARCH: dict[str, Any] = {
    # the released checkpoint's config (a real checkpoint's config wins)
    "emsize": 512,
    "nhead": 4,
    "nlayers": 12,
    "nhid_factor": 2,
    "num_features": 100,
    "max_num_classes": 20,
}


class NanToZeroLinear(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(torch.nan_to_num(x, nan=0.0))


class GPSLayer(nn.Module):
    def __init__(self, d: int, nhead: int, nhid: int) -> None:
        super().__init__()
        self.nhead = nhead
        self.self_attn = nn.MultiheadAttention(d, nhead)
        self.local_model = GCNConv(d, d)
        self.linear1 = nn.Linear(d, nhid)
        self.linear2 = nn.Linear(nhid, d)
        self.norm1 = nn.LayerNorm(d)  # unused by the GPS path; kept for checkpoint compatibility
        self.norm2 = nn.LayerNorm(d)
        self.norm1_local = nn.LayerNorm(d)
        self.norm1_global = nn.LayerNorm(d)

    def _attention(self, h: torch.Tensor, eval_pos: int, chunk: int) -> torch.Tensor:
        """h (S, B, E): every row attends to the context rows [0, eval_pos)."""
        s, b, e = h.shape
        d = e // self.nhead
        w, bias = self.self_attn.in_proj_weight, self.self_attn.in_proj_bias
        q = F.linear(h, w[:e], bias[:e])
        k = F.linear(h[:eval_pos], w[e : 2 * e], bias[e : 2 * e])
        v = F.linear(h[:eval_pos], w[2 * e :], bias[2 * e :])

        def heads(t: torch.Tensor) -> torch.Tensor:  # (L, B, E) -> (B, H, L, D)
            return t.reshape(t.shape[0], b, self.nhead, d).permute(1, 2, 0, 3)

        out = chunked_attention(heads(q), heads(k), heads(v), chunk)  # (B, H, S, D)
        out = out.permute(2, 0, 1, 3).reshape(s, b, e)
        return self.self_attn.out_proj(out)

    def _local(self, h: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        """GCNConv on h (S, B, E) with its normalized adjacency ``adj`` (S x S, CSR)."""
        s, b, e = h.shape
        z = self.local_model.lin(h).reshape(s, b * e)
        return torch.sparse.mm(adj, z).reshape(s, b, e) + self.local_model.bias

    def forward(self, h: torch.Tensor, eval_pos: int, adj: torch.Tensor, chunk: int) -> torch.Tensor:
        local = self.norm1_local(h + self._local(h, adj))
        glob = self.norm1_global(h + self._attention(h, eval_pos, chunk))
        h = local + glob
        return self.norm2(h + self.linear2(F.gelu(self.linear1(h))))


class NodePFNNet(nn.Module):
    def __init__(self, arch: dict[str, Any]) -> None:
        super().__init__()
        e, nhid = arch["emsize"], arch["emsize"] * arch["nhid_factor"]
        self.arch = arch
        self.encoder = NanToZeroLinear(arch["num_features"], e)
        self.y_encoder = nn.Linear(1, e)
        self.transformer_encoder = nn.Module()
        self.transformer_encoder.layers = nn.ModuleList(
            [GPSLayer(e, arch["nhead"], nhid) for _ in range(arch["nlayers"])]
        )
        self.decoder = nn.Sequential(nn.Linear(e, nhid), nn.GELU(), nn.Linear(nhid, arch["max_num_classes"]))

    def forward(self, x: torch.Tensor, y_ctx: torch.Tensor, edge_index: torch.Tensor, chunk: int) -> torch.Tensor:
        """x (S, B, num_features) with the context rows first; y_ctx (n_ctx, B) float labels;
        edge_index over the S rows (undirected, with self-loops). Returns query logits (S - n_ctx, B, C)."""
        n_ctx = y_ctx.shape[0]
        adj = normalized_adjacency(edge_index, x.shape[0], x.dtype)
        h = self.encoder(x)
        h = torch.cat([h[:n_ctx] + self.y_encoder(y_ctx.unsqueeze(-1)), h[n_ctx:]], dim=0)
        for layer in cast(nn.ModuleList, self.transformer_encoder.layers):
            h = layer(h, n_ctx, adj, chunk)
        return self.decoder(h[n_ctx:])


def normalized_adjacency(edge_index: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    """GCNConv's D^-1/2 (A + I) D^-1/2 (its own ``gcn_norm``) as a CSR matrix: rows are targets, columns sources."""
    ei, w = gcn_norm(edge_index, None, n, improved=False, add_self_loops=True, dtype=dtype)
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    return (
        torch.sparse_coo_tensor(torch.stack([ei[1], ei[0]]), w, (n, n), check_invariants=False)
        .coalesce()
        .to_sparse_csr()
    )


def arch_from_config(cfg: dict[str, Any]) -> dict[str, Any]:
    keys = ("emsize", "nhead", "nlayers", "nhid_factor", "num_features", "max_num_classes")
    arch = {k: cfg[k] for k in keys if k in cfg}
    if cfg.get("pos_encoder") not in (None, "none"):
        raise ValueError(f"NodePFN checkpoint uses pos_encoder={cfg.get('pos_encoder')!r}; only 'none' is implemented")
    if any(cfg.get(k, 0) for k in ("nan_prob_no_reason", "nan_prob_a_reason", "nan_prob_unknown_reason")):
        raise ValueError("NodePFN checkpoint uses the NaN-handling encoder; only the linear encoder is implemented")
    return arch
