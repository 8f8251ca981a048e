"""MLP and the ten message-passing GNNs, full-batch, with the options that make classic GNNs strong.

Most methods share one layer stack (``LayerStack``, in ``model.py``). Following Luo et al.
(NeurIPS 2024, "Classic GNNs are strong baselines") every hidden layer is

    h <- dropout(act(norm(layer(h) [+ skip(h)])))

with ``skip`` the identity when shapes agree and a linear map otherwise. The
readout is chosen by ``jk``:

- ``none``: the last layer maps straight to the classes (the classic form of
  Kipf & Welling and Veličković et al.);
- ``last``: every layer is hidden-sized and a linear head reads the last one;
- ``sum`` / ``cat`` / ``max``: jumping knowledge over all layers, then a
  linear head (Xu et al., ICML 2018).

APPNP, GCNII, GPRGNN and FAGCN have their own architectures (a feature
transform and a propagation scheme) and keep the knobs of their papers.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn
from torch_geometric.nn import GATConv, GATv2Conv, GCNConv, JumpingKnowledge

from contract.wire import GraphBundle
from methods.gnn.model import (
    APPNPNet,
    FAGCNNet,
    GCNIINet,
    GPRGNNNet,
    LayerFactory,
    LayerStack,
    MapFirstGIN,
    MapFirstSAGE,
)
from methods.sdk import (
    TRAIN_SPACE,
    ChoiceParam,
    Config,
    FloatParam,
    IntParam,
    TorchNodeClassifier,
    edges_without_self_loops,
    graph_tensors,
    require_declared_memory,
    sym_norm_weights,
)

VERSION = "2026-12-07"  # the SDK's fast dropout, feature dropout of nonzeros, fused Adam; MLP trains on its rows
# SAGE and GIN layers map before they aggregate where they narrow (model.MapFirstSAGE, MapFirstGIN)
MAP_FIRST_VERSION = "2026-12-07b"

# ---- shared configuration ----------------------------------------------------

TRAIN_DEFAULTS: Config = {
    "lr": 0.01,
    "weight_decay": 5e-4,
    "optimizer": "adam",
    "max_epochs": 500,
    "patience": 50,
}

# The stack's knobs; the defaults are the classic two-layer form.
STACK_DEFAULTS: Config = {
    **TRAIN_DEFAULTS,
    "hidden": 64,
    "num_layers": 2,
    "dropout": 0.5,
    "input_dropout": 0.0,
    "norm": "none",
    "residual": False,
    "jk": "none",
    "activation": "relu",
}

STACK_SPACE = TRAIN_SPACE + (
    ChoiceParam("hidden", (16, 32, 64, 128, 256, 512)),
    IntParam("num_layers", 1, 6),
    FloatParam("dropout", 0.0, 0.8),
    FloatParam("input_dropout", 0.0, 0.5),
    ChoiceParam("norm", ("none", "batch", "layer")),
    ChoiceParam("residual", (False, True)),
    ChoiceParam("jk", ("none", "last", "sum", "cat", "max")),
    ChoiceParam("activation", ("relu", "gelu", "elu")),
)


def _stack_space(*extra: Any) -> tuple:
    """STACK_SPACE with ``extra`` params added, or replacing the stack's param of the same name."""
    replaced = {p.name: p for p in extra}
    return tuple(replaced.pop(p.name, p) for p in STACK_SPACE) + tuple(replaced.values())


class StackMethod(TorchNodeClassifier):
    """A method whose network is a ``LayerStack`` of one operator."""

    uses_graph = True
    self_loops = True  # False: the operator aggregates over neighbours without the node itself

    def make_layer(self, config: Config) -> LayerFactory:
        raise NotImplementedError

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        return LayerStack(config, in_dim, out_dim, self.make_layer(config), uses_graph=self.uses_graph)

    def model_inputs(self, graph: GraphBundle, config: Config, device: torch.device) -> tuple[Any, ...]:
        data = graph_tensors(graph, device)
        return (data.x, data.edge_index if self.self_loops else edges_without_self_loops(graph, device))


# ---- MLP and the stack GNNs --------------------------------------------------


class MLP(StackMethod):
    name = "mlp"
    version = VERSION
    description = "Multi-layer perceptron on node features only (no graph)."
    default_config = dict(STACK_DEFAULTS)
    search_space = STACK_SPACE
    uses_graph = False

    def make_layer(self, config: Config) -> LayerFactory:
        return lambda a, b, last: nn.Linear(a, b)

    def row_inputs(self, inputs: tuple[Any, ...], nodes: torch.Tensor) -> tuple[Any, ...]:
        return (inputs[0][nodes], inputs[1])


class GCN(StackMethod):
    name = "gcn"
    version = VERSION
    description = "Graph convolutional network (Kipf & Welling, ICLR 2017) with residual/normalization/JK options."
    default_config = dict(STACK_DEFAULTS)
    search_space = STACK_SPACE

    def make_layer(self, config: Config) -> LayerFactory:
        # The canonical graph already has one self-loop per node; the normalization is cached per fit.
        return lambda a, b, last: GCNConv(a, b, cached=True, add_self_loops=False)


class GraphSAGE(StackMethod):
    name = "graphsage"
    version = MAP_FIRST_VERSION
    description = "GraphSAGE (Hamilton et al., NeurIPS 2017), full-batch, separate root weight."
    default_config = {**STACK_DEFAULTS, "aggr": "mean"}
    search_space = _stack_space(ChoiceParam("aggr", ("mean", "max", "sum")))
    self_loops = False

    def make_layer(self, config: Config) -> LayerFactory:
        aggr = str(config["aggr"])
        return lambda a, b, last: MapFirstSAGE(a, b, aggr=aggr)


class _AttentionStack(StackMethod):
    """GAT-style: ``hidden`` is the concatenated width, split over ``heads``.

    The output layer averages ``out_heads``.
    """

    conv_cls: type = GATConv
    default_config = {
        **STACK_DEFAULTS,
        "hidden": 64,
        "heads": 8,
        "out_heads": 1,
        "dropout": 0.6,
        "input_dropout": 0.6,
        "attn_dropout": 0.6,
        "lr": 0.005,
        "activation": "elu",
    }
    search_space = _stack_space(
        FloatParam("input_dropout", 0.0, 0.8),
        ChoiceParam("heads", (1, 2, 4, 8)),
        ChoiceParam("out_heads", (1, 2, 4, 8)),
        FloatParam("attn_dropout", 0.0, 0.8),
    )

    def make_layer(self, config: Config) -> LayerFactory:
        heads, out_heads, attn = int(config["heads"]), int(config["out_heads"]), float(config["attn_dropout"])
        cls = self.conv_cls

        def make(a: int, b: int, last: bool) -> nn.Module:
            if last:
                return cls(a, b, heads=out_heads, concat=False, dropout=attn, add_self_loops=False)
            return cls(a, b // heads, heads=heads, concat=True, dropout=attn, add_self_loops=False)

        return make

    def check_resources(self, graph: GraphBundle, config: Config, device: torch.device) -> None:
        """Attention keeps a message of the full width on every edge of every layer: refuse what cannot fit (the
        bytes per arc each variant keeps are its manifest's ``check``).

        tolokers' 1M edges at 512 wide and 6 GATv2 layers would need about 50 GB.
        """
        width, layers = int(config["hidden"]), int(config["num_layers"])
        what = f"{layers} attention layers of {width} over {graph.edge_index.shape[1]} edges"
        require_declared_memory(self, graph, config, device, what)


class GAT(_AttentionStack):
    name = "gat"
    version = VERSION
    description = "Graph attention network (Veličković et al., ICLR 2018)."
    conv_cls = GATConv


class GATv2(_AttentionStack):
    name = "gatv2"
    version = VERSION
    description = "GATv2, dynamic attention (Brody et al., ICLR 2022)."
    conv_cls = GATv2Conv


class GIN(StackMethod):
    name = "gin"
    version = MAP_FIRST_VERSION
    description = "Graph isomorphism network (Xu et al., ICLR 2019): sum aggregation and a 2-layer MLP per layer."
    default_config = {**STACK_DEFAULTS, "jk": "last", "train_eps": False}
    search_space = _stack_space(ChoiceParam("train_eps", (False, True)))
    self_loops = False

    def make_layer(self, config: Config) -> LayerFactory:
        train_eps = bool(config["train_eps"])

        def make(a: int, b: int, last: bool) -> nn.Module:
            mid = max(b, 16) if last else b
            return MapFirstGIN(nn.Sequential(nn.Linear(a, mid), nn.ReLU(), nn.Linear(mid, b)), train_eps=train_eps)

        return make


class JKNet(StackMethod):
    name = "jknet"
    version = "2026-12-07c"  # b: the readout runs on the rows the loss and validation read; c: SAGE layers map first
    description = "Jumping knowledge network (Xu et al., ICML 2018): GCN or SAGE layers, concat/max/LSTM readout."
    default_config = {**STACK_DEFAULTS, "num_layers": 4, "jk": "cat", "conv": "gcn"}
    search_space = TRAIN_SPACE + (
        ChoiceParam("hidden", (32, 64, 128, 256, 512)),
        IntParam("num_layers", 2, 8),
        FloatParam("dropout", 0.0, 0.8),
        FloatParam("input_dropout", 0.0, 0.5),
        ChoiceParam("norm", ("none", "batch", "layer")),
        ChoiceParam("residual", (False, True)),
        ChoiceParam("jk", ("cat", "max", "lstm")),
        ChoiceParam("activation", ("relu", "gelu", "elu")),
        ChoiceParam("conv", ("gcn", "sage")),
    )

    readout_rows = True

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        if config["jk"] != "lstm":
            return super().build_model(config, in_dim, out_dim)
        stack = LayerStack({**config, "jk": "max"}, in_dim, out_dim, self.make_layer(config), uses_graph=True)
        hidden, layers = int(config["hidden"]), int(config["num_layers"])
        stack.jk_mode = "lstm"
        stack.jk = JumpingKnowledge("lstm", channels=hidden, num_layers=layers)
        return stack

    def check_resources(self, graph: GraphBundle, config: Config, device: torch.device) -> None:
        """The LSTM readout is the one part that outgrows the graph: refuse it before it is built.

        PyG's readout runs a bidirectional LSTM of ``layers * hidden / 2`` units over
        each node's ``layers`` outputs, so its training memory grows as
        nodes x layers^2 x hidden. Autograd keeps about 32 floats per node, step and
        unit (measured: 11.3 GB at 7,600 nodes, 7 layers, 512 wide; 3.3 GB at 5
        layers, 256 wide): the manifest's ``check`` declares it.
        """
        if config["jk"] != "lstm":
            return
        hidden, layers = int(config["hidden"]), int(config["num_layers"])
        what = f"an LSTM readout over {layers} layers of {hidden} on {graph.num_nodes} nodes"
        require_declared_memory(self, graph, config, device, what)

    def make_layer(self, config: Config) -> LayerFactory:
        if config["conv"] == "sage":
            return lambda a, b, last: MapFirstSAGE(a, b)
        return lambda a, b, last: GCNConv(a, b, cached=True, add_self_loops=False)

    def model_inputs(self, graph: GraphBundle, config: Config, device: torch.device) -> tuple[Any, ...]:
        data = graph_tensors(graph, device)
        return (data.x, data.edge_index if config["conv"] == "gcn" else edges_without_self_loops(graph, device))


# ---- methods with their own propagation ----------------------------------------


class APPNP(TorchNodeClassifier):
    name = "appnp"
    version = VERSION
    description = "Predict then propagate (Gasteiger et al., ICLR 2019): an MLP, then K steps of personalized PageRank."
    default_config = {
        **TRAIN_DEFAULTS,
        "hidden": 64,
        "num_layers": 2,
        "dropout": 0.5,
        "input_dropout": 0.5,
        "norm": "none",
        "K": 10,
        "alpha": 0.1,
        "edge_dropout": 0.0,
    }
    search_space = TRAIN_SPACE + (
        ChoiceParam("hidden", (32, 64, 128, 256, 512)),
        IntParam("num_layers", 1, 4),
        FloatParam("dropout", 0.0, 0.8),
        FloatParam("input_dropout", 0.0, 0.8),
        ChoiceParam("norm", ("none", "batch", "layer")),
        IntParam("K", 1, 20),
        FloatParam("alpha", 0.05, 0.5),
        FloatParam("edge_dropout", 0.0, 0.5),
    )

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        return APPNPNet(config, in_dim, out_dim)


class GCNII(TorchNodeClassifier):
    name = "gcnii"
    version = VERSION
    description = "GCNII (Chen et al., ICML 2020): initial residual and identity mapping, deep."
    # Paper, Cora: 64 layers, 64 hidden, alpha 0.1, lambda (theta) 0.5, dropout 0.6, lr 0.01,
    # weight decay 0.01 on the convolutions and 5e-4 on the dense layers, patience 100.
    default_config = {
        **TRAIN_DEFAULTS,
        "hidden": 64,
        "num_layers": 64,
        "alpha": 0.1,
        "theta": 0.5,
        "dropout": 0.6,
        "norm": "none",
        "weight_decay": 5e-4,
        "conv_weight_decay": 0.01,
        "max_epochs": 1500,
        "patience": 100,
    }
    search_space = TRAIN_SPACE + (
        ChoiceParam("hidden", (32, 64, 128, 256, 512)),
        ChoiceParam("num_layers", (2, 4, 8, 16, 32, 64)),
        FloatParam("alpha", 0.05, 0.5),
        FloatParam("theta", 0.1, 1.5),
        FloatParam("dropout", 0.0, 0.8),
        ChoiceParam("norm", ("none", "batch", "layer")),
        FloatParam("conv_weight_decay", 1e-7, 5e-2, log=True),
    )

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        return GCNIINet(config, in_dim, out_dim)

    def check_resources(self, graph: GraphBundle, config: Config, device: torch.device) -> None:
        """Depth is what outgrows the memory: every layer keeps several nodes x hidden tensors for the backward.

        Measured as peak RSS over two epochs on 20k-node graphs (120k and 460k
        edges, 4 and 16 layers, 64 and 128 wide): about 11 floats per node, unit
        of width and layer (13 with a batch or layer norm), independent of the
        edge count, plus the transient edge messages of one layer (about three
        floats per edge and unit). The paper's 64 layers of 64 on a 20k-node graph
        need ~3.8 GiB: refused under a 4 GiB limit instead of OOM-killed. The manifest's ``check`` declares it.
        """
        hidden, layers = int(config["hidden"]), int(config["num_layers"])
        what = f"{layers} GCNII layers of {hidden} on {graph.num_nodes} nodes"
        require_declared_memory(self, graph, config, device, what)

    def param_groups(self, model: nn.Module, config: Config) -> list[dict[str, Any]]:
        convs = [p for p in cast(nn.Module, model.convs).parameters()]
        others = [p for n, p in model.named_parameters() if not n.startswith("convs.")]
        return [{"params": convs, "weight_decay": float(config["conv_weight_decay"])}, {"params": others}]


class GPRGNN(TorchNodeClassifier):
    name = "gprgnn"
    version = VERSION
    description = "GPR-GNN (Chien et al., ICLR 2021): an MLP, then learnable generalized-PageRank propagation."
    # Paper defaults: 2-layer MLP, 64 hidden, K=10, PPR init with alpha 0.1, dprate 0.5, dropout 0.5;
    # the propagation weights get no weight decay.
    default_config = {
        **TRAIN_DEFAULTS,
        "lr": 0.002,
        "hidden": 64,
        "num_layers": 2,
        "dropout": 0.5,
        "norm": "none",
        "K": 10,
        "alpha": 0.1,
        "init": "ppr",
        "dprate": 0.5,
        "max_epochs": 1000,
        "patience": 200,
    }
    search_space = TRAIN_SPACE + (
        ChoiceParam("hidden", (32, 64, 128, 256, 512)),
        IntParam("num_layers", 1, 4),
        FloatParam("dropout", 0.0, 0.8),
        ChoiceParam("norm", ("none", "batch", "layer")),
        IntParam("K", 1, 20),
        FloatParam("alpha", 0.0, 0.9),
        ChoiceParam("init", ("ppr", "sgc")),
        FloatParam("dprate", 0.0, 0.8),
    )

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        return GPRGNNNet(config, in_dim, out_dim)

    def model_inputs(self, graph: GraphBundle, config: Config, device: torch.device) -> tuple[Any, ...]:
        data = graph_tensors(graph, device)
        return (data.x, data.edge_index, sym_norm_weights(graph, device))

    def param_groups(self, model: nn.Module, config: Config) -> list[dict[str, Any]]:
        return [
            {"params": list(cast(nn.Module, model.encoder).parameters())},
            {"params": list(cast(nn.Module, model.prop).parameters()), "weight_decay": 0.0},
        ]


class FAGCN(TorchNodeClassifier):
    name = "fagcn"
    version = VERSION
    description = "FAGCN (Bo et al., AAAI 2021): frequency-adaptive signed attention with a residual to the input."
    # Paper, Cora: eps 0.3, 4 layers, 64 hidden, dropout 0.6, lr 0.01, weight decay 1e-3.
    default_config = {
        **TRAIN_DEFAULTS,
        "hidden": 64,
        "num_layers": 4,
        "eps": 0.3,
        "dropout": 0.6,
        "attn_dropout": 0.6,
        "norm": "none",
        "weight_decay": 1e-3,
        "patience": 100,
    }
    search_space = TRAIN_SPACE + (
        ChoiceParam("hidden", (32, 64, 128, 256, 512)),
        IntParam("num_layers", 1, 8),
        FloatParam("eps", 0.0, 1.0),
        FloatParam("dropout", 0.0, 0.8),
        FloatParam("attn_dropout", 0.0, 0.8),
        ChoiceParam("norm", ("none", "batch", "layer")),
    )

    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        return FAGCNNet(config, in_dim, out_dim)

    def check_resources(self, graph: GraphBundle, config: Config, device: torch.device) -> None:
        """Refuse what cannot fit: each layer's signed gate weights every edge's full-width message.

        Autograd keeps those messages for the backward (the manifest's ``check``).
        """
        hidden, layers = int(config["hidden"]), int(config["num_layers"])
        what = f"{layers} FAGCN layers of {hidden} over {graph.edge_index.shape[1]} edges"
        require_declared_memory(self, graph, config, device, what)
