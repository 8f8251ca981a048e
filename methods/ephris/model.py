"""Ephris's network as the ``ephris`` package defines it: its structure, and the checkpoint a fit loads.

The official checkpoint is located like every family's and verified by the catalog and by the package's own
check; with ``NODEGROUND_RANDOM_INIT_WEIGHTS=1`` and no file, a checkpoint of seeded random parameters is
written in the package's format instead (the smallest structure with ``NODEGROUND_RANDOM_INIT_ARCH=tiny``).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch

from contract.weights import file_sha256, url_path, weights_dir
from methods.sdk import (
    ARCH_ENV,
    RANDOM_INIT_SEED,
    Provenance,
    WeightsError,
    arch_overrides,
    load_weights_catalog,
    locate_or_random,
)

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
