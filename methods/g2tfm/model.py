"""G2T-FM's networks, written from their published structure.

* ``TabICL``: the TabPFN-v2 classifier as G2T-FM uses it — one token per
  feature value (a shared linear value embedding plus a random-subspace
  positional embedding per feature), one label token per row (linear in the
  label and a "missing" indicator, the query rows carrying the rounded mean
  training label with indicator -2), 12 post-norm layers of attention between
  features, attention between items (context rows attend to context rows;
  query rows attend to context rows with the first head's keys/values shared
  by all heads) and an MLP, then a decoder to 10 logits from the label token.
* ``PEARL``: the random-GNN embedding module — random Gaussian node inputs
  through an MLP, three GCN layers and an output MLP, averaged over 8 draws.

``load_tabpfn_state`` maps the TabPFN-v2 classifier checkpoint's keys onto
``TabICL`` exactly as G2T-FM extracts them.
"""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from methods.sdk import (
    chunked_attention,
)

DEFAULT_TABPFN: dict[str, Any] = {"emsize": 192, "nhead": 6, "nlayers": 12, "nhid_factor": 4, "n_out": 10}
DEFAULT_PEARL: dict[str, Any] = {"d_hidden": 512, "n_layers": 3, "output_dim": 16, "samples": 8}


class PackedAttention(nn.Module):
    """TabPFN-v2 attention weights: ``_w_qkv`` (3, H, D, E), ``_w_out`` (H, D, E); scale 1/sqrt(D)."""

    def __init__(self, e: int, nhead: int) -> None:
        super().__init__()
        d = e // nhead
        self.nhead = nhead
        self._w_qkv = nn.Parameter(torch.empty(3, nhead, d, e))
        self._w_out = nn.Parameter(torch.empty(nhead, d, e))
        bound = (3.0 * 2.0 / (nhead * d + e)) ** 0.5
        nn.init.uniform_(self._w_qkv, -bound, bound)
        nn.init.xavier_uniform_(self._w_out)

    def attend(self, x: torch.Tensor, x_kv: torch.Tensor, first_head_kv: bool, chunk: int) -> torch.Tensor:
        """x (B, Lq, E), x_kv (B, Lk, E) -> (B, Lq, E)."""
        q = torch.einsum("ble,hde->bhld", x, self._w_qkv[0])
        w_kv = self._w_qkv[1:, :1] if first_head_kv else self._w_qkv[1:]
        kv = torch.einsum("ble,jhde->jbhld", x_kv, w_kv)
        k, v = kv[0].expand(-1, self.nhead, -1, -1), kv[1].expand(-1, self.nhead, -1, -1)
        out = chunked_attention(q, k, v, chunk)
        return torch.einsum("bhld,hde->ble", out, self._w_out)


class TabMLP(nn.Module):
    def __init__(self, e: int, hid: int) -> None:
        super().__init__()
        self.linear1 = nn.Linear(e, hid, bias=False)
        self.linear2 = nn.Linear(hid, e, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(F.gelu(self.linear1(x)))


class PerFeatureLayer(nn.Module):
    def __init__(self, e: int, nhead: int, hid: int) -> None:
        super().__init__()
        self.self_attn_between_features = PackedAttention(e, nhead)
        self.self_attn_between_items = PackedAttention(e, nhead)
        self.mlp = TabMLP(e, hid)
        self.layer_norms = nn.ModuleList([nn.LayerNorm(e, elementwise_affine=False) for _ in range(3)])

    def forward(self, x: torch.Tensor, n_ctx: int, chunk: int) -> torch.Tensor:  # x (B, S, T, E)
        b, s, t, e = x.shape
        flat = x.reshape(b * s, t, e)
        x = self.layer_norms[0](x + self.self_attn_between_features.attend(flat, flat, False, t).reshape(b, s, t, e))
        xt = x.transpose(1, 2).reshape(b * t, s, e)
        ctx = xt[:, :n_ctx]
        parts = [self.self_attn_between_items.attend(ctx, ctx, False, chunk)]
        if s > n_ctx:
            parts.append(self.self_attn_between_items.attend(xt[:, n_ctx:], ctx, True, chunk))
        items = torch.cat(parts, dim=1).reshape(b, t, s, e).transpose(1, 2)
        x = self.layer_norms[1](x + items)
        return self.layer_norms[2](x + self.mlp(x))


class TabICL(nn.Module):
    def __init__(self, arch: dict[str, Any]) -> None:
        super().__init__()
        e, h = arch["emsize"], arch["nhead"]
        hid = e * arch["nhid_factor"]
        self.arch = arch
        self.m_num = nn.Linear(1, e, bias=False)
        self.pos_embs = nn.Linear(e // 4, e)
        self.y_embedding_weight = nn.Parameter(torch.randn(e) / e**0.5)
        self.y_embedding_nan_ind = nn.Parameter(torch.randn(e) / e**0.5)
        self.y_embedding_bias = nn.Parameter(torch.zeros(e))
        self.transformer_encoder = nn.Module()
        self.transformer_encoder.layers = nn.ModuleList([PerFeatureLayer(e, h, hid) for _ in range(arch["nlayers"])])
        self.decoder = nn.Sequential(nn.Linear(e, hid), nn.GELU(), nn.Linear(hid, arch["n_out"]))

    def forward(self, x: torch.Tensor, y_ctx: torch.Tensor, chunk: int) -> torch.Tensor:
        """x (1, S, F) context rows first; y_ctx (1, n_ctx) float labels -> query logits (1, S - n_ctx, n_out)."""
        b, s, f = x.shape
        n_ctx = y_ctx.shape[1]
        tokens = self.m_num(x.unsqueeze(-1))
        tokens = (
            tokens
            + self.pos_embs(torch.randn(f, tokens.shape[-1] // 4, device=x.device, dtype=tokens.dtype))[None, None]
        )
        y_fill = torch.round(y_ctx.mean(dim=1, keepdim=True))
        y_all = torch.cat([y_ctx, y_fill.expand(b, s - n_ctx)], dim=1)
        nan_ind = torch.zeros(b, s, device=x.device, dtype=tokens.dtype)
        nan_ind[:, n_ctx:] = -2.0
        y_emb = (
            y_all[..., None] * self.y_embedding_weight
            + nan_ind[..., None] * self.y_embedding_nan_ind
            + self.y_embedding_bias
        )
        h = torch.cat([tokens, y_emb.unsqueeze(2).to(tokens.dtype)], dim=2)
        for layer in cast(nn.ModuleList, self.transformer_encoder.layers):
            h = layer(h, n_ctx, chunk)
        return self.decoder(h[:, n_ctx:, -1])


def load_tabpfn_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """TabPFN-v2 classifier checkpoint -> TabICL, as G2T-FM extracts it."""
    out = {
        "m_num.weight": state["encoder.5.layer.weight"][:, 0].unsqueeze(1),
        "pos_embs.weight": state["feature_positional_embedding_embeddings.weight"],
        "pos_embs.bias": state["feature_positional_embedding_embeddings.bias"],
        "y_embedding_weight": state["y_encoder.2.layer.weight"][:, 0],
        "y_embedding_nan_ind": state["y_encoder.2.layer.weight"][:, 1],
        "y_embedding_bias": state["y_encoder.2.layer.bias"],
    }
    for key, value in state.items():
        if key.startswith("transformer_encoder.layers."):
            out[key] = value
        elif key.startswith("decoder_dict.standard."):
            out["decoder." + key.removeprefix("decoder_dict.standard.")] = value
    return out


class PEARL(nn.Module):
    """Random-GNN node embeddings: mean over ``samples`` random inputs of MLP -> 3 x GCN -> MLP."""

    def __init__(self, arch: dict[str, Any]) -> None:
        super().__init__()
        d = arch["d_hidden"]
        self.arch = arch
        self.input = nn.Sequential(nn.Linear(1, d), nn.Dropout(0.1), nn.GELU(), nn.Linear(d, d))
        self.backbone = nn.Module()
        self.backbone.layers = nn.ModuleList([_GCNResidual(d) for _ in range(arch["n_layers"])])
        self.output = nn.Sequential(nn.Identity(), nn.Linear(d, d), nn.GELU(), nn.Linear(d, arch["output_dim"]))

    def forward(self, edge_index: torch.Tensor, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        src, dst = edge_index
        deg = torch.bincount(src, minlength=n).float().clamp(min=1.0)
        coef = 1.0 / torch.sqrt(deg[src] * deg[dst])
        outs = []
        for _ in range(self.arch["samples"]):
            x = torch.randn(n, 1, generator=generator).to(edge_index.device)
            x = self.input(x)
            for layer in cast(nn.ModuleList, self.backbone.layers):
                x = layer(x, src, dst, coef)
            outs.append(self.output(x))
        return torch.stack(outs, dim=-1).mean(-1)


class _GCNFFN(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(d, d), nn.Dropout(0.1), nn.GELU(), nn.Linear(d, d), nn.Dropout(0.1))


class _GCNBase(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ffn = _GCNFFN(d)


class _GCNResidual(nn.Module):
    """G2T-FM's ResidualModule(GCNModule) with norm 'none' and residual off: x <- FFN(sum_u c_uv x_u)."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.Identity()
        self.base = _GCNBase(d)

    def forward(self, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, coef: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        agg = torch.zeros_like(h).index_add_(0, dst, h[src] * coef.unsqueeze(-1))
        return self.base.ffn.layers(agg)


class G2TNet(nn.Module):
    """The two frozen parts together (one state_dict: ``tabpfn.*`` and ``pearl.*``)."""

    def __init__(self, arch: dict[str, Any]) -> None:
        super().__init__()
        self.tabpfn = TabICL({k: arch[k] for k in DEFAULT_TABPFN})
        self.pearl = PEARL({k: arch[k] for k in DEFAULT_PEARL})
