"""MLP and GCN: full-batch, with the options that make classic GNNs strong.

Residual connections, normalization and dropout follow Luo et al. (NeurIPS 2024,
"Classic GNNs are strong baselines"): each hidden layer is
``h <- dropout(act(norm(layer(h) [+ h])))``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.nn import GCNConv

from methods.sdk import ChoiceParam, Config, FloatParam, IntParam, TorchNodeClassifier

VERSION = "2026-11-29"

# Shared by MLP and GCN: the training knobs and the strong-baseline options.
COMMON_DEFAULTS: Config = {
    "hidden": 64,
    "num_layers": 2,
    "dropout": 0.5,
    "input_dropout": 0.0,
    "lr": 0.01,
    "weight_decay": 5e-4,
    "norm": "none",
    "residual": False,
    "optimizer": "adam",
    "max_epochs": 500,
    "patience": 50,
}

COMMON_SPACE = (
    FloatParam("lr", 1e-4, 5e-2, log=True),
    FloatParam("weight_decay", 1e-7, 1e-2, log=True),
    ChoiceParam("hidden", (32, 64, 128, 256, 512)),
    IntParam("num_layers", 1, 4),
    FloatParam("dropout", 0.0, 0.8),
    FloatParam("input_dropout", 0.0, 0.5),
    ChoiceParam("norm", ("none", "batch", "layer")),
    ChoiceParam("residual", (False, True)),
    ChoiceParam("optimizer", ("adam", "adamw")),
    IntParam("patience", 20, 300),
)


def _norm(kind: str, dim: int) -> nn.Module:
    if kind == "batch":
        return nn.BatchNorm1d(dim)
    if kind == "layer":
        return nn.LayerNorm(dim)
    return nn.Identity()


class LayerStack(nn.Module):
    """``num_layers`` layers from ``make_layer(in, out)``; hidden ones get norm/act/dropout/residual."""

    def __init__(self, config: Config, in_dim: int, out_dim: int, make_layer, uses_graph: bool) -> None:
        super().__init__()
        hidden, layers = int(config["hidden"]), int(config["num_layers"])
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.layers = nn.ModuleList(make_layer(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.norms = nn.ModuleList(_norm(str(config["norm"]), hidden) for _ in range(layers - 1))
        self.dropout = nn.Dropout(float(config["dropout"]))
        self.input_dropout = nn.Dropout(float(config["input_dropout"]))
        self.residual = bool(config["residual"])
        self.uses_graph = uses_graph

    def _run_layer(self, layer: nn.Module, h: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        return layer(h, edge_index) if self.uses_graph else layer(h)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        h = self.input_dropout(x)
        for i, (layer, norm) in enumerate(zip(self.layers[:-1], self.norms)):
            z = self._run_layer(layer, h, edge_index)
            if self.residual and i > 0:
                z = z + h
            h = self.dropout(torch.relu(norm(z)))
        return self._run_layer(self.layers[-1], h, edge_index)


class MLP(TorchNodeClassifier):
    name = "mlp"
    version = VERSION
    description = "Multi-layer perceptron on node features only (no graph)."
    default_config = dict(COMMON_DEFAULTS)
    search_space = COMMON_SPACE

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        return LayerStack(config, in_dim, out_dim, nn.Linear, uses_graph=False)


class GCN(TorchNodeClassifier):
    name = "gcn"
    version = VERSION
    description = "Graph convolutional network (Kipf & Welling, ICLR 2017) with residual/normalization options."
    default_config = dict(COMMON_DEFAULTS)
    search_space = COMMON_SPACE

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        # The canonical graph already has one self-loop per node; the normalization is cached per fit.
        return LayerStack(config, in_dim, out_dim, lambda a, b: GCNConv(a, b, cached=True, add_self_loops=False), uses_graph=True)
