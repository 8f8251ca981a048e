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

import os
import tempfile
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from contract.weights import file_sha256, url_path, weights_dir
from contract.wire import GraphBundle
from methods.sdk import Capabilities, Config, FitContext
from methods.sdk.frozen import (
    ARCH_ENV,
    RANDOM_INIT_SEED,
    FrozenGFM,
    Provenance,
    arch_overrides,
    locate_or_random,
)
from methods.sdk.memory import require_memory
from methods.sdk.pfn import edge_array_without_self_loops, finish_probs
from methods.sdk.weights import WeightsError, load_weights_catalog

WEIGHTS_ID = "ephris-1.0.0"
# Ephris's smallest structure for random-parameter runs that check the path, not the network's cost.
TINY_ARCH = {
    "width": 16,
    "set_heads": 2,
    "feature_latents": 8,
    "node_latents": 2,
    "graph_heads": 2,
    "icl_layers": 2,
    "refinement_layers": 2,
    "num_refinements": 2,
    "num_globals": 2,
    "scaling_hidden_width": 8,
    "expansion": 2,
    "feature_basis_size": 4,
}
# Random-init structure keys the package's defaults do not give: the released config.json's values are
# not readable offline, so the graph attention width is one that divides the default node width (512).
RANDOM_ONLY_DEFAULTS = {"graph_heads": 8, "task_type": "multiclass"}


def model_config(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """A complete checkpoint ``model`` entry in the package's schema: its defaults, then ``overrides``."""
    from ephris.config import MEMORY_DEFAULTS, MODEL_DEFAULTS

    config: dict[str, Any] = {"architecture": "ephris", **RANDOM_ONLY_DEFAULTS}
    for defaults in (MODEL_DEFAULTS, MEMORY_DEFAULTS):
        config.update({f.name: getattr(defaults, f.name) for f in fields(defaults)})
    config.update({k: v for k, v in (overrides or {}).items() if k in config and k != "architecture"})
    return config


def random_checkpoint(path: Path, overrides: dict[str, Any] | None = None, seed: int = RANDOM_INIT_SEED) -> Path:
    """Write a checkpoint of seeded random parameters in the package's own format (format_version 2).

    The package builds its model on the meta device and assigns the checkpoint's tensors, so every
    tensor is drawn here: norms' weights 1, biases 0, vectors spread over [-2, 2], matrices scaled
    by 1/sqrt(fan-in), so that a forward pass stays finite.
    """
    from ephris.checkpoints import model_config as validated
    from ephris.model import EphrisModel

    config = model_config(overrides)
    shapes = EphrisModel(num_outputs=int(config["max_classes"]), **validated(config)).state_dict()
    generator = torch.Generator().manual_seed(seed)
    state: dict[str, torch.Tensor] = {}
    for key, meta in shapes.items():
        if not meta.dtype.is_floating_point:
            state[key] = torch.zeros(meta.shape, dtype=meta.dtype)
        elif key.endswith("bias"):
            state[key] = torch.zeros(meta.shape)
        elif meta.ndim == 0 or (meta.ndim == 1 and key.endswith("weight")):
            state[key] = torch.ones(meta.shape)
        elif meta.ndim == 1:
            state[key] = torch.linspace(-2.0, 2.0, meta.shape[0])
        else:
            state[key] = torch.randn(meta.shape, generator=generator) / meta.shape[-1] ** 0.5
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"format_version": 2, "model": config, "state_dict": state}, path)
    return path


def verify_official(checkpoint: Path, config_json: Path) -> None:
    """The package's own check of a hub download: config.json's schema, then the checkpoint's sha256."""
    from ephris.checkpoints import load_hub_config, verify_checkpoint

    try:
        verify_checkpoint(checkpoint, load_hub_config(config_json)["sha256"])
    except ValueError as exc:
        raise WeightsError(f"ephris: {checkpoint} refused by the package's own check: {exc}") from None


_RANDOM: dict[str, tuple[Path, Provenance]] = {}


def locate_checkpoint() -> tuple[Path, Provenance]:
    """The verified official checkpoint, or (NODEGROUND_RANDOM_INIT_WEIGHTS=1 and no file) a random one."""
    found = locate_or_random(WEIGHTS_ID)
    if found is not None:
        path, provenance = found
        if provenance.official:
            entry = load_weights_catalog()[WEIGHTS_ID]
            verify_official(path, weights_dir() / url_path(entry.sha256_from))
        return found
    arch = os.environ.get(ARCH_ENV, "").strip()
    overrides = TINY_ARCH if arch == "tiny" else arch_overrides()
    key = repr(sorted(overrides.items()))
    if key not in _RANDOM:
        path = random_checkpoint(Path(tempfile.mkdtemp(prefix="ephris-random-")) / "ephris.pt", overrides)
        _RANDOM[key] = (path, Provenance("random-init", file_sha256(path), False))
    return _RANDOM[key]


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
