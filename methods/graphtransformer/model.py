"""The graph Transformers' networks: Polynormer, SGFormer, NAGphormer and GraphGPS, each for one whole graph.

``method.py`` builds them from a configuration, after checking their activation memory.
"""

from __future__ import annotations

from typing import cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GATConv, GCNConv, GINConv, GPSConv

from methods.sdk import Config, feature_dropout

# ---- Polynormer -------------------------------------------------------------------


class PolynormerGlobalAttention(nn.Module):
    """Linear global attention of Polynormer: sigmoid kernels, ``O(N d^2)``, gated by a linear branch."""

    def __init__(self, hidden: int, heads: int, beta: float, dropout: float, qk_shared: bool) -> None:
        super().__init__()
        self.heads, self.head_dim, self.beta = heads, hidden // heads, beta
        self.h_lin = nn.Linear(hidden, hidden)
        self.k_lin = nn.Linear(hidden, hidden)
        self.q_lin = self.k_lin if qk_shared else nn.Linear(hidden, hidden)
        self.v_lin = nn.Linear(hidden, hidden)
        self.ln = nn.LayerNorm(hidden)
        self.lin_out = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        n = x.shape[0]
        h = self.h_lin(x)
        k = torch.sigmoid(self.k_lin(x)).view(n, self.heads, self.head_dim)
        q = k if self.q_lin is self.k_lin else torch.sigmoid(self.q_lin(x)).view(n, self.heads, self.head_dim)
        v = self.v_lin(x).view(n, self.heads, self.head_dim)
        kv = torch.einsum("nhd,nhm->hdm", k, v)
        num = torch.einsum("nhd,hdm->nhm", q, kv)
        den = torch.einsum("nhd,hd->nh", q, k.sum(0)).unsqueeze(-1)
        out = (num / (den + 1e-6)).reshape(n, -1)
        out = self.ln(out) * (h + self.beta)
        return self.dropout(F.relu(self.lin_out(out)))


class PolynormerNet(nn.Module):
    """Local (graph) attention layers, then global linear attention; trained local-only for a warm-up."""

    def __init__(self, config: Config, in_dim: int, out_dim: int) -> None:
        super().__init__()
        hidden, heads = int(config["hidden"]), int(config["heads"])
        self.beta = float(config["beta"])
        self.in_dropout, self.dropout = float(config["input_dropout"]), float(config["dropout"])
        self.h_lins, self.convs, self.lins, self.lns, self.bns = (nn.ModuleList() for _ in range(5))
        for i in range(int(config["local_layers"])):
            a = in_dim if i == 0 else hidden
            self.h_lins.append(nn.Linear(a, hidden))
            if config["local_conv"] == "gat":
                self.convs.append(
                    GATConv(a, hidden // heads, heads=heads, concat=True, add_self_loops=False, bias=False)
                )
            else:
                self.convs.append(GCNConv(a, hidden, cached=True, add_self_loops=False))
            self.lins.append(nn.Linear(a, hidden))
            self.lns.append(nn.LayerNorm(hidden))
            self.bns.append(nn.BatchNorm1d(hidden))
        self.ln = nn.LayerNorm(hidden)
        self.global_layers = nn.ModuleList(
            PolynormerGlobalAttention(
                hidden, heads, self.beta, float(config["global_dropout"]), bool(config["qk_shared"])
            )
            for _ in range(int(config["global_layers"]))
        )
        self.pred_local = nn.Linear(hidden, out_dim)
        self.pred_global = nn.Linear(hidden, out_dim)
        self.local_epochs = int(config["local_epochs"])
        self.min_epochs = self.local_epochs
        self.use_global = self.local_epochs == 0 and len(self.global_layers) > 0

    def set_epoch(self, epoch: int) -> bool:
        if epoch == self.local_epochs and self.local_epochs > 0 and len(self.global_layers) > 0:
            self.use_global = True
            return True
        return False

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        x = feature_dropout(x, self.in_dropout, self.training)
        x_local: Tensor | int = 0
        for h_lin, conv, lin, ln, bn in zip(self.h_lins, self.convs, self.lins, self.lns, self.bns, strict=True):
            h = F.relu(h_lin(x))
            x = F.relu(bn(conv(x, edge_index) + lin(x)))
            x = F.dropout(x, self.dropout, self.training)
            x = (1 - self.beta) * ln(h * x) + self.beta * x
            x_local = x_local + x
        if not self.use_global:
            return self.pred_local(x_local)
        x = self.ln(x_local)
        for layer in self.global_layers:
            x = layer(x)
        return self.pred_global(x)


# ---- SGFormer ---------------------------------------------------------------------


class SGFormerAttention(nn.Module):
    """SGFormer's simple global attention: Frobenius-normalized Q, K, linear in N, plus N * V."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(hidden, hidden * heads)
        self.k = nn.Linear(hidden, hidden * heads)
        self.v = nn.Linear(hidden, hidden * heads)

    def forward(self, x: Tensor) -> Tensor:
        n = x.shape[0]
        q = self.q(x).view(n, self.heads, -1)
        k = self.k(x).view(n, self.heads, -1)
        v = self.v(x).view(n, self.heads, -1)
        q = q / torch.linalg.vector_norm(q).clamp(min=1e-12)
        k = k / torch.linalg.vector_norm(k).clamp(min=1e-12)
        kv = torch.einsum("lhm,lhd->hmd", k, v)
        num = torch.einsum("nhm,hmd->nhd", q, kv) + n * v
        den = torch.einsum("nhm,hm->nh", q, k.sum(0)).unsqueeze(-1) + n
        return (num / den).mean(dim=1)


class SGFormerNet(nn.Module):
    def __init__(self, config: Config, in_dim: int, out_dim: int) -> None:
        super().__init__()
        hidden = int(config["hidden"])
        self.dropout = float(config["dropout"])
        self.alpha = float(config["alpha"])
        self.use_norm = bool(config["use_norm"])
        self.residual = bool(config["residual"])
        self.graph_weight = float(config["graph_weight"])
        # global branch
        self.t_in = nn.Linear(in_dim, hidden)
        self.t_attn = nn.ModuleList(
            SGFormerAttention(hidden, int(config["heads"])) for _ in range(int(config["trans_layers"]))
        )
        self.t_norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(int(config["trans_layers"]) + 1))
        # graph branch
        self.g_in = nn.Linear(in_dim, hidden)
        self.g_convs = nn.ModuleList(
            GCNConv(hidden, hidden, cached=True, add_self_loops=False) for _ in range(int(config["gnn_layers"]))
        )
        self.g_norms = nn.ModuleList(nn.BatchNorm1d(hidden) for _ in range(int(config["gnn_layers"]) + 1))
        self.fc = nn.Linear(hidden, out_dim)

    def _global(self, x: Tensor) -> Tensor:
        x = self.t_in(x)
        if self.use_norm:
            x = self.t_norms[0](x)
        x = F.dropout(F.relu(x), self.dropout, self.training)
        prev = x
        for i, attn in enumerate(self.t_attn):
            x = attn(x)
            if self.residual:
                x = self.alpha * x + (1 - self.alpha) * prev
            if self.use_norm:
                x = self.t_norms[i + 1](x)
            x = F.dropout(x, self.dropout, self.training)
            prev = x
        return x

    def _local(self, x: Tensor, edge_index: Tensor) -> Tensor:
        x = self.g_in(x)
        if self.use_norm:
            x = self.g_norms[0](x)
        x = F.dropout(F.relu(x), self.dropout, self.training)
        for i, conv in enumerate(self.g_convs):
            z = conv(x, edge_index)
            if self.use_norm:
                z = self.g_norms[i + 1](z)
            z = F.dropout(F.relu(z), self.dropout, self.training)
            x = z + x if self.residual else z
        return x

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        out = (1 - self.graph_weight) * self._global(x)
        if self.graph_weight > 0:
            out = out + self.graph_weight * self._local(x, edge_index)
        return self.fc(out)


# ---- NAGphormer -------------------------------------------------------------------


class NAGphormerNet(nn.Module):
    """Transformer over each node's hop tokens, then attention-based readout of the neighbourhood tokens."""

    def __init__(self, config: Config, in_dim: int, out_dim: int) -> None:
        super().__init__()
        hidden, heads = int(config["hidden"]), int(config["heads"])
        self.embed = nn.Linear(in_dim, hidden)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(
                hidden,
                heads,
                dim_feedforward=2 * hidden,
                dropout=float(config["dropout"]),
                activation="gelu",
                batch_first=True,
                norm_first=True,
            )
            for _ in range(int(config["num_layers"]))
        )
        for layer in self.layers:  # the attention weights get their own dropout rate
            cast(nn.TransformerEncoderLayer, layer).self_attn.dropout = float(config["attn_dropout"])
        self.final_ln = nn.LayerNorm(hidden)
        self.readout = nn.Linear(2 * hidden, 1)
        self.head = nn.Sequential(nn.Linear(hidden, hidden // 2), nn.ReLU(), nn.Linear(hidden // 2, out_dim))

    def forward(self, tokens: Tensor) -> Tensor:
        h = self.embed(tokens)
        for layer in self.layers:
            h = layer(h)
        h = self.final_ln(h)
        node, neigh = h[:, :1, :], h[:, 1:, :]
        score = self.readout(torch.cat([node.expand_as(neigh), neigh], dim=-1))
        weights = torch.softmax(score, dim=1)
        return self.head(node.squeeze(1) + (neigh * weights).sum(1))


# ---- GraphGPS ---------------------------------------------------------------------


class GraphGPSNet(nn.Module):
    def __init__(self, config: Config, in_dim: int, out_dim: int) -> None:
        super().__init__()
        hidden = int(config["hidden"])
        self.lin_in = nn.Linear(in_dim, hidden)
        self.input_dropout = float(config["input_dropout"])
        self.layers = nn.ModuleList()
        for _ in range(int(config["num_layers"])):
            if config["local_conv"] == "gin":
                local = GINConv(nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden)))
            else:
                local = GCNConv(hidden, hidden, cached=True, add_self_loops=False)
            attn_kwargs = {"dropout": float(config["attn_dropout"])} if config["attn_type"] == "multihead" else {}
            self.layers.append(
                GPSConv(
                    hidden,
                    local,
                    heads=int(config["heads"]),
                    dropout=float(config["dropout"]),
                    norm=str(config["norm"]),
                    attn_type=str(config["attn_type"]),
                    attn_kwargs=attn_kwargs,
                )
            )
        self.lin_out = nn.Linear(hidden, out_dim)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        h = self.lin_in(feature_dropout(x, self.input_dropout, self.training))
        for layer in self.layers:
            h = layer(h, edge_index)
        return self.lin_out(h)
