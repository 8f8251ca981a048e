"""MLP and the ten message-passing GNNs, full-batch, with the options that make classic GNNs strong.

Most methods share one layer stack (``LayerStack``). Following Luo et al.
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

from collections.abc import Callable
from itertools import pairwise
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import (
    APPNP as APPNPProp,
)
from torch_geometric.nn import (
    FAConv,
    GATConv,
    GATv2Conv,
    GCN2Conv,
    GCNConv,
    GINConv,
    JumpingKnowledge,
    SAGEConv,
)

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
from methods.sdk.graph_ops import WeightedPropagation, edges_without_self_loops, sym_norm_weights
from methods.sdk.method import graph_tensors

VERSION = "2026-11-29"

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

_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu, "elu": F.elu}


def _norm(kind: str, dim: int) -> nn.Module:
    if kind == "batch":
        return nn.BatchNorm1d(dim)
    if kind == "layer":
        return nn.LayerNorm(dim)
    return nn.Identity()


# A layer factory: (in_dim, out_dim, is_output_layer) -> module called as layer(h, edge_index) or layer(h).
LayerFactory = Callable[[int, int, bool], nn.Module]


class LayerStack(nn.Module):
    """``num_layers`` layers from ``make_layer``, with norm/activation/dropout/residual and a JK readout."""

    def __init__(self, config: Config, in_dim: int, out_dim: int, make_layer: LayerFactory, uses_graph: bool) -> None:
        super().__init__()
        hidden, layers = int(config["hidden"]), int(config["num_layers"])
        self.jk_mode = str(config["jk"])
        classic = self.jk_mode == "none"
        dims = [in_dim] + [hidden] * layers
        if classic:
            dims[-1] = out_dim
        num_hidden = layers - 1 if classic else layers
        self.layers = nn.ModuleList(
            make_layer(a, b, classic and i == layers - 1) for i, (a, b) in enumerate(pairwise(dims))
        )
        self.norms = nn.ModuleList(_norm(str(config["norm"]), hidden) for _ in range(num_hidden))
        self.skips = nn.ModuleList()
        if bool(config["residual"]):
            self.skips.extend(
                nn.Identity() if dims[i] == hidden else nn.Linear(dims[i], hidden, bias=False)
                for i in range(num_hidden)
            )
        self.dropout = nn.Dropout(float(config["dropout"]))
        self.input_dropout = nn.Dropout(float(config["input_dropout"]))
        self.act = _ACTIVATIONS[str(config["activation"])]
        self.uses_graph = uses_graph
        self.num_hidden = num_hidden
        if classic:
            self.jk: JumpingKnowledge | None = None
            self.head: nn.Linear | None = None
        else:
            self.jk = None if self.jk_mode in ("last", "sum") else JumpingKnowledge(self.jk_mode)
            self.head = nn.Linear(hidden * layers if self.jk_mode == "cat" else hidden, out_dim)

    def _run(self, layer: nn.Module, h: Tensor, edge_index: Tensor) -> Tensor:
        return layer(h, edge_index) if self.uses_graph else layer(h)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        h = self.input_dropout(x)
        outs = []
        for i in range(self.num_hidden):
            z = self._run(self.layers[i], h, edge_index)
            if self.skips:
                z = z + self.skips[i](h)
            h = self.dropout(self.act(self.norms[i](z)))
            outs.append(h)
        if self.head is None:
            return self._run(self.layers[-1], h, edge_index)
        if self.jk_mode == "last":
            return self.head(h)
        if self.jk is None:  # "sum"
            return self.head(torch.stack(outs).sum(0))
        return self.head(self.jk(outs))


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
    version = VERSION
    description = "GraphSAGE (Hamilton et al., NeurIPS 2017), full-batch, separate root weight."
    default_config = {**STACK_DEFAULTS, "aggr": "mean"}
    search_space = _stack_space(ChoiceParam("aggr", ("mean", "max", "sum")))
    self_loops = False

    def make_layer(self, config: Config) -> LayerFactory:
        aggr = str(config["aggr"])
        return lambda a, b, last: SAGEConv(a, b, aggr=aggr)


class _AttentionStack(StackMethod):
    """GAT-style: ``hidden`` is the concatenated width, split over ``heads``.

    The output layer averages ``out_heads``.
    """

    conv_cls: type = GATConv
    floats_per_edge_unit = 1.25  # messages autograd keeps per edge, layer and unit of width (measured 1.1)
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
        """Attention keeps a message of the full width on every edge of every layer: refuse what cannot fit.

        tolokers' 1M edges at 512 wide and 6 GATv2 layers would need about 50 GB.
        """
        width, layers = max(int(config["hidden"]), int(config["heads"])), int(config["num_layers"])
        estimate = edge_message_bytes(graph, width, layers, int(config["heads"]), self.floats_per_edge_unit)
        require_memory(
            self.name, estimate, device, f"{layers} attention layers of {width} over {graph.edge_index.shape[1]} edges"
        )


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
    floats_per_edge_unit = 3.25  # it adds both endpoints before its nonlinearity (measured 3.0)


class GIN(StackMethod):
    name = "gin"
    version = VERSION
    description = "Graph isomorphism network (Xu et al., ICLR 2019): sum aggregation and a 2-layer MLP per layer."
    default_config = {**STACK_DEFAULTS, "jk": "last", "train_eps": False}
    search_space = _stack_space(ChoiceParam("train_eps", (False, True)))
    self_loops = False

    def make_layer(self, config: Config) -> LayerFactory:
        train_eps = bool(config["train_eps"])

        def make(a: int, b: int, last: bool) -> nn.Module:
            mid = max(b, 16) if last else b
            return GINConv(nn.Sequential(nn.Linear(a, mid), nn.ReLU(), nn.Linear(mid, b)), train_eps=train_eps)

        return make


class JKNet(StackMethod):
    name = "jknet"
    version = VERSION
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
        layers, 256 wide), which is the estimate checked here.
        """
        if config["jk"] != "lstm":
            return
        hidden, layers = int(config["hidden"]), int(config["num_layers"])
        estimate = 32 * FLOAT_BYTES * graph.num_nodes * layers * (layers * hidden / 2)
        require_memory(
            self.name, estimate, device, f"an LSTM readout over {layers} layers of {hidden} on {graph.num_nodes} nodes"
        )

    def make_layer(self, config: Config) -> LayerFactory:
        if config["conv"] == "sage":
            return lambda a, b, last: SAGEConv(a, b)
        return lambda a, b, last: GCNConv(a, b, cached=True, add_self_loops=False)

    def model_inputs(self, graph: GraphBundle, config: Config, device: torch.device) -> tuple[Any, ...]:
        data = graph_tensors(graph, device)
        return (data.x, data.edge_index if config["conv"] == "gcn" else edges_without_self_loops(graph, device))


# ---- methods with their own propagation ----------------------------------------


class _Encoder(nn.Module):
    """An MLP ``in -> hidden^(layers-1) -> out`` with dropout before every linear layer."""

    def __init__(
        self,
        in_dim: int,
        hidden: int,
        out_dim: int,
        layers: int,
        dropout: float,
        input_dropout: float,
        norm: str = "none",
    ) -> None:
        super().__init__()
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.lins = nn.ModuleList(nn.Linear(a, b) for a, b in pairwise(dims))
        self.norms = nn.ModuleList(_norm(norm, hidden) for _ in range(layers - 1))
        self.dropout, self.input_dropout = dropout, input_dropout

    def forward(self, x: Tensor) -> Tensor:
        h = F.dropout(x, self.input_dropout, self.training)
        for i, lin in enumerate(self.lins):
            if i > 0:
                h = F.dropout(h, self.dropout, self.training)
            h = lin(h)
            if i < len(self.lins) - 1:
                h = F.relu(self.norms[i](h))
        return h


class APPNPNet(nn.Module):
    def __init__(self, config: Config, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.encoder = _Encoder(
            in_dim,
            int(config["hidden"]),
            out_dim,
            int(config["num_layers"]),
            float(config["dropout"]),
            float(config["input_dropout"]),
            str(config["norm"]),
        )
        self.prop = APPNPProp(
            int(config["K"]),
            float(config["alpha"]),
            dropout=float(config["edge_dropout"]),
            cached=float(config["edge_dropout"]) == 0.0,
            add_self_loops=False,
        )

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return self.prop(self.encoder(x), edge_index)


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


class GCNIINet(nn.Module):
    def __init__(self, config: Config, in_dim: int, out_dim: int) -> None:
        super().__init__()
        hidden, layers = int(config["hidden"]), int(config["num_layers"])
        self.lin_in = nn.Linear(in_dim, hidden)
        self.lin_out = nn.Linear(hidden, out_dim)
        alpha, theta = float(config["alpha"]), float(config["theta"])
        self.convs = nn.ModuleList(
            GCN2Conv(hidden, alpha, theta, layer=i + 1, shared_weights=True, cached=True, add_self_loops=False)
            for i in range(layers)
        )
        self.norms = nn.ModuleList(_norm(str(config["norm"]), hidden) for _ in range(layers))
        self.dropout = float(config["dropout"])

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        h = F.dropout(x, self.dropout, self.training)
        h = x0 = F.relu(self.lin_in(h))
        for conv, norm in zip(self.convs, self.norms, strict=True):
            h = F.dropout(h, self.dropout, self.training)
            h = F.relu(norm(conv(h, x0, edge_index)))
        h = F.dropout(h, self.dropout, self.training)
        return self.lin_out(h)


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
        need ~3.8 GiB: refused under a 4 GiB limit instead of OOM-killed.
        """
        hidden, layers = int(config["hidden"]), int(config["num_layers"])
        per_layer = 12 + (2 if config["norm"] != "none" else 0)
        edges = graph.edge_index.shape[1] + graph.num_nodes
        estimate = FLOAT_BYTES * hidden * (per_layer * graph.num_nodes * layers + 3 * edges)
        require_memory(self.name, estimate, device, f"{layers} GCNII layers of {hidden} on {graph.num_nodes} nodes")

    def param_groups(self, model: nn.Module, config: Config) -> list[dict[str, Any]]:
        convs = [p for p in cast(nn.Module, model.convs).parameters()]
        others = [p for n, p in model.named_parameters() if not n.startswith("convs.")]
        return [{"params": convs, "weight_decay": float(config["conv_weight_decay"])}, {"params": others}]


class GPRProp(nn.Module):
    """Generalized PageRank: ``sum_k gamma_k Â^k h`` with learnable ``gamma`` (Chien et al., ICLR 2021)."""

    def __init__(self, K: int, alpha: float, init: str) -> None:
        super().__init__()
        if init == "ppr":
            gamma = alpha * (1 - alpha) ** torch.arange(K + 1, dtype=torch.float)
            gamma[-1] = (1 - alpha) ** K
        else:  # "sgc": all weight on the last hop
            gamma = torch.zeros(K + 1)
            gamma[-1] = 1.0
        self.gamma = nn.Parameter(gamma)
        self.K = K
        self.step = WeightedPropagation()

    def forward(self, h: Tensor, edge_index: Tensor, edge_weight: Tensor) -> Tensor:
        out = self.gamma[0] * h
        for k in range(1, self.K + 1):
            h = self.step(h, edge_index, edge_weight)
            out = out + self.gamma[k] * h
        return out


class GPRGNNNet(nn.Module):
    def __init__(self, config: Config, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.encoder = _Encoder(
            in_dim,
            int(config["hidden"]),
            out_dim,
            int(config["num_layers"]),
            float(config["dropout"]),
            float(config["dropout"]),
            str(config["norm"]),
        )
        self.prop = GPRProp(int(config["K"]), float(config["alpha"]), str(config["init"]))
        self.dprate = float(config["dprate"])

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor) -> Tensor:
        h = F.dropout(self.encoder(x), self.dprate, self.training)
        return self.prop(h, edge_index, edge_weight)


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


class FAGCNNet(nn.Module):
    def __init__(self, config: Config, in_dim: int, out_dim: int) -> None:
        super().__init__()
        hidden, layers = int(config["hidden"]), int(config["num_layers"])
        self.lin_in = nn.Linear(in_dim, hidden)
        self.lin_out = nn.Linear(hidden, out_dim)
        self.convs = nn.ModuleList(
            FAConv(
                hidden,
                eps=float(config["eps"]),
                dropout=float(config["attn_dropout"]),
                cached=True,
                add_self_loops=False,
            )
            for _ in range(layers)
        )
        self.norms = nn.ModuleList(_norm(str(config["norm"]), hidden) for _ in range(layers))
        self.dropout = float(config["dropout"])

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        h = F.dropout(x, self.dropout, self.training)
        h = x0 = F.dropout(F.relu(self.lin_in(h)), self.dropout, self.training)
        for conv, norm in zip(self.convs, self.norms, strict=True):
            h = norm(conv(h, x0, edge_index))
        return self.lin_out(h)


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

        Autograd keeps those messages for the backward.
        """
        hidden, layers = int(config["hidden"]), int(config["num_layers"])
        estimate = edge_message_bytes(graph, hidden, layers)
        require_memory(
            self.name, estimate, device, f"{layers} FAGCN layers of {hidden} over {graph.edge_index.shape[1]} edges"
        )
