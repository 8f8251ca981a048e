"""GraphPFN's network, written from its published structure: a LimiX-16M tabular
in-context transformer whose 12 layers are each followed by two graph adapters.

Parameter names follow the official modules, so the official LimiX-16M
checkpoint (``state_dict`` + ``config``) and GraphPFN's adapter checkpoint load
into this module as they are (see ``methods/graphpfn/__init__.py``).

LimiX forward (classification path), per dataset of S rows and F features:
features are zero-padded to a multiple of ``features_per_group`` and grouped
into G tokens per row; each group is preprocessed (NaN encoding, outlier
clipping and z-scoring with train-row statistics, rescaling by the number of
non-constant features), embedded value-by-value by a small MLP and fused into
one token; one more token per row carries the label (an orthogonal embedding
per class for context rows, a mask embedding for query rows). Every layer runs
(pre-norm, ``fmfmsm``) feature attention, MLP, feature attention, MLP,
sequence attention (context rows attend to context rows; query rows attend to
context rows with the first head's keys/values shared by all heads), MLP.
GraphPFN adds after each layer a residual graph-attention module (per token,
nodes attend over their neighbours) and a residual MLP. The label token of
query rows is decoded into 10 logits.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.utils import softmax as edge_softmax

from methods.sdk import (
    attention_chunk,
    chunked_attention,
)

DEFAULT_ARCH: dict[str, Any] = {
    # LimiX-16M (the values in its checkpoint's config; a real checkpoint's config wins)
    "embed_dim": 192,
    "hid_dim": 768,
    "nhead": 6,
    "nlayers": 12,
    "features_per_group": 2,
    "max_num_classes": 10,
    "numeric_embed_type": "linear",
    "encoder_use_bias": True,
    "nan_handling_enabled": True,
    "nan_handling_y_encoder": True,
    "normalize_on_train_only": True,
    "normalize_x": True,
    "remove_outliers": True,
    "normalize_by_used_features": True,
    "pre_norm": True,
    "layer_norm_eps": 1e-5,
    "self_share_all_kv_heads": False,
    "cross_share_all_kv_heads": True,
    # GraphPFN adapters
    "adapter_heads": 4,
    "n_random_features": 8,
}


# ---- LimiX building blocks --------------------------------------------------------


class MHA(nn.Module):
    """Multi-head attention with LimiX's packed weights: qkv (3, H, D, E), out (H, D, E)."""

    def __init__(self, embed_dim: int, nhead: int) -> None:
        super().__init__()
        self.nhead, self.head_dim = nhead, embed_dim // nhead
        self.qkv_proj_weight = nn.Parameter(torch.empty(3, nhead, self.head_dim, embed_dim))
        self.out_proj_weight = nn.Parameter(torch.empty(nhead, self.head_dim, embed_dim))
        nn.init.xavier_uniform_(self.qkv_proj_weight)
        nn.init.normal_(self.out_proj_weight, std=embed_dim**-0.5)

    def out(self, attn: torch.Tensor) -> torch.Tensor:  # (..., H, D) -> (..., E)
        return torch.einsum("...hd,hde->...e", attn, self.out_proj_weight)

    def self_attention(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, L, E): attention within each of the B sequences."""
        qkv = torch.einsum("ble,jhde->jbhld", x, self.qkv_proj_weight)
        attn = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])  # (B, H, L, D)
        return self.out(attn.transpose(1, 2))

    def cross_attention(
        self, x: torch.Tensor, x_kv: torch.Tensor, share_first_head_kv: bool, chunk: int
    ) -> torch.Tensor:
        """x (B, Lq, E) attends to x_kv (B, Lk, E)."""
        q = torch.einsum("ble,hde->bhld", x, self.qkv_proj_weight[0])
        w_kv = self.qkv_proj_weight[1:, :1] if share_first_head_kv else self.qkv_proj_weight[1:]
        kv = torch.einsum("ble,jhde->jbhld", x_kv, w_kv)
        k, v = kv[0].expand(-1, self.nhead, -1, -1), kv[1].expand(-1, self.nhead, -1, -1)
        attn = chunked_attention(q, k, v, chunk)
        return self.out(attn.transpose(1, 2))


class LimiXMLP(nn.Module):
    def __init__(self, embed_dim: int, hid_dim: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(embed_dim, hid_dim, bias=False), nn.GELU(), nn.Linear(hid_dim, embed_dim, bias=False)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x)


class LimiXLayer(nn.Module):
    """One ``fmfmsm`` layer: feature attn, MLP, feature attn, MLP, sequence attn, MLP (pre-norm residuals)."""

    def __init__(self, arch: dict[str, Any]) -> None:
        super().__init__()
        e, h = arch["embed_dim"], arch["nhead"]
        self.arch = arch
        self.feature_attentions = nn.ModuleList([MHA(e, h) for _ in range(2)])
        self.sequence_attentions = nn.ModuleList([MHA(e, h)])
        self.mlp = nn.ModuleList([LimiXMLP(e, arch["hid_dim"]) for _ in range(3)])
        self.layer_norms = nn.ModuleList(
            [nn.LayerNorm(e, eps=arch["layer_norm_eps"], elementwise_affine=False) for _ in range(6)]
        )

    def _feature_attention(self, x: torch.Tensor, index: int) -> torch.Tensor:
        b, s, t, e = x.shape
        attn = cast(MHA, self.feature_attentions[index])
        return attn.self_attention(x.reshape(b * s, t, e)).reshape(b, s, t, e)

    def _sequence_attention(self, x: torch.Tensor, eval_pos: int) -> torch.Tensor:
        b, s, t, e = x.shape
        attn = cast(MHA, self.sequence_attentions[0])
        xt = x.transpose(1, 2).reshape(b * t, s, e)
        train = xt[:, :eval_pos]
        n_test = s - eval_pos
        chunk = attention_chunk(max(eval_pos, n_test), eval_pos, b * t, attn.nhead)
        out_train = attn.cross_attention(train, train, self.arch["self_share_all_kv_heads"], chunk)
        parts = [out_train]
        if n_test:
            parts.append(attn.cross_attention(xt[:, eval_pos:], train, self.arch["cross_share_all_kv_heads"], chunk))
        # back to (B, S, T, E) before joining, so that the residual stream stays contiguous for the next steps
        return torch.cat([part.reshape(b, t, -1, e).transpose(1, 2) for part in parts], dim=1)

    def forward(self, x: torch.Tensor, eval_pos: int) -> torch.Tensor:
        steps: list[Callable[[torch.Tensor], torch.Tensor]] = [
            lambda z: self._feature_attention(z, 0),
            self.mlp[0],
            lambda z: self._feature_attention(z, 1),
            self.mlp[1],
            lambda z: self._sequence_attention(z, eval_pos),
            self.mlp[2],
        ]
        for step, norm in zip(steps, self.layer_norms, strict=True):
            if self.arch["pre_norm"]:
                x = x + step(norm(x))
            else:
                x = norm(x + step(x))
        return x


class MaskEmbEncoder(nn.Module):
    """Each value of a feature group through a small MLP (NaNs get a learned mask vector), then fused."""

    def __init__(self, arch: dict[str, Any]) -> None:
        super().__init__()
        e, fpg, bias = arch["embed_dim"], arch["features_per_group"], arch["encoder_use_bias"]
        if arch["numeric_embed_type"] != "linear":
            raise ValueError(f"numeric_embed_type {arch['numeric_embed_type']!r} is not implemented (only 'linear')")
        self.mask_embedding = nn.Parameter(torch.randn(e))
        self.numeric_mlp = nn.Sequential(
            nn.Linear(1, e // 2), nn.LayerNorm(e // 2), nn.ReLU(), nn.Linear(e // 2, e), nn.LayerNorm(e), nn.ReLU()
        )
        self.fusion_network = nn.Sequential(
            nn.Linear(fpg * e, e, bias=bias), nn.LayerNorm(e), nn.ReLU(), nn.Linear(e, e, bias=bias), nn.LayerNorm(e)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, S, G, fpg) -> (B, S, G, E)
        x = x.unsqueeze(-1)
        is_nan = torch.isnan(x)
        emb = self.numeric_mlp(x.masked_fill(is_nan, 0.0))
        emb = torch.where(is_nan, self.mask_embedding.expand_as(emb), emb)
        return self.fusion_network(emb.flatten(3))


class EmbYEncoder(nn.Module):
    """Class labels as rows of an orthogonal matrix; the last row marks query rows."""

    def __init__(self, embed_dim: int, n_classes: int) -> None:
        super().__init__()
        ortho = torch.empty(n_classes + 1, embed_dim)
        nn.init.orthogonal_(ortho)
        self.y_embedding = nn.Embedding(n_classes, embed_dim)
        self.y_embedding.weight.data = ortho[:n_classes].clone()
        self.y_mask = nn.Embedding(1, embed_dim)
        self.y_mask.weight.data = ortho[n_classes:].clone()


class RegYEncoder(nn.Module):
    """Present for checkpoint compatibility (regression path, unused here)."""

    def __init__(self, embed_dim: int) -> None:
        super().__init__()
        self.layer = nn.Linear(2, embed_dim)


class Stateless(nn.Module):
    """A parameter-free step (NaN encoder, target encoder) that keeps the official Sequential indices."""


def _nan_mean(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    num = (~torch.isnan(x)).sum(dim=dim).clamp(min=1)
    return torch.nansum(x, dim=dim) / num, num


def _nan_std(x: torch.Tensor, dim: int, mean: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
    return torch.sqrt(torch.nansum((x - mean.unsqueeze(dim)) ** 2, dim=dim) / (num - 1).clamp(min=1))


def preprocess_x(x: torch.Tensor, eval_pos: int, arch: dict[str, Any]) -> torch.Tensor:
    """LimiX's parameter-free x preprocessing on (B, S, G, fpg): statistics from the context rows."""
    mean, _ = _nan_mean(x[:, :eval_pos], 1)
    x = torch.where(torch.isnan(x) | torch.isinf(x), mean.unsqueeze(1).expand_as(x), x)
    pos = eval_pos if arch["normalize_on_train_only"] else x.shape[1]
    if arch["remove_outliers"]:
        data = x[:, :pos].clone()
        m, n = _nan_mean(data, 1)
        cut = _nan_std(data, 1, m, n) * 4.0
        outlier = (data > (m + cut).unsqueeze(1)) | (data < (m - cut).unsqueeze(1))
        data = torch.where(outlier, torch.nan, data)
        m, n = _nan_mean(data, 1)  # statistics again, without the outliers
        cut = _nan_std(data, 1, m, n) * 4.0
        lower, upper = (m - cut).unsqueeze(1), (m + cut).unsqueeze(1)
        x = torch.maximum(-torch.log1p(x.abs()) + lower, x)
        x = torch.minimum(torch.log1p(x.abs()) + upper, x)
    if arch["normalize_x"]:
        m, n = _nan_mean(x[:, :pos], 1)
        std = _nan_std(x[:, :pos], 1, m, n) + 1e-20
        if x.shape[1] == 1 or pos == 1:
            std = torch.ones_like(std)
        x = ((x - m.unsqueeze(1)) / std.unsqueeze(1)).clamp(-100, 100)
    if arch["normalize_by_used_features"]:
        fpg = arch["features_per_group"]
        valid = (~torch.all(x == x[:, 0:1], dim=1)).sum(-1, keepdim=True).clamp(min=1)  # (B, G, 1)
        x = x * torch.sqrt(fpg / valid).unsqueeze(1)
    return x


class LimiXTransformer(nn.Module):
    """LimiX's FeaturesTransformer (classification path)."""

    def __init__(self, arch: dict[str, Any]) -> None:
        super().__init__()
        e, hid, c = arch["embed_dim"], arch["hid_dim"], arch["max_num_classes"]
        self.arch = arch
        self.encoder_x = nn.Sequential(MaskEmbEncoder(arch))
        y_steps = [Stateless()] if arch["nan_handling_y_encoder"] else []
        self.cls_y_encoder = nn.Sequential(*y_steps, Stateless(), EmbYEncoder(e, c))
        self.reg_y_encoder = nn.Sequential(*y_steps, RegYEncoder(e))
        self.transformer_encoder = nn.Module()
        self.transformer_encoder.layers = nn.ModuleList([LimiXLayer(arch) for _ in range(arch["nlayers"])])
        self.encoder_out_norm = (
            nn.LayerNorm(e, eps=1e-5, elementwise_affine=False) if arch["pre_norm"] else nn.Identity()
        )
        self.cls_y_decoder = nn.Sequential(nn.Linear(e, hid), nn.GELU(), nn.Linear(hid, c))
        self.reg_y_decoder = nn.Sequential(nn.Linear(e, hid), nn.LayerNorm(hid), nn.GELU(), nn.Linear(hid, 1))
        self.feature_decoder = nn.Sequential(
            nn.Linear(e, hid), nn.LayerNorm(hid), nn.GELU(), nn.Linear(hid, arch["features_per_group"])
        )
        self.feature_positional_embedding = nn.Linear(e // 4, e)

    def embed(self, x: torch.Tensor, y_train: torch.Tensor) -> torch.Tensor:
        """x (1, S, F) with the context rows first; y_train (1, n_ctx) integer classes -> (1, S, G+1, E)."""
        b, s, f = x.shape
        fpg, eval_pos = self.arch["features_per_group"], y_train.shape[1]
        pad = (-f) % fpg
        if pad:
            x = torch.cat([x, x.new_zeros(b, s, pad)], dim=-1)
        x = x.reshape(b, s, -1, fpg)
        x = preprocess_x(x, eval_pos, self.arch)
        emb_x = self.encoder_x(x)
        # feature positional embedding: a fresh random orthogonal code per group, projected
        g, e = emb_x.shape[2], emb_x.shape[3]
        codes = torch.randn(g, e // 4, device=x.device, dtype=torch.float32)
        nn.init.orthogonal_(codes)
        emb_x = emb_x + self.feature_positional_embedding(codes.to(emb_x.dtype))[None, None]
        # labels: rank among the context's distinct labels, orthogonal embedding (kept in float16 as upstream)
        enc = cast(EmbYEncoder, self.cls_y_encoder[-1])
        uniq = torch.unique(y_train)
        ranks = (y_train.unsqueeze(-1) > uniq).sum(-1)
        y_ctx = enc.y_embedding(ranks).to(torch.float16).float()
        y_query = enc.y_mask(torch.zeros(b, s - eval_pos, dtype=torch.long, device=x.device)).to(torch.float16).float()
        emb_y = torch.cat([y_ctx, y_query], dim=1).to(emb_x.dtype)
        return torch.cat([emb_x, emb_y.unsqueeze(2)], dim=2)

    def decode(self, h: torch.Tensor, eval_pos: int) -> torch.Tensor:
        h = self.encoder_out_norm(h)
        return self.cls_y_decoder(h[:, eval_pos:, -1])


# ---- GraphPFN adapters --------------------------------------------------------------


@dataclass(frozen=True)
class InEdges:
    """The graph as rows of in-edges (CSR: one row per target node, its sources as columns), built once per
    forward pass. The adapters' attention is then a sampled dense-dense product (scores on the edges only)
    and a sparse-dense product (the weighted sum), as DGL's fused kernels do upstream: no per-edge copy of
    the node features is ever made."""

    crow: torch.Tensor
    col: torch.Tensor
    row: torch.Tensor  # the target node of each entry, for the softmax over a node's in-edges
    num_nodes: int

    @classmethod
    def from_edge_index(cls, edge_index: torch.Tensor, num_nodes: int) -> InEdges:
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        src, dst = edge_index
        order = torch.argsort(dst, stable=True)
        crow = torch.zeros(num_nodes + 1, dtype=torch.int64, device=dst.device)
        crow[1:] = torch.bincount(dst, minlength=num_nodes).cumsum(0)
        return cls(crow, src[order].contiguous(), dst[order].contiguous(), num_nodes)

    def matrix(self, values: torch.Tensor) -> torch.Tensor:
        return torch.sparse_csr_tensor(
            self.crow, self.col, values, size=(self.num_nodes, self.num_nodes), check_invariants=False
        )


class GraphAttention(nn.Module):
    """Per token, each node attends over its in-neighbours (dot-product scores, softmax over incoming edges)."""

    def __init__(self, d: int, n_heads: int) -> None:
        super().__init__()
        self.d, self.n_heads, self.d_head = d, n_heads, d // n_heads
        self.attn_qkv_linear = nn.Linear(d, 3 * d)
        self.output_linear = nn.Linear(d, d)
        nn.init.zeros_(self.output_linear.weight)
        nn.init.zeros_(self.output_linear.bias)

    def forward(self, graph: InEdges, x: torch.Tensor) -> torch.Tensor:  # x (1, S, T, E)
        x = x.squeeze(0)
        s, t, _ = x.shape
        qkv = self.attn_qkv_linear(x).reshape(s, t, self.n_heads, 3 * self.d_head)
        # one (nodes x d_head) matrix per token and head; the sparse kernels run in float32 (no bfloat16 CSR kernels)
        q, k, v = (
            z.permute(1, 2, 0, 3).reshape(t * self.n_heads, s, self.d_head).float()
            for z in qkv.split(self.d_head, dim=-1)
        )
        pattern = graph.matrix(q.new_zeros(graph.col.numel()))
        scores = torch.stack(
            [torch.sparse.sampled_addmm(pattern, q[i], k[i].T, beta=0.0).values() for i in range(len(q))], dim=1
        )
        probs = edge_softmax(scores * (1.0 / math.sqrt(self.d_head)), graph.row, num_nodes=s)  # (E, T*H)
        out = torch.stack([torch.sparse.mm(graph.matrix(probs[:, i].contiguous()), v[i]) for i in range(len(v))])
        out = out.view(t, self.n_heads, s, self.d_head).permute(2, 0, 1, 3).reshape(s, t, self.d).to(x.dtype)
        return self.output_linear(out).unsqueeze(0)


class AdapterMLP(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        last = cast(nn.Linear, self.layers[-1])
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)

    def forward(self, graph: InEdges, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class Residual(nn.Module):
    def __init__(self, base: nn.Module, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.base = base

    def forward(self, graph: InEdges, x: torch.Tensor) -> torch.Tensor:
        return x + self.base(graph, self.norm(x))


class GraphPFNLayer(nn.Module):
    """A LimiX layer followed by GraphPFN's graph-attention and MLP adapters."""

    def __init__(self, arch: dict[str, Any]) -> None:
        super().__init__()
        d = arch["embed_dim"]
        self.base = LimiXLayer(arch)
        self.conv = Residual(GraphAttention(d, arch["adapter_heads"]), d)
        self.mlp = Residual(AdapterMLP(d), d)

    def forward(self, x: torch.Tensor, eval_pos: int, graph: InEdges) -> torch.Tensor:
        x = self.base(x, eval_pos)
        return self.mlp(graph, self.conv(graph, x))


class LimiXWrapper(nn.Module):
    def __init__(self, arch: dict[str, Any]) -> None:
        super().__init__()
        self.module = LimiXTransformer(arch)
        layers = cast(nn.ModuleList, self.module.transformer_encoder.layers)
        for i in range(len(layers)):
            wrapped = GraphPFNLayer(arch)
            wrapped.base = cast(LimiXLayer, layers[i])
            layers[i] = wrapped


class GraphPFNNet(nn.Module):
    """GraphPFN-light: one in-context forward over the whole graph (context nodes first)."""

    def __init__(self, arch: dict[str, Any]) -> None:
        super().__init__()
        self.arch = arch
        self.tfm = LimiXWrapper(arch)

    def forward(
        self, features: torch.Tensor, edge_index: torch.Tensor, y_train: torch.Tensor, train_mask: torch.Tensor
    ) -> torch.Tensor:
        """features (N, F); edge_index (2, E) without self-loops, both directions; y_train classes of the
        train_mask nodes in node order. Returns (N, 10) log-probabilities; train rows are zeros."""
        n = features.shape[0]
        if self.arch["n_random_features"] > 0:
            features = torch.cat(
                [features, torch.randn(n, self.arch["n_random_features"], device=features.device)], dim=-1
            )
        perm = torch.argsort((~train_mask).to(torch.int8), stable=True)
        inv = torch.argsort(perm, stable=True)
        x = features[perm].unsqueeze(0)
        graph = InEdges.from_edge_index(inv[edge_index], n)
        n_ctx = int(y_train.shape[0])
        limix = self.tfm.module
        h = limix.embed(x, y_train.unsqueeze(0))
        for layer in cast(nn.ModuleList, limix.transformer_encoder.layers):
            h = layer(h, n_ctx, graph)
        logits = limix.decode(h, n_ctx).float().squeeze(0)
        preds = torch.log_softmax(logits, dim=-1)
        out = torch.cat([preds.new_zeros(n_ctx, preds.shape[1]), preds], dim=0)
        return out[inv]


def load_limix_state(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """LimiX checkpoint keys -> this module's keys (its layers sit under ``.base`` inside the adapters)."""
    out = {}
    for key, value in state.items():
        parts = key.split(".")
        if key.startswith("transformer_encoder.layers.") and len(parts) > 3:
            key = ".".join(parts[:3] + ["base"] + parts[3:])
        out["tfm.module." + key] = value
    return out


def arch_from_limix_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The structure keys we need from LimiX's checkpoint config (nested dicts as upstream saves them)."""
    ex, ey, pre = cfg.get("encoder_config_x", {}), cfg.get("encoder_config_y", {}), cfg.get("preprocess_config_x", {})
    arch = {
        "embed_dim": cfg.get("embed_dim"),
        "hid_dim": cfg.get("hid_dim"),
        "nhead": cfg.get("nhead"),
        "nlayers": cfg.get("nlayers"),
        "features_per_group": cfg.get("features_per_group"),
        "max_num_classes": cfg.get("decoder_config", {}).get("num_classes", ey.get("max_num_classes")),
        "numeric_embed_type": ex.get("numeric_embed_type", "linear"),
        "encoder_use_bias": ex.get("encoder_use_bias"),
        "nan_handling_enabled": pre.get("nan_handling_enabled"),
        "nan_handling_y_encoder": ey.get("nan_handling_y_encoder"),
        "normalize_on_train_only": pre.get("normalize_on_train_only"),
        "normalize_x": pre.get("normalize_x"),
        "remove_outliers": pre.get("remove_outliers"),
        "normalize_by_used_features": pre.get("normalize_by_used_features"),
        "pre_norm": cfg.get("pre_norm", True),
        "layer_norm_eps": cfg.get("layer_norm_eps", 1e-5),
        "self_share_all_kv_heads": cfg.get("self_share_all_kv_heads", False),
        "cross_share_all_kv_heads": cfg.get("cross_share_all_kv_heads", True),
    }
    if cfg.get("layer_arch", "fmfmsm") != "fmfmsm" or cfg.get("seq_attn_isolated") or cfg.get("seq_attn_serial"):
        raise ValueError(
            "LimiX checkpoint uses a layer arrangement other than fmfmsm without isolated/serial sequence attention"
        )
    return {k: v for k, v in arch.items() if v is not None}


# ---- ECOC output coding (more classes than the 10-way decoder) ---------------------------


def min_ecoc_members(n_classes: int, alphabet: int) -> int:
    if n_classes <= alphabet:
        return 1
    return max(math.ceil(math.log(n_classes, alphabet)), math.ceil(n_classes / (alphabet - 1)))


def _codebook_once(n_classes: int, n_members: int, alphabet: int, gen: torch.Generator) -> torch.Tensor:
    book = torch.zeros(n_members, n_classes, dtype=torch.long)
    classes = torch.arange(n_classes)
    focused = min(n_classes, n_members)
    for row in range(focused):  # one class alone against the others split into alphabet-1 groups
        others = classes[classes != row]
        others = others[torch.randperm(len(others), generator=gen)]
        for code, group in enumerate(torch.tensor_split(others, alphabet - 1), start=1):
            book[row, group] = code
    for row in range(focused, n_members):  # random balanced partitions
        shuffled = classes[torch.randperm(n_classes, generator=gen)]
        for code, group in enumerate(torch.tensor_split(shuffled, alphabet)):
            book[row, group] = code
    return book.T  # (classes, members)


def _codebook_score(book: torch.Tensor) -> tuple[float, float]:
    onehot = F.one_hot(book, int(book.max()) + 1)
    dist = (onehot[None] - onehot[:, None]).abs().sum((2, 3)).float()
    off = dist[~torch.eye(dist.shape[0], dtype=torch.bool)]
    return off.min().item(), off.mean().item()


def ecoc_codebook(
    n_classes: int, n_members: int, alphabet: int, gen: torch.Generator, retries: int = 50
) -> torch.Tensor:
    """Best of ``retries`` random codebooks by (min, mean) pairwise class distance."""
    best = _codebook_once(n_classes, n_members, alphabet, gen)
    best_score = _codebook_score(best)
    for _ in range(retries):
        book = _codebook_once(n_classes, n_members, alphabet, gen)
        score = _codebook_score(book)
        if score > best_score:
            best, best_score = book, score
    if best_score[0] <= 0:
        raise ValueError(f"no ECOC codebook separates {n_classes} classes with {n_members} members")
    return best


def ecoc_aggregate(member_logprobs: list[torch.Tensor], book: torch.Tensor) -> torch.Tensor:
    """member_logprobs: per member (N, alphabet) log-probs -> (N, classes) log-probs."""
    lp = torch.log_softmax(torch.stack(member_logprobs, dim=-1), dim=-2)  # (N, A, M)
    onehot = F.one_hot(book, num_classes=lp.shape[1]).float()  # (C, M, A)
    return torch.log_softmax(torch.einsum("nam,cma->nc", lp, onehot), dim=1)
