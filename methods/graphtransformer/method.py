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

from typing import Any

import torch
from torch import nn

from contract.wire import GraphBundle
from methods.graphtransformer.model import GraphGPSNet, NAGphormerNet, PolynormerNet, SGFormerNet
from methods.sdk import (
    TRAIN_SPACE,
    ChoiceParam,
    Config,
    FloatParam,
    IntParam,
    TorchNodeClassifier,
    WeightedPropagation,
    edges_without_self_loops,
    graph_tensors,
    laplacian_eigenvectors,
    require_declared_memory,
    sym_norm_weights,
)

VERSION = "2026-12-07"  # the SDK's fast dropout, feature dropout of nonzeros, fused Adam; NAGphormer trains on its rows


class _MemoryChecked(TorchNodeClassifier):
    """Refuses what cannot fit before building anything: the bytes its manifest's ``check`` declares."""

    def memory_what(self, graph: GraphBundle, config: Config) -> str:
        return f"a graph of {graph.num_nodes} nodes"

    def check_resources(self, graph: GraphBundle, config: Config, device: torch.device) -> None:
        require_declared_memory(self, graph, config, device, self.memory_what(graph, config))


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

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        return PolynormerNet(config, in_dim, out_dim)


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

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        return SGFormerNet(config, in_dim, out_dim)


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

    def row_inputs(self, inputs: tuple[Any, ...], nodes: torch.Tensor) -> tuple[Any, ...]:
        return (inputs[0][nodes],)

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        return NAGphormerNet(config, in_dim + int(config["pe_dim"]), out_dim)


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

    def memory_what(self, graph: GraphBundle, config: Config) -> str:
        return f"{config['attn_type']} attention over {graph.num_nodes} nodes"

    def model_inputs(self, graph: GraphBundle, config: Config, device: torch.device) -> tuple[Any, ...]:
        data = graph_tensors(graph, device)
        return (data.x, data.edge_index if config["local_conv"] == "gcn" else edges_without_self_loops(graph, device))

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        return GraphGPSNet(config, in_dim, out_dim)
