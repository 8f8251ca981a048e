"""The four graph Transformers, full-batch: Polynormer, SGFormer, NAGphormer, GraphGPS.

Global attention must scale to the benchmark's largest graphs. Polynormer and
SGFormer use the linear-time attentions their papers publish (written here for
one whole graph: no dense batching, no N x N matrix). NAGphormer attends over
each node's hop tokens only (sequence length hops+1). GraphGPS uses PyG's
``GPSConv`` with either full softmax attention (quadratic: refused with a
``ResourceError`` and an estimate when it cannot fit) or Performer attention.

Every method checks its activation-memory estimate against the memory the
device has free before building anything, so that a configuration that cannot
fit fails as a clear resource error instead of an out-of-memory crash.
"""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GATConv, GCNConv, GINConv, GPSConv

from contract.wire import GraphBundle
from methods.sdk import (
    FLOAT_BYTES,
    TRAIN_SPACE,
    ChoiceParam,
    Config,
    FloatParam,
    IntParam,
    TorchNodeClassifier,
    edge_message_bytes,
    require_memory,
)
from methods.sdk.graph_ops import (
    WeightedPropagation,
    edges_without_self_loops,
    laplacian_eigenvectors,
    sym_norm_weights,
)
from methods.sdk.method import graph_tensors

VERSION = "2026-11-29"


class _MemoryChecked(TorchNodeClassifier):
    """Estimates activation memory as N x (floats per node) and refuses what cannot fit."""

    def floats_per_node(self, graph: GraphBundle, config: Config) -> float:
        raise NotImplementedError

    def extra_bytes(self, graph: GraphBundle, config: Config) -> float:
        return 0.0

    def memory_estimate(self, graph: GraphBundle, config: Config) -> float:
        return graph.num_nodes * self.floats_per_node(graph, config) * FLOAT_BYTES + self.extra_bytes(graph, config)

    def check_resources(self, graph: GraphBundle, config: Config, device: torch.device) -> None:
        require_memory(self.name, self.memory_estimate(graph, config), device, f"a graph of {graph.num_nodes} nodes")


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
        x = F.dropout(x, self.in_dropout, self.training)
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


class Polynormer(_MemoryChecked):
    name = "polynormer"
    version = VERSION
    description = "Polynormer (Deng et al., ICLR 2024): polynomial-expressive local and linear global attention."
    # PyG / paper defaults: 7 local and 2 global layers, beta 0.9, dropouts 0.15 / 0.5 / 0.5, local warm-up.
    default_config = {
        "lr": 0.001,
        "weight_decay": 5e-4,
        "optimizer": "adam",
        "max_epochs": 1000,
        "patience": 100,
        "hidden": 64,
        "heads": 1,
        "local_layers": 7,
        "global_layers": 2,
        "beta": 0.9,
        "input_dropout": 0.15,
        "dropout": 0.5,
        "global_dropout": 0.5,
        "local_conv": "gcn",
        "qk_shared": True,
        "local_epochs": 100,
    }
    search_space = TRAIN_SPACE + (
        ChoiceParam("hidden", (32, 64, 128, 256, 512)),
        ChoiceParam("heads", (1, 2, 4, 8)),
        IntParam("local_layers", 1, 10),
        IntParam("global_layers", 0, 4),
        FloatParam("beta", 0.0, 1.0),
        FloatParam("input_dropout", 0.0, 0.5),
        FloatParam("dropout", 0.0, 0.8),
        FloatParam("global_dropout", 0.0, 0.8),
        ChoiceParam("local_conv", ("gcn", "gat")),
        ChoiceParam("qk_shared", (True, False)),
        IntParam("local_epochs", 0, 300),
    )

    def floats_per_node(self, graph: GraphBundle, config: Config) -> float:
        hidden = int(config["hidden"])
        return int(config["local_layers"]) * 12 * hidden + int(config["global_layers"]) * 14 * hidden

    def extra_bytes(self, graph: GraphBundle, config: Config) -> float:
        """GAT local layers keep every edge's full-width message for the backward; GCN ones do not."""
        if config["local_conv"] != "gat":
            return 0.0
        return edge_message_bytes(graph, int(config["hidden"]), int(config["local_layers"]), int(config["heads"]))

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        return PolynormerNet(config, in_dim, out_dim)


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


class SGFormer(_MemoryChecked):
    name = "sgformer"
    version = VERSION
    description = "SGFormer (Wu et al., NeurIPS 2023): one-layer simple linear global attention plus a GCN branch."
    # Official defaults for medium graphs: 64 hidden, 1 attention layer, 1 head, alpha 0.5,
    # graph weight 0.8, 2 GCN layers, normalization and residuals on.
    default_config = {
        "lr": 0.01,
        "weight_decay": 5e-4,
        "optimizer": "adam",
        "max_epochs": 500,
        "patience": 100,
        "hidden": 64,
        "heads": 1,
        "trans_layers": 1,
        "gnn_layers": 2,
        "alpha": 0.5,
        "graph_weight": 0.8,
        "dropout": 0.5,
        "use_norm": True,
        "residual": True,
    }
    search_space = TRAIN_SPACE + (
        ChoiceParam("hidden", (32, 64, 128, 256, 512)),
        ChoiceParam("heads", (1, 2, 4)),
        IntParam("trans_layers", 1, 3),
        IntParam("gnn_layers", 0, 4),
        FloatParam("alpha", 0.0, 1.0),
        FloatParam("graph_weight", 0.0, 0.95),
        FloatParam("dropout", 0.0, 0.8),
        ChoiceParam("use_norm", (True, False)),
        ChoiceParam("residual", (True, False)),
    )

    def floats_per_node(self, graph: GraphBundle, config: Config) -> float:
        hidden, heads = int(config["hidden"]), int(config["heads"])
        return 6 * hidden + int(config["trans_layers"]) * 14 * hidden * heads + int(config["gnn_layers"]) * 8 * hidden

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        return SGFormerNet(config, in_dim, out_dim)


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


class NAGphormer(_MemoryChecked):
    name = "nagphormer"
    version = VERSION
    description = "NAGphormer (Chen et al., ICLR 2023): hop tokens per node (Hop2Token), Transformer, hop readout."
    # Paper defaults: 7 hops, 15-dim Laplacian PE, 512 hidden, 8 heads, 1 layer, dropout 0.1, lr 0.005, wd 1e-5.
    default_config = {
        "lr": 0.005,
        "weight_decay": 1e-5,
        "optimizer": "adamw",
        "max_epochs": 1000,
        "patience": 50,
        "hidden": 512,
        "heads": 8,
        "num_layers": 1,
        "hops": 7,
        "pe_dim": 15,
        "dropout": 0.1,
        "attn_dropout": 0.1,
    }
    search_space = TRAIN_SPACE + (
        ChoiceParam("hidden", (64, 128, 256, 512)),
        ChoiceParam("heads", (1, 2, 4, 8)),
        IntParam("num_layers", 1, 4),
        IntParam("hops", 1, 10),
        ChoiceParam("pe_dim", (0, 3, 8, 15)),
        FloatParam("dropout", 0.0, 0.6),
        FloatParam("attn_dropout", 0.0, 0.6),
    )

    def floats_per_node(self, graph: GraphBundle, config: Config) -> float:
        tokens = int(config["hops"]) + 1
        hidden, heads = int(config["hidden"]), int(config["heads"])
        features = graph.features.shape[1] + int(config["pe_dim"])
        inputs = tokens * features * 2  # the cached tokens and their embedding's input gradient workspace
        per_layer = tokens * hidden * 14 + heads * tokens * tokens * 3
        return inputs + tokens * hidden * 4 + int(config["num_layers"]) * per_layer

    def model_inputs(self, graph: GraphBundle, config: Config, device: torch.device) -> tuple[Any, ...]:
        hops, pe_dim = int(config["hops"]), int(config["pe_dim"])
        key = ("nagphormer_tokens", hops, pe_dim, str(device))
        if key not in graph.cache:
            data = graph_tensors(graph, device)
            x = data.x
            if pe_dim > 0:
                x = torch.cat([x, torch.from_numpy(laplacian_eigenvectors(graph, pe_dim)).to(device)], dim=1)
            prop, weights = WeightedPropagation(), sym_norm_weights(graph, device)
            tokens = torch.empty((x.shape[0], hops + 1, x.shape[1]), dtype=x.dtype, device=device)
            tokens[:, 0] = x
            with torch.no_grad():
                for k in range(1, hops + 1):
                    x = prop(x, data.edge_index, weights)
                    tokens[:, k] = x
            graph.cache[key] = tokens
        return (graph.cache[key],)

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        return NAGphormerNet(config, in_dim + int(config["pe_dim"]), out_dim)


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
        h = self.lin_in(F.dropout(x, self.input_dropout, self.training))
        for layer in self.layers:
            h = layer(h, edge_index)
        return self.lin_out(h)


class GraphGPS(_MemoryChecked):
    name = "graphgps"
    version = VERSION
    description = (
        "GraphGPS (Rampášek et al., NeurIPS 2022): local message passing plus global attention per layer "
        "(Performer by default for whole-graph node classification; full softmax attention is quadratic in N)."
    )
    default_config = {
        "lr": 0.001,
        "weight_decay": 1e-5,
        "optimizer": "adamw",
        "max_epochs": 500,
        "patience": 50,
        "hidden": 64,
        "num_layers": 3,
        "heads": 4,
        "dropout": 0.2,
        "attn_dropout": 0.5,
        "input_dropout": 0.0,
        "local_conv": "gcn",
        "attn_type": "performer",
        "norm": "batch_norm",
    }
    search_space = TRAIN_SPACE + (
        ChoiceParam("hidden", (32, 64, 128, 256)),
        IntParam("num_layers", 1, 6),
        ChoiceParam("heads", (1, 2, 4, 8)),
        FloatParam("dropout", 0.0, 0.6),
        FloatParam("attn_dropout", 0.0, 0.6),
        FloatParam("input_dropout", 0.0, 0.5),
        ChoiceParam("local_conv", ("gcn", "gin")),
        ChoiceParam("attn_type", ("performer", "multihead")),
        ChoiceParam("norm", ("batch_norm", "layer_norm")),
    )

    def floats_per_node(self, graph: GraphBundle, config: Config) -> float:
        hidden = int(config["hidden"])
        return 4 * hidden + int(config["num_layers"]) * 30 * hidden

    def extra_bytes(self, graph: GraphBundle, config: Config) -> float:
        if config["attn_type"] != "multihead":
            return 0.0
        n = graph.num_nodes
        # attention scores, their softmax and dropout mask, and the gradient of each, per head and layer
        return float(int(config["num_layers"]) * int(config["heads"]) * n * n * FLOAT_BYTES * 4)

    def check_resources(self, graph: GraphBundle, config: Config, device: torch.device) -> None:
        what = f"{config['attn_type']} attention over {graph.num_nodes} nodes"
        require_memory(self.name, self.memory_estimate(graph, config), device, what)

    def model_inputs(self, graph: GraphBundle, config: Config, device: torch.device) -> tuple[Any, ...]:
        data = graph_tensors(graph, device)
        return (data.x, data.edge_index if config["local_conv"] == "gcn" else edges_without_self_loops(graph, device))

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        return GraphGPSNet(config, in_dim, out_dim)
