"""Shared by the frozen-encoder GFM families (GraphAny, RGVT, Node4All): weights provenance, head training, flags.

Kept in one place so that the three report weights the same way, train heads
with the SDK's epoch loop and flag degenerate fits alike; each family states
its own defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from contract.weights import WeightsError, file_sha256, load_weights_catalog
from methods.sdk import ChoiceParam, Config, FitContext
from methods.sdk.method import SELECTION_RULES, EpochSelection, train_epochs
from methods.sdk.weights import resolve


def resolve_weights(weights_id: str, override: str) -> tuple[Path, dict[str, Any]]:
    """The verified catalog file (official) or, with ``override``, any file (official only if byte-identical)."""
    entry = load_weights_catalog().get(weights_id)
    if entry is None:
        raise WeightsError(f"unknown weights id {weights_id!r}")
    if override:
        path = Path(override)
        if not path.is_file():
            raise WeightsError(f"weights_file {path} does not exist")
        digest = file_sha256(path)
        official = digest == entry.sha256
        return path, {"weights_id": weights_id if official else f"file:{path.name}", "weights_sha256": digest, "weights_official": official}
    resolved = resolve(entry)
    return resolved.path, {"weights_id": entry.id, "weights_sha256": resolved.sha256, "weights_official": resolved.official}


SELECTION = ChoiceParam("selection", SELECTION_RULES)  # a setting, not searched: sweeps keep val_loss
CONSTANT_SPREAD = 1e-6  # probabilities that differ by less than this over all nodes are constant


def train_head(head: nn.Module, z: torch.Tensor, y: torch.Tensor, train: torch.Tensor, val: torch.Tensor, config: Config,
               ctx: FitContext) -> EpochSelection:
    """Full-batch Adam on the frozen representations; the SDK's epoch loop under ``config["selection"]``.

    ``val_loss`` is NodeGround's protocol; ``val_accuracy`` is upstream's (RGVT,
    Node4All). Only the training rows are pushed through the head for the update
    and only the validation rows for the check, which gives the same numbers as
    upstream's full-graph passes at a fraction of the cost.
    """
    opt = torch.optim.Adam(head.parameters(), lr=float(config["lr"]), weight_decay=float(config["weight_decay"]))
    z_train, z_val = z[train], z[val]
    return train_epochs(head, opt, lambda: head(z_train), lambda: head(z_val), y[train], y[val], config, ctx,
                        rule=str(config["selection"]))


def head_probabilities(head: nn.Module, z: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return torch.softmax(head.eval()(z), dim=1)


def adaptation_flags(probs: torch.Tensor, best_epoch: int | None = None) -> dict[str, bool]:
    """What a fit reports about a degenerate result, so that no table hides it.

    ``untrained_head``: the kept head had one update at most (best epoch 0, or
    none). ``constant_probabilities``: every node gets the same probabilities,
    so rankings and AUROC carry no information.
    """
    spread = float((probs.max(0).values - probs.min(0).values).max()) if probs.shape[0] else 0.0
    flags = {"constant_probabilities": spread < CONSTANT_SPREAD}
    if best_epoch is not None:
        flags["untrained_head"] = best_epoch <= 0
    return flags
