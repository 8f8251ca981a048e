"""The method SDK: a base class does the shared work, a method fills in its model.

``Method`` is the contract a service hosts (fit, predict). ``TorchNodeClassifier``
does everything a full-batch PyTorch node classifier needs — tensors on the
right device, seeding, the loss for binary or multiclass tasks, early stopping
on validation loss with restore of the best epoch, and a deadline/cancel check
every epoch — so that a method states its capabilities, default config and
search space and writes ``build_model``.
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from contract.handshake import DEVICE_ENV
from contract.space import EPOCHS_KEY, ChoiceParam, Config, FloatParam, IntParam, Param, validate_config
from contract.wire import GraphBundle
from methods.sdk import dropout
from methods.sdk.weights import unverified_allowed, weights_problems


class InputRefused(ValueError):
    """Raised by a method that declines this input on purpose (more classes than its decoder has, ...).

    The service answers INVALID_ARGUMENT with the message: the request has to change. Any
    other exception a method raises is the method failing (INTERNAL, a ``failed`` trial).
    """


class FitInterrupted(Exception):
    """Raised inside a fit when its time limit ran out or the caller went away."""

    def __init__(self, reason: str, timed_out: bool) -> None:
        super().__init__(reason)
        self.timed_out = timed_out


@dataclass(frozen=True)
class Capabilities:
    max_classes: int = 0  # 0 = no limit
    max_features: int = 0
    max_nodes: int = 0
    needs_gpu: bool = False
    uses_gpu: bool = True
    supports_binary: bool = True
    supports_multiclass: bool = True


@dataclass
class FitContext:
    """What a fit may consult besides its data: the seed, the device and when to stop."""

    seed: int
    device: torch.device
    deadline: float | None = None  # time.monotonic() value
    is_cancelled: Callable[[], bool] = lambda: False
    info: dict[str, Any] = field(default_factory=dict)  # reported back in FitResponse.info

    def check(self) -> None:
        """Call between units of work (epochs): stop promptly when told to."""
        if self.is_cancelled():
            raise FitInterrupted("the caller cancelled the fit", timed_out=False)
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise FitInterrupted("the fit ran past its time limit", timed_out=True)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    dropout.seed(seed)


def pick_device(uses_gpu: bool) -> torch.device:
    """NODEGROUND_DEVICE overrides; otherwise the first GPU when the method can use one."""
    wanted = os.environ.get(DEVICE_ENV)
    if wanted:
        return torch.device(wanted)
    if uses_gpu and torch.cuda.is_available():
        return torch.device("cuda:0")
    return torch.device("cpu")


class Method(ABC):
    """A method as a service hosts it. Subclasses set the class attributes and implement fit/predict."""

    name: ClassVar[str]
    version: ClassVar[str]  # frozen, dated definition
    kind: ClassVar[str] = "supervised"  # or "gfm"
    description: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities] = Capabilities()
    default_config: ClassVar[Config]
    search_space: ClassVar[tuple[Param, ...]] = ()
    settings: ClassVar[
        tuple[Param, ...]
    ] = ()  # keys a user may set, checked like the space's, never sampled by a sweep
    weights: ClassVar[tuple[str, ...]] = ()  # catalog ids (methods/*/weights.toml) that some configuration reads

    @classmethod
    def resolve_config(cls, config: dict[str, Any]) -> Config:
        return validate_config(config, cls.default_config, cls.search_space + cls.settings)

    @classmethod
    def weights_problems(cls) -> dict[str, str]:
        """Weights id -> why it cannot be used now; while any is listed the service is not healthy."""
        return weights_problems(cls.weights, allow_unverified=unverified_allowed())

    @abstractmethod
    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> Any:
        """Adapt to the graph's training nodes; return whatever predict needs."""

    @abstractmethod
    def predict(self, state: Any, graph: GraphBundle) -> np.ndarray:
        """Return an N x C matrix of class probabilities (rows sum to one)."""


@dataclass
class GraphTensors:
    """A graph's tensors on one device, built once per (graph, device) and shared by fits."""

    x: torch.Tensor
    edge_index: torch.Tensor
    y: torch.Tensor
    num_classes: int


def graph_tensors(graph: GraphBundle, device: torch.device) -> GraphTensors:
    key = ("tensors", str(device))
    if key not in graph.cache:
        graph.cache[key] = GraphTensors(
            x=torch.from_numpy(graph.features).to(device),
            edge_index=torch.from_numpy(graph.edge_index).to(device),
            y=torch.from_numpy(graph.labels).to(device),
            num_classes=graph.num_classes,
        )
    return graph.cache[key]


@dataclass
class TrainedModel:
    module: nn.Module
    device: torch.device
    binary: bool
    config: Config = field(default_factory=dict)


SELECTION_RULES = ("val_loss", "val_accuracy")


def task_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Binary cross-entropy for one logit per node, cross-entropy for one logit per class.

    On a binary task a two-logit softmax head's cross-entropy is the binary
    cross-entropy of its class-1 probability, so every head is judged on the same scale.
    """
    if logits.ndim == 1:
        return nn.functional.binary_cross_entropy_with_logits(logits, y.to(logits.dtype))
    return nn.functional.cross_entropy(logits, y)


def task_accuracy(logits: torch.Tensor, y: torch.Tensor) -> float:
    predicted = (logits > 0).long() if logits.ndim == 1 else logits.argmax(1)
    return float((predicted == y).float().mean())


@dataclass(frozen=True)
class EpochSelection:
    """The epoch ``train_epochs`` kept (0 = after the first update) and its validation scores."""

    best_epoch: int
    epochs: int
    val_loss: float
    val_accuracy: float

    def score(self, rule: str) -> float:
        """Lower is better under ``rule``: the validation loss, or minus the validation accuracy."""
        return self.val_loss if rule == "val_loss" else -self.val_accuracy

    def info(self) -> dict[str, Any]:
        return {
            "epochs": self.epochs,
            "best_epoch": self.best_epoch,
            "best_val_loss": self.val_loss,
            "best_val_accuracy": self.val_accuracy,
        }


def train_epochs(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    train_logits: Callable[[], torch.Tensor],
    val_logits: Callable[[], torch.Tensor],
    y_train: torch.Tensor,
    y_val: torch.Tensor,
    config: Config,
    ctx: FitContext,
    rule: str = "val_loss",
) -> EpochSelection:
    """Full-batch training that keeps the best epoch on validation; the one loop every trained model uses.

    ``rule`` ``val_loss`` (NodeGround's protocol) keeps the epoch with the lowest
    validation cross-entropy (``task_loss``); ``val_accuracy`` keeps the first
    epoch with the highest validation accuracy, the rule several GFM papers use,
    which on an imbalanced binary task can never beat the majority class and so
    keeps an untrained model. Patience (``config["patience"]``) counts epochs
    without improvement under the same rule; the kept state is restored at the end.

    A model may define ``set_epoch(epoch) -> bool``, called before every epoch:
    when it returns True (the model changed its function, e.g. a warm-up phase
    ended) selection and patience start afresh. Its ``min_epochs`` attribute, if
    set, keeps early stopping from ending training before that many epochs.

    Dropout draws from the SDK's fast generator while the loop runs (``methods.sdk.dropout``: the same law).
    """
    if rule not in SELECTION_RULES:
        raise ValueError(f"selection rule must be one of {list(SELECTION_RULES)}, got {rule!r}")
    with dropout.fast_dropout():
        return _train_epochs(model, optimizer, train_logits, val_logits, y_train, y_val, config, ctx, rule)


def _train_epochs(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    train_logits: Callable[[], torch.Tensor],
    val_logits: Callable[[], torch.Tensor],
    y_train: torch.Tensor,
    y_val: torch.Tensor,
    config: Config,
    ctx: FitContext,
    rule: str,
) -> EpochSelection:
    set_epoch = getattr(model, "set_epoch", None)
    best = EpochSelection(-1, 0, float("inf"), -1.0)
    best_state: dict[str, torch.Tensor] | None = None
    # Under the loss rule only the kept epoch's accuracy is reported: its validation logits are kept (a reference to
    # a tensor no later epoch writes) and counted once at the end, not at every improving epoch.
    best_out: torch.Tensor | None = None
    waited = epochs = 0
    for epoch in range(int(config[EPOCHS_KEY])):
        ctx.check()
        if set_epoch is not None and set_epoch(epoch):
            best, best_state, best_out, waited = EpochSelection(-1, 0, float("inf"), -1.0), None, None, 0
        model.train()
        optimizer.zero_grad(set_to_none=True)
        task_loss(train_logits(), y_train).backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            out = val_logits()
            val_loss = float(task_loss(out, y_val))
            val_acc = task_accuracy(out, y_val) if rule != "val_loss" else -1.0
        epochs = epoch + 1
        candidate = EpochSelection(epoch, 0, val_loss, val_acc)
        if candidate.score(rule) < best.score(rule):
            best, best_out, waited = candidate, out, 0
            best_state = _snapshot(model, best_state)
        else:
            waited += 1
            if waited >= int(config["patience"]) and epochs >= getattr(model, "min_epochs", 0):
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    if best_out is not None and best.val_accuracy < 0:
        best = dataclasses.replace(best, val_accuracy=task_accuracy(best_out, y_val))
    return dataclasses.replace(best, epochs=epochs)


def _snapshot(model: nn.Module, into: dict[str, torch.Tensor] | None) -> dict[str, torch.Tensor]:
    """The model's state copied into ``into`` (the last kept epoch's tensors, reused), or into new tensors."""
    live = model.state_dict()
    if into is None or into.keys() != live.keys():
        return {k: v.detach().clone() for k, v in live.items()}
    for name, value in live.items():
        into[name].copy_(value)
    return into


def make_optimizer(params: Any, config: Config) -> torch.optim.Optimizer:
    """Adam, or AdamW when ``config["optimizer"]`` says so, at the config's ``lr`` and ``weight_decay``.

    The fused implementation updates every parameter in one kernel instead of a dozen small ones per tensor (the
    same update rule; an epoch of a small graph is mostly such fixed calls).
    """
    optimizer_cls = torch.optim.AdamW if config.get("optimizer") == "adamw" else torch.optim.Adam
    return optimizer_cls(params, lr=float(config["lr"]), weight_decay=float(config["weight_decay"]), fused=True)


# The search space of the training keys ``TorchNodeClassifier`` reads; a method adds its model's keys.
TRAIN_SPACE: tuple[Param, ...] = (
    FloatParam("lr", 1e-4, 5e-2, log=True),
    FloatParam("weight_decay", 1e-7, 1e-2, log=True),
    ChoiceParam("optimizer", ("adam", "adamw")),
    IntParam("patience", 20, 300),
)


class TorchNodeClassifier(Method):
    """Full-batch training with early stopping on validation loss and best-epoch restore.

    Config keys used here (a subclass's defaults must provide them): ``lr``,
    ``weight_decay``, ``max_epochs``, ``patience``; ``optimizer`` is optional
    (``adam`` or ``adamw``).

    Hooks a subclass may override (all optional):

    - ``model_inputs(graph, config, device)``: the positional arguments of the
      model's forward; by default ``(x, edge_index)``. Derived tensors (hop
      features, a graph without self-loops, ...) belong in ``graph.cache`` so
      that every fit on the same graph reuses them.
    - ``row_inputs(inputs, nodes)``: the inputs of ``nodes`` alone, for a model
      whose node logits depend on that node's rows alone (trains on the rows
      it reads).
    - ``readout_rows = True``: the model's forward takes ``rows=`` and runs its
      per-node readout on those nodes alone (its graph layers on every node).
    - ``param_groups(model, config)``: optimizer parameter groups, for methods
      whose papers use per-module learning rates or weight decay.
    - ``check_resources(graph, config, device)``: raise ``ResourceError`` with
      an estimate when the configuration cannot fit, before anything is built.

    Epochs run in ``train_epochs`` under the ``val_loss`` rule; a model's
    ``set_epoch`` and ``min_epochs`` hooks are described there.
    """

    # The network's forward takes ``rows=`` (a node index tensor) and returns those nodes' logits: it runs its graph
    # layers on every node and its readout, which maps each node's own hidden states to its logits, on ``rows`` alone
    # (JKNet's LSTM readout was 41% of a Lite cell's CPU over texas's 183 nodes when run on all of them). The readout
    # must hold no batch statistics.
    readout_rows: ClassVar[bool] = False

    @abstractmethod
    def build_model(self, config: Config, in_dim: int, out_dim: int) -> nn.Module:
        """The network; ``forward(*model_inputs(...))`` returns logits (N x out_dim)."""

    def model_inputs(self, graph: GraphBundle, config: Config, device: torch.device) -> tuple[Any, ...]:
        data = graph_tensors(graph, device)
        return (data.x, data.edge_index)

    def row_inputs(self, inputs: tuple[Any, ...], nodes: torch.Tensor) -> tuple[Any, ...] | None:
        """The forward's inputs for ``nodes`` alone, where a node's logits depend on its own input rows alone.

        A per-node model (an MLP, a Transformer over each node's precomputed tokens) then trains on the training
        rows and is checked on the validation rows, instead of running every node to read a few (NAGphormer on
        Cora with 10% labels: about a fifth of the work). None, the default, runs the forward on every node. The
        training forward of a model with batch norm runs on every node all the same: its statistics are the
        batch's, and the batch is the whole graph.
        """
        return None

    def node_logits(
        self, model: nn.Module, inputs: tuple[Any, ...], nodes: torch.Tensor, training: bool
    ) -> Callable[[], torch.Tensor]:
        """The forward that gives ``nodes``' logits with the least work that keeps them what the whole forward gives.

        Their input rows alone (``row_inputs``), the readout on them alone (``readout_rows``), or else the forward
        over every node, indexed. A training forward through batch norm stays on every node: its statistics are the
        batch's, and the batch is the whole graph.
        """
        whole = training and any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
        rows = None if whole else self.row_inputs(inputs, nodes)
        if rows is not None:
            return lambda: model(*rows)
        if self.readout_rows:
            return lambda: model(*inputs, rows=nodes)
        return lambda: model(*inputs)[nodes]

    def param_groups(self, model: nn.Module, config: Config) -> list[dict[str, Any]]:
        return [{"params": [p for p in model.parameters() if p.requires_grad]}]

    def check_resources(self, graph: GraphBundle, config: Config, device: torch.device) -> None:
        return None

    def fit(
        self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext
    ) -> TrainedModel:
        seed_everything(ctx.seed)
        self.check_resources(graph, config, ctx.device)
        data = graph_tensors(graph, ctx.device)
        inputs = self.model_inputs(graph, config, ctx.device)
        binary = graph.num_classes == 2
        model = self.build_model(config, data.x.shape[1], 1 if binary else graph.num_classes).to(ctx.device)
        optimizer = make_optimizer(self.param_groups(model, config), config)
        train_t = torch.as_tensor(train, dtype=torch.long, device=ctx.device)
        val_t = torch.as_tensor(val, dtype=torch.long, device=ctx.device)
        y_train, y_val = data.y[train_t], data.y[val_t]

        train_logits = self.node_logits(model, inputs, train_t, training=True)
        val_logits = self.node_logits(model, inputs, val_t, training=False)
        selected = train_epochs(
            model,
            optimizer,
            lambda: _head(train_logits(), binary),
            lambda: _head(val_logits(), binary),
            y_train,
            y_val,
            config,
            ctx,
        )
        ctx.info.update(selected.info())
        return TrainedModel(module=model, device=ctx.device, binary=binary, config=dict(config))

    def predict(self, state: TrainedModel, graph: GraphBundle) -> np.ndarray:
        inputs = self.model_inputs(graph, state.config, state.device)
        state.module.eval()
        with torch.no_grad():
            out = state.module(*inputs)
            if state.binary:
                p = torch.sigmoid(out.reshape(-1))
                probs = torch.stack([1 - p, p], dim=1)
            else:
                probs = torch.softmax(out, dim=1)
        return probs.float().cpu().numpy()


def _head(out: torch.Tensor, binary: bool) -> torch.Tensor:
    return out.reshape(-1) if binary else out
