"""The GraphAny method as a service hosts it: checkpoint choice is the whole search space."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from contract.wire import GraphBundle
from methods.graphany.checkpoint import GraphAnyCheckpoint, load_checkpoint
from methods.graphany.model import (
    AttentionMLP,
    build_attention,
    channel_features,
    distance_features,
    fuse,
    least_squares,
    linear_gnn_predictions,
)
from methods.sdk import (
    Capabilities,
    ChoiceParam,
    Config,
    FitContext,
    Method,
    adaptation_flags,
    graph_tensors,
    locate_weights,
)

VERSION = "2026-12-01"
CHECKPOINTS = ("arxiv", "cora", "product", "wisconsin")


@dataclass
class GraphAnyState:
    ckpt: GraphAnyCheckpoint
    attention: AttentionMLP  # the frozen pretrained scorer
    feats: dict[str, torch.Tensor]  # the channel features of the graph (shared with its cache)
    solutions: dict[str, torch.Tensor]  # per channel, the least-squares weights fitted on the training nodes


class GraphAny(Method):
    name, version, kind = "graphany", VERSION, "gfm"
    description = (
        "GraphAny (ICLR 2025): LinearGNN channels (X, L1, L2, H1, H2) solved by least squares on the training "
        "nodes, fused per node by the frozen pretrained attention module (official checkpoints)."
    )
    capabilities = Capabilities(uses_gpu=False)
    default_config = {"checkpoint": "arxiv", "weights_file": ""}
    search_space = (ChoiceParam("checkpoint", CHECKPOINTS),)
    weights = tuple(f"graphany-{c}" for c in CHECKPOINTS)

    def fit(
        self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext
    ) -> GraphAnyState:
        """Adaptation: the LinearGNN channels solved on the training nodes (inference over all nodes is predict's)."""
        started = time.perf_counter()
        path, provenance = locate_weights(f"graphany-{config['checkpoint']}", str(config["weights_file"]))
        ckpt = load_checkpoint(path)
        attention = build_attention(ckpt)
        data = graph_tensors(graph, torch.device("cpu"))
        ctx.check()
        key = ("graphany-features", ckpt.feat_channels + ckpt.pred_channels)
        cached = key in graph.cache
        if not cached:
            graph.cache[key] = channel_features(
                data.x, data.edge_index, set(ckpt.feat_channels) | set(ckpt.pred_channels)
            )
        feats = graph.cache[key]
        train_t = torch.as_tensor(train, dtype=torch.long)
        solutions = least_squares(feats, train_t, data.y[train_t], graph.num_classes)
        ctx.check()
        state = GraphAnyState(ckpt, attention, feats, solutions)
        fused, weights = self._fuse(state, torch.as_tensor(val, dtype=torch.long))
        ctx.info.update(provenance.info(), **adaptation_flags(torch.softmax(fused, dim=1)))  # over validation nodes
        ctx.info.update(
            checkpoint=str(config["checkpoint"]),
            features_cached=cached,
            adapt_seconds=time.perf_counter() - started,
            **{
                f"attention_{c}": float(w) for c, w in zip(ckpt.pred_channels, weights.mean(0).tolist(), strict=True)
            },  # over validation nodes
        )
        return state

    def predict(self, state: GraphAnyState, graph: GraphBundle) -> np.ndarray:
        fused, _ = self._fuse(state, None)
        return torch.softmax(fused, dim=1).numpy().astype(np.float32)

    @staticmethod
    def _fuse(state: GraphAnyState, rows: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Fused logits and per-node channel weights of ``rows`` (all nodes when None)."""
        preds = linear_gnn_predictions(state.feats, state.solutions, rows)
        dist = distance_features(preds, state.ckpt.feat_channels, state.ckpt.entropy)
        return fuse(preds, dist, state.attention, state.ckpt)
