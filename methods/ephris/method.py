"""Ephris (Nums AI, arXiv 2609.37057) served from its own package: ``ephris.EphrisClassifier``, no port of its code.

``fit`` is the package's ``prepare`` (the graph, the training nodes as context, their labels): once
per graph and split, the target-specific preprocessing the paper's cost counts as adaptation.
``predict`` is ``predict_prepared_log_proba`` on that prepared task. Validation nodes are never
context, and nothing is selected on them: the one setting Ephris exposes, ``random_state``, only
draws the ECOC codebook of tasks with more than ten classes (ephris.ecoc; the inference
permutation is fixed), so a search over it would repeat one trial on every other task. The
protocol's rule fixes it instead: ``random_state`` is the split's seed.

Weights are located like every family's (``methods.sdk.frozen``) and verified twice: by the
catalog (the sha256 recorded in the pinned revision's config.json) and by the package's own
``load_hub_config`` / ``verify_checkpoint``, the check ``EphrisClassifier`` runs on a hub download;
the file is then passed as an explicit local ``checkpoint``, so the package never contacts the hub.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from contract.wire import GraphBundle
from methods.ephris.model import WEIGHTS_ID, locate_checkpoint
from methods.sdk import (
    Capabilities,
    Config,
    FitContext,
    FrozenGFM,
    edge_array_without_self_loops,
    finish_probs,
    require_memory,
)

# Peak memory rise per (node, feature, unit of width) on CPU, in float32s: the feature tokenizer keeps one
# token per cell. Measured peak RSS over prepare + predict on random structures of width 16 and 32
# (1,000-2,000 nodes x 200 features): 12.6-15.5; 16 leaves a margin.
FLOATS_PER_CELL_AND_WIDTH = 16
_WIDTH: dict[str, int] = {}


def memory_estimate(graph: GraphBundle, checkpoint: Path) -> dict[str, float]:
    """Bytes a CPU prepare + predict needs: the per-cell feature tokens dominate, then the weights."""
    if str(checkpoint) not in _WIDTH:
        from ephris.checkpoints import load_checkpoint

        _WIDTH[str(checkpoint)] = int(load_checkpoint(checkpoint)["model"]["width"])
    cells = float(graph.num_nodes) * graph.features.shape[1]
    return {
        "feature tokens": 4.0 * FLOATS_PER_CELL_AND_WIDTH * cells * _WIDTH[str(checkpoint)],
        "weights": float(checkpoint.stat().st_size),
    }


@dataclass
class EphrisState:
    classifier: Any  # ephris.EphrisClassifier, prepared on the graph with the training nodes as context
    classes: np.ndarray  # graph class of each probability column (the context's classes, sorted)
    num_classes: int


class Ephris(FrozenGFM):
    name = "ephris"
    version = "2026-12-01"  # ephris 1.0.1, weights 1.0.0 at hub revision 94aa9caf6cf7
    kind = "gfm"
    description = (
        "Ephris (Nums AI): pretrained graph in-context learner from the `ephris` package; training nodes are "
        "the context; at most 10 classes natively, error-correcting output codes beyond."
    )
    capabilities = Capabilities(uses_gpu=True)
    default_config: ClassVar[Config] = {}
    weights = (WEIGHTS_ID,)

    def fit(
        self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext
    ) -> EphrisState:
        from ephris import EphrisClassifier

        checkpoint, provenance = locate_checkpoint()
        ctx.info.update(provenance.info())
        if ctx.device.type == "cpu":  # on CUDA the package sizes its own chunks to the free memory (ChunkBudget)
            require_memory(self.name, memory_estimate(graph, checkpoint), ctx.device, "in-context inference", ctx.info)
        ctx.check()
        classifier = EphrisClassifier(device=str(ctx.device), random_state=int(ctx.seed), checkpoint=checkpoint)
        train = np.sort(train)
        classifier.prepare(
            torch.from_numpy(graph.features),
            torch.from_numpy(edge_array_without_self_loops(graph.edge_index)),
            context_indices=torch.from_numpy(train),
            context_labels=torch.from_numpy(graph.labels[train]),
        )
        classes = classifier.classes_.numpy()
        ctx.info.update(
            n_context=len(train),
            n_context_classes=len(classes),
            ecoc=graph.num_classes > 10,
            random_state=int(ctx.seed),
        )
        return EphrisState(classifier, classes, graph.num_classes)

    def predict(self, state: EphrisState, graph: GraphBundle) -> np.ndarray:
        probs = state.classifier.predict_prepared_log_proba().exp().numpy()
        out = np.zeros((graph.num_nodes, state.num_classes), dtype=np.float64)
        out[:, state.classes] = probs  # a class absent from the context gets no mass
        return finish_probs(out)
