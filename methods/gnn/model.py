"""The gnn family's networks: the shared layer stack and the four architectures with their own propagation.

``LayerStack`` serves MLP and the stack GNNs (``method.py`` chooses each one's operator); APPNP, GCNII,
GPR-GNN and FAGCN have networks of their own. Each is built from a method's configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import APPNP as APPNPProp
from torch_geometric.nn import FAConv, GCN2Conv, GINConv, JumpingKnowledge, SAGEConv

from methods.sdk import (
    Config,
    WeightedPropagation,
    feature_dropout,
)

_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu, "elu": F.elu}


def _norm(kind: str, dim: int) -> nn.Module:
    if kind == "batch":
        return nn.BatchNorm1d(dim)
    if kind == "layer":
        return nn.LayerNorm(dim)
    return nn.Identity()


# ---- convolutions that map before they aggregate --------------------------------
#
# A sum or a mean over neighbours commutes with a linear map: W (sum_j x_j) = sum_j (W x_j). PyG's SAGE and GIN
# layers gather every arc's input row and then map it, so a first layer over raw features moves arcs x features
# numbers per forward (chameleon: 2,325 features, and the gather was most of a 64-wide GIN's epoch). Where the layer
# narrows, these map every node once and gather the narrow rows: the same function, less work (float sums in
# another order, so the methods that use them have a new version). Max does not commute and keeps PyG's order.

_COMMUTING = ("mean", "sum", "add")


class MapFirstSAGE(SAGEConv):
    """PyG's ``SAGEConv`` (mean, sum or max; a root weight), mapping before a sum or mean where the layer narrows."""

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        out_dim, in_dim = self.lin_l.weight.shape
        if self.aggr not in _COMMUTING or in_dim <= out_dim:
            return super().forward(x, edge_index)
        h = F.linear(x, self.lin_l.weight)
        return self.propagate(edge_index, x=(h, h)) + self.lin_l.bias + self.lin_r(x)


class MapFirstGIN(GINConv):
    """PyG's ``GINConv`` over an MLP that starts with a linear layer, mapped before the sum where it narrows."""

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        first = self.nn[0]
        out_dim, in_dim = first.weight.shape
        if in_dim <= out_dim:
            return super().forward(x, edge_index)
        h = F.linear(x, first.weight)
        return self.nn[1:](self.propagate(edge_index, x=(h, h)) + (1 + self.eps) * h + first.bias)


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
        self.input_dropout = float(config["input_dropout"])
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

    def forward(self, x: Tensor, edge_index: Tensor, rows: Tensor | None = None) -> Tensor:
        """Every node's logits, or those of ``rows``: the layers run on every node, the readout on ``rows`` alone."""
        h = feature_dropout(x, self.input_dropout, self.training)
        outs = []
        for i in range(self.num_hidden):
            z = self._run(self.layers[i], h, edge_index)
            if self.skips:
                z = z + self.skips[i](h)
            h = self.dropout(self.act(self.norms[i](z)))
            outs.append(h)
        if self.head is None:
            out = self._run(self.layers[-1], h, edge_index)
            return out if rows is None else out[rows]
        if rows is not None:
            h, outs = h[rows], [o[rows] for o in outs]
        if self.jk_mode == "last":
            return self.head(h)
        if self.jk is None:  # "sum"
            return self.head(torch.stack(outs).sum(0))
        return self.head(self.jk(outs))


# ---- networks with their own propagation ---------------------------------------


class _Encoder(nn.Module):
    """An MLP ``in -> hidden^(layers-1) -> out`` with dropout before every linear layer.

    The config gives ``hidden``, ``num_layers``, ``dropout`` and ``norm``; the dropout on the input is
    its ``input_dropout`` key (GPR-GNN's is its ``dropout``).
    """

    def __init__(self, config: Config, in_dim: int, out_dim: int, input_dropout: str = "input_dropout") -> None:
        super().__init__()
        hidden, layers = int(config["hidden"]), int(config["num_layers"])
        dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
        self.lins = nn.ModuleList(nn.Linear(a, b) for a, b in pairwise(dims))
        self.norms = nn.ModuleList(_norm(str(config["norm"]), hidden) for _ in range(layers - 1))
        self.dropout, self.input_dropout = float(config["dropout"]), float(config[input_dropout])

    def forward(self, x: Tensor) -> Tensor:
        h = feature_dropout(x, self.input_dropout, self.training)
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
        self.encoder = _Encoder(config, in_dim, out_dim)
        self.prop = APPNPProp(
            int(config["K"]),
            float(config["alpha"]),
            dropout=float(config["edge_dropout"]),
            cached=float(config["edge_dropout"]) == 0.0,
            add_self_loops=False,
        )

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return self.prop(self.encoder(x), edge_index)


class _InitialResidualNet(nn.Module):
    """``lin_in`` to the hidden width, ``num_layers`` convolutions that each also see ``lin_in``'s output, a norm
    after each, ``lin_out`` to the classes. A subclass builds its convolutions (``conv``) and runs them."""

    def __init__(self, config: Config, in_dim: int, out_dim: int) -> None:
        super().__init__()
        hidden, layers = int(config["hidden"]), int(config["num_layers"])
        self.lin_in = nn.Linear(in_dim, hidden)
        self.lin_out = nn.Linear(hidden, out_dim)
        self.convs = nn.ModuleList(self.conv(config, hidden, i) for i in range(layers))
        self.norms = nn.ModuleList(_norm(str(config["norm"]), hidden) for _ in range(layers))
        self.dropout = float(config["dropout"])

    def conv(self, config: Config, hidden: int, i: int) -> nn.Module:
        """The ``i``-th convolution (from 0)."""
        raise NotImplementedError


class GCNIINet(_InitialResidualNet):
    def conv(self, config: Config, hidden: int, i: int) -> nn.Module:
        alpha, theta = float(config["alpha"]), float(config["theta"])
        return GCN2Conv(hidden, alpha, theta, layer=i + 1, shared_weights=True, cached=True, add_self_loops=False)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        h = feature_dropout(x, self.dropout, self.training)
        h = x0 = F.relu(self.lin_in(h))
        for conv, norm in zip(self.convs, self.norms, strict=True):
            h = F.dropout(h, self.dropout, self.training)
            h = F.relu(norm(conv(h, x0, edge_index)))
        h = F.dropout(h, self.dropout, self.training)
        return self.lin_out(h)


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
        self.encoder = _Encoder(config, in_dim, out_dim, input_dropout="dropout")
        self.prop = GPRProp(int(config["K"]), float(config["alpha"]), str(config["init"]))
        self.dprate = float(config["dprate"])

    def forward(self, x: Tensor, edge_index: Tensor, edge_weight: Tensor) -> Tensor:
        h = F.dropout(self.encoder(x), self.dprate, self.training)
        return self.prop(h, edge_index, edge_weight)


class FAGCNNet(_InitialResidualNet):
    def conv(self, config: Config, hidden: int, i: int) -> nn.Module:
        eps, attn_dropout = float(config["eps"]), float(config["attn_dropout"])
        return FAConv(hidden, eps=eps, dropout=attn_dropout, cached=True, add_self_loops=False)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        h = feature_dropout(x, self.dropout, self.training)
        h = x0 = F.dropout(F.relu(self.lin_in(h)), self.dropout, self.training)
        for conv, norm in zip(self.convs, self.norms, strict=True):
            h = norm(conv(h, x0, edge_index))
        return self.lin_out(h)
