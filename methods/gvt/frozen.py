"""Shared by the frozen-encoder GFM families (GraphAny, RGVT, Node4All): weights provenance and head training.

Kept in one place so that the three report weights the same way and train heads
with the same loop; each family states its own defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from methods.sdk import Config, FitContext
from methods.sdk.weights import WeightsError, file_sha256, load_weights_catalog, resolve


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


def train_head(head: nn.Module, z: torch.Tensor, y: torch.Tensor, train: torch.Tensor, val: torch.Tensor, config: Config,
               ctx: FitContext) -> tuple[float, float, int, int]:
    """Full-batch Adam; keep the epoch with the best validation accuracy (upstream) or loss; patience in epochs.

    Returns (best validation accuracy, its validation loss, best epoch, epochs run). Only the
    training rows are pushed through the head for the update and only the validation rows for
    the check, which gives the same numbers as upstream's full-graph passes at a fraction of the cost.
    """
    opt = torch.optim.Adam(head.parameters(), lr=float(config["lr"]), weight_decay=float(config["weight_decay"]))
    z_train, y_train, z_val, y_val = z[train], y[train], z[val], y[val]
    by_loss = config["early_stop"] == "val_loss"
    best = (-1.0, float("inf"), -1)
    best_state, waited, epochs = None, 0, 0
    for epoch in range(int(config["max_epochs"])):
        if epoch % 10 == 0:
            ctx.check()
        head.train()
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(head(z_train), y_train)
        loss.backward()
        opt.step()
        head.eval()
        with torch.no_grad():
            out = head(z_val)
            acc = float((out.argmax(1) == y_val).float().mean())
            vloss = float(nn.functional.cross_entropy(out, y_val))
        epochs = epoch + 1
        improved = vloss < best[1] if by_loss else acc > best[0]
        if improved:
            best, waited = (acc, vloss, epoch), 0
            best_state = {k: v.detach().clone() for k, v in head.state_dict().items()}
        else:
            waited += 1
            if waited >= int(config["patience"]):
                break
    if best_state is not None:
        head.load_state_dict(best_state)
    return best[0], best[1], best[2], epochs
