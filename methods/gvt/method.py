"""The RGVT method as a service hosts it: frozen view transformation, trained head, depth chosen on validation.

Head epochs and recurrent depth are chosen by one rule, ``selection``: the
validation cross-entropy (NodeGround's protocol, the default) or upstream's
validation accuracy, which on an imbalanced binary task keeps an untrained head.
"""

from __future__ import annotations

import time

import numpy as np

from contract.wire import GraphBundle
from methods.gvt.model import GraphViewTransformation, Head, recurrent_representations
from methods.sdk import (
    SELECTION,
    Capabilities,
    ChoiceParam,
    Config,
    FitContext,
    FloatParam,
    HeadState,
    IntParam,
    Method,
    frozen_representations,
    graph_tensors,
    located_state_dict,
    seed_everything,
    train_head,
)

VERSION = "2026-12-07"  # the SDK's head training: fast dropout, fused Adam
SEEDS = (0, 42, 123, 2026, 9999)


class RGVT(Method):
    name, version, kind = "gvt", VERSION, "gfm"
    description = (
        "RGVT, recurrent graph view transformation (ICML 2026): the frozen pretrained view-vector MLP applied "
        "recurrently to the node features; a linear or MLP head is trained on the result; the recurrent depth is "
        "chosen on validation."
    )
    capabilities = Capabilities(uses_gpu=True)
    default_config = {
        "depth": 0,  # 0: train a head at every depth 1..max_depth and keep the best under ``selection`` (upstream)
        "max_depth": 8,
        "head": "mlp",
        "checkpoint_seed": 42,
        "lr": 0.005,
        "weight_decay": 0.0,
        "hidden": 128,
        "max_epochs": 2500,
        "patience": 200,
        "selection": "val_loss",  # or "val_accuracy": upstream's rule, for epochs and depth alike
        "weights_file": "",
    }
    search_space = (
        IntParam("depth", 0, 8),
        ChoiceParam("head", ("mlp", "linear")),
        ChoiceParam("checkpoint_seed", SEEDS),
        FloatParam("lr", 1e-4, 5e-2, log=True),
    )
    settings = (SELECTION,)
    weights = tuple(f"gvt-seed{s}" for s in SEEDS)

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> HeadState:
        started = time.perf_counter()
        seed = int(config["checkpoint_seed"])
        state_dict, provenance = located_state_dict(f"gvt-seed{seed}", str(config["weights_file"]))
        gvt = GraphViewTransformation.from_state_dict(state_dict).to(ctx.device)
        depth, max_depth = int(config["depth"]), int(config["max_depth"])
        depths = list(range(1, max_depth + 1)) if depth == 0 else [depth]
        data = graph_tensors(graph, ctx.device)
        key = ("gvt-representations", provenance.sha256, str(ctx.device))
        cached = frozen_representations(
            graph,
            key,
            ctx,
            lambda: recurrent_representations(gvt, data.x, data.edge_index, max(depths), check=ctx.check),
            reuse=lambda held: len(held) >= max(depths),
        )
        results = []
        for d in depths:
            seed_everything(ctx.seed)
            head = Head(graph.features.shape[1], graph.num_classes, str(config["head"]), int(config["hidden"])).to(
                ctx.device
            )
            results.append((d, train_head(head, cached[d - 1], data.y, train, val, config, ctx), head))
        # the depth whose head scores best under the same rule; the shallowest on ties, as upstream's max() over 1..L
        rule = str(config["selection"])
        d, selected, head = min(results, key=lambda r: (r[1].score(rule), r[0]))
        state = HeadState(head=head.eval(), z=cached[d - 1], encoder=gvt)
        ctx.info.update(provenance.info(), depth=d, selection=rule, **selected.info())
        ctx.info.update(state.flags(selected.best_epoch))
        for r in results:
            ctx.info.update({f"val_loss_depth{r[0]}": r[1].val_loss, f"val_accuracy_depth{r[0]}": r[1].val_accuracy})
        ctx.info["adapt_seconds"] = time.perf_counter() - started
        return state

    def predict(self, state: HeadState, graph: GraphBundle) -> np.ndarray:
        return state.probabilities()
