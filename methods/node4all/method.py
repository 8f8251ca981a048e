"""The Node4All method as a service hosts it: frozen CGT encoder, trained MLP head."""

from __future__ import annotations

import time

import numpy as np

from contract.wire import GraphBundle
from methods.node4all.model import CGTEncoder, Head, encode
from methods.sdk import (
    SELECTION,
    Capabilities,
    ChoiceParam,
    Config,
    FitContext,
    FloatParam,
    HeadState,
    Method,
    frozen_representations,
    graph_tensors,
    located_state_dict,
    seed_everything,
    train_head,
)

VERSION = "2026-12-07"  # the SDK's head training: fast dropout, fused Adam


class Node4All(Method):
    name, version, kind = "node4all", VERSION, "gfm"
    description = (
        "Node4All (KDD 2026): the frozen channel graph transformer encoder, pretrained on synthetic graphs, "
        "embeds every feature channel; an MLP head is trained on the embeddings."
    )
    capabilities = Capabilities(uses_gpu=True)
    default_config = {
        "head": "mlp",
        "hidden": 512,
        "dropout": 0.5,
        "lr": 0.001,
        "weight_decay": 0.0,
        "max_epochs": 2500,
        "patience": 200,
        # or "val_accuracy": upstream's rule, which keeps an untrained head on imbalanced binary tasks
        "selection": "val_loss",
        "weights_file": "",
    }
    search_space = (
        ChoiceParam("head", ("mlp", "linear")),
        ChoiceParam("hidden", (128, 256, 512, 1024)),
        FloatParam("dropout", 0.0, 0.8),
        FloatParam("lr", 1e-4, 1e-2, log=True),
    )
    settings = (SELECTION,)
    weights = ("node4all-cgt",)

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> HeadState:
        started = time.perf_counter()
        state_dict, provenance = located_state_dict("node4all-cgt", str(config["weights_file"]))
        encoder = CGTEncoder.from_state_dict(state_dict).to(ctx.device)
        data = graph_tensors(graph, ctx.device)
        key = ("node4all-embeddings", provenance.sha256, str(ctx.device))
        z = frozen_representations(graph, key, ctx, lambda: encode(encoder, data.x, data.edge_index, check=ctx.check))
        seed_everything(ctx.seed)
        head = Head(
            z.shape[1], graph.num_classes, str(config["head"]), int(config["hidden"]), float(config["dropout"])
        ).to(ctx.device)
        selected = train_head(head, z, data.y, train, val, config, ctx)
        state = HeadState(head=head.eval(), z=z, encoder=encoder)
        ctx.info.update(provenance.info(), selection=str(config["selection"]), **selected.info())
        ctx.info.update(state.flags(selected.best_epoch), adapt_seconds=time.perf_counter() - started)
        return state

    def predict(self, state: HeadState, graph: GraphBundle) -> np.ndarray:
        return state.probabilities()
