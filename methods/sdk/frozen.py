"""Frozen pretrained weights with provenance, and heads trained on frozen representations.

Every GFM family reads its checkpoints through ``locate_weights``: the catalog
entry's file, verified by sha256 (``methods.sdk.weights.resolve``), or a file a
user named in the config (official only if byte-identical to the catalog's).
What a fit reports about its weights is the ``Provenance`` of what it read:
``weights_id``, ``weights_sha256``, ``weights_official``.

Environment switches, one rule for every family:

* ``NODEGROUND_ALLOW_UNVERIFIED_WEIGHTS=1`` accepts a catalog entry whose sha256
  is ``"unverified"``; its results are never labeled official.
* ``NODEGROUND_RANDOM_INIT_WEIGHTS=1`` lets a family that can (``FrozenGFM``,
  ``load_frozen``) build its official structure with seeded random parameters
  when its weights are absent as a whole (offline tests, smoke runs);
  ``NODEGROUND_RANDOM_INIT_ARCH`` may shrink that random structure: a JSON
  object of structure keys, or ``tiny`` (``TINY_ARCH``) for runs that check a
  path, not a network's cost (random parameters predict nothing anyway).

``load_frozen`` builds a frozen module once per process and weights: the
one-time read is charged to the first fit and reported as
``weights_load_seconds`` (0 on later fits); the download itself
(``orchestrator weights fetch``) is never inside a fit.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import torch
from torch import nn

from contract.settings import RANDOM_INIT_WEIGHTS
from contract.space import ChoiceParam, Config
from contract.weights import verify_file, weights_dir
from contract.wire import GraphBundle
from methods.sdk.method import SELECTION_RULES, EpochSelection, FitContext, Method, make_optimizer, train_epochs
from methods.sdk.weights import (
    ResolvedWeights,
    WeightsError,
    load_weights_catalog,
    resolve,
    safe_torch_load,
    unverified_allowed,
    weights_problems,
)

RANDOM_ENV = RANDOM_INIT_WEIGHTS.env
ARCH_ENV = "NODEGROUND_RANDOM_INIT_ARCH"
RANDOM_INIT_SEED = 20260101  # fixed: the "random-init" weights are the same in every process
# The smallest random structures of the in-context families (keys a family does not use are ignored).
TINY_ARCH: dict[str, Any] = {
    "embed_dim": 16,
    "hid_dim": 32,
    "nhead": 2,
    "nlayers": 1,
    "adapter_heads": 2,  # GraphPFN
    "emsize": 16,  # NodePFN and G2T-FM (nhead above)
    "d_hidden": 16,  # PEARL
}
ARCH_PRESETS: dict[str, dict[str, Any]] = {"tiny": TINY_ARCH}


# ---- weights and their provenance -------------------------------------------------


@dataclass(frozen=True)
class Provenance:
    """Where a fit's frozen parameters came from, as its ``ctx.info`` reports it."""

    weights_id: str
    sha256: str
    official: bool

    def info(self) -> dict[str, Any]:
        return {"weights_id": self.weights_id, "weights_sha256": self.sha256, "weights_official": self.official}


def random_init_allowed() -> bool:
    return RANDOM_INIT_WEIGHTS.read() == 1


def locate_weights(weights_id: str, override: str = "") -> tuple[Path, Provenance]:
    """The verified file of ``weights_id`` and its provenance; WeightsError if it cannot be used.

    ``override`` names any file instead: official only if byte-identical to the catalog's.
    """
    entry = load_weights_catalog().get(weights_id)
    if entry is None:
        raise WeightsError(f"weights id {weights_id!r} is not in any methods/*/weights.toml")
    if override:
        path = Path(override)
        if not path.is_file():
            raise WeightsError(f"weights_file {path} does not exist")
        verdict = verify_file(entry, path, weights_dir())
        official = verdict.official
        return path, Provenance(weights_id if official else f"file:{path.name}", verdict.sha256, official)
    resolved = resolve(entry, allow_unverified=unverified_allowed())
    return resolved.path, Provenance(entry.id, resolved.sha256, resolved.official)


def locate_or_random(weights_id: str) -> tuple[Path, Provenance] | None:
    """``locate_weights``, or None when the file is absent and random init is allowed."""
    try:
        return locate_weights(weights_id)
    except WeightsError as exc:
        if "not found" not in str(exc):
            raise
        if random_init_allowed():
            return None
        raise WeightsError(
            f"{exc}; or set {RANDOM_ENV}=1 to run the official structure with random (non-official) weights"
        ) from exc


def load_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """A checkpoint that is a plain state dict, loaded without running code it carries."""
    state = safe_torch_load(path)
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightsError(f"{path.name} is not a plain state dict")
    return state


def located_state_dict(weights_id: str, override: str = "") -> tuple[dict[str, torch.Tensor], Provenance]:
    """``locate_weights`` of a checkpoint that is a plain state dict, loaded: (state dict, provenance)."""
    path, provenance = locate_weights(weights_id, override)
    return load_state_dict(path), provenance


# ---- frozen modules built once per process (in-context GFMs) ----------------------


M = TypeVar("M", bound=nn.Module)


@dataclass
class Frozen(Generic[M]):
    """A frozen module, where its parameters came from and how long building it took in this fit."""

    module: M
    provenance: Provenance
    config: dict[str, Any]
    load_seconds: float

    def report(self, ctx: FitContext) -> None:
        ctx.info.update(self.provenance.info(), weights_load_seconds=round(self.load_seconds, 4))


_CACHE: dict[tuple[Any, ...], Frozen[Any]] = {}


def state_sha256(module: nn.Module) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def arch_overrides() -> dict[str, Any]:
    raw = os.environ.get(ARCH_ENV, "").strip()
    if not raw:
        return {}
    if raw in ARCH_PRESETS:
        return dict(ARCH_PRESETS[raw])
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise WeightsError(
            f"{ARCH_ENV}={raw!r} is neither {' nor '.join(ARCH_PRESETS)} nor a JSON object of structure keys"
        )
    return value


class FrozenGFM(Method):
    """A GFM whose ``weights`` may be absent as a whole when random init is allowed."""

    @classmethod
    def weights_problems(cls) -> dict[str, str]:
        return weights_problems(cls.weights, allow_unverified=unverified_allowed(), allow_missing=random_init_allowed())


def load_frozen(
    key: str,
    weights_ids: tuple[str, ...],
    build: Callable[[dict[str, Any]], M],
    default_config: dict[str, Any],
    load_state: Callable[[dict[str, ResolvedWeights]], dict[str, Any]],
    device: torch.device,
) -> Frozen[M]:
    """Build (or reuse) the frozen model: official files when present, else seeded random init.

    ``load_state(files)`` reads the verified files and returns ``{"config": ...,
    "state": ..., "allowed_missing": (...)}``: the structure config found in the
    checkpoint (overriding ``default_config``), the state_dict in our module's
    names, and key prefixes/suffixes that may legitimately be absent.
    """
    located = {wid: locate_or_random(wid) for wid in weights_ids}
    present = {wid: found for wid, found in located.items() if found is not None}
    if present and len(present) != len(located):
        missing = sorted(set(located) - set(present))
        raise WeightsError(
            f"{key}: weights {', '.join(missing)} missing while {', '.join(sorted(present))} are present; fetch all "
            "of them"
        )
    cache_key = (
        key,
        str(device),
        tuple((wid, str(path), p.sha256) for wid, (path, p) in present.items()),
        json.dumps(arch_overrides(), sort_keys=True) if not present else "",
    )
    if cache_key in _CACHE:
        cached = _CACHE[cache_key]
        return Frozen(cached.module, cached.provenance, cached.config, 0.0)
    start = time.perf_counter()
    if present:
        catalog = load_weights_catalog()
        files = {wid: ResolvedWeights(catalog[wid], path, p.sha256, p.official) for wid, (path, p) in present.items()}
        loaded = load_state(files)
        config = {**default_config, **loaded.get("config", {})}
        module = build(config)
        missing_keys, unexpected = module.load_state_dict(loaded["state"], strict=False)
        allowed_missing = loaded.get("allowed_missing", ())
        missing_keys = [k for k in missing_keys if not any(k.startswith(p) or k.endswith(p) for p in allowed_missing)]
        if missing_keys or unexpected:
            raise WeightsError(
                f"{key}: checkpoint does not match the model structure: missing {missing_keys[:5]} (of "
                f"{len(missing_keys)}), unexpected {list(unexpected)[:5]} (of {len(unexpected)})"
            )
        provenance = Provenance(
            "+".join(present),
            "+".join(p.sha256 for _, p in present.values()),
            all(p.official for _, p in present.values()),
        )
    else:
        config = {**default_config, **arch_overrides()}
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(RANDOM_INIT_SEED)
            module = build(config)
        provenance = Provenance("random-init", state_sha256(module), False)
    module = module.to(device).eval()
    for p in module.parameters():
        p.requires_grad_(False)
    frozen = Frozen(module, provenance, config, time.perf_counter() - start)
    _CACHE[cache_key] = frozen
    return frozen


# ---- heads trained on frozen representations (GraphAny, RGVT, Node4All) -------------


R = TypeVar("R")


def frozen_representations(
    graph: GraphBundle,
    key: tuple[Any, ...],
    ctx: FitContext,
    compute: Callable[[], R],
    reuse: Callable[[R], bool] = lambda _: True,
) -> R:
    """The frozen encoder's representations of ``graph``'s nodes, computed once per graph and ``key`` (its cache).

    A fit that computes them reports ``embed_seconds`` and ``embeddings_cached: false``; a fit that finds them
    cached, and ``reuse`` accepts what is held, reports ``embeddings_cached: true``.
    """
    held = graph.cache.get(key)
    if held is not None and reuse(held):
        ctx.info["embeddings_cached"] = True
        return held
    t0 = time.perf_counter()
    graph.cache[key] = computed = compute()
    ctx.info.update(embed_seconds=time.perf_counter() - t0, embeddings_cached=False)
    return computed


SELECTION = ChoiceParam("selection", SELECTION_RULES)  # a setting, not searched: sweeps keep val_loss
CONSTANT_SPREAD = 1e-6  # probabilities that differ by less than this over all nodes are constant


def train_head(
    head: nn.Module,
    z: torch.Tensor,
    y: torch.Tensor,
    train: np.ndarray,
    val: np.ndarray,
    config: Config,
    ctx: FitContext,
) -> EpochSelection:
    """Full-batch training of ``head`` on frozen representations: the SDK's epoch loop under ``config["selection"]``.

    ``val_loss`` is NodeGround's protocol; ``val_accuracy`` is upstream's (RGVT,
    Node4All). Only the training rows are pushed through the head for the update
    and only the validation rows for the check, which gives the same numbers as
    upstream's full-graph passes at a fraction of the cost.
    """
    train_t = torch.as_tensor(train, dtype=torch.long, device=z.device)
    val_t = torch.as_tensor(val, dtype=torch.long, device=z.device)
    z_train, z_val = z[train_t], z[val_t]
    return train_epochs(
        head,
        make_optimizer(head.parameters(), config),
        lambda: head(z_train),
        lambda: head(z_val),
        y[train_t],
        y[val_t],
        config,
        ctx,
        rule=str(config["selection"]),
    )


def head_probabilities(head: nn.Module, z: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return torch.softmax(head.eval()(z), dim=1)


@dataclass
class HeadState:
    """What a fit of a frozen encoder with a trained head keeps: predict is the head on the nodes' representations."""

    head: nn.Module
    z: torch.Tensor  # the frozen representations of every node
    encoder: nn.Module  # the frozen encoder (kept for inspection)

    def probabilities(self) -> np.ndarray:
        return head_probabilities(self.head, self.z).float().cpu().numpy()

    def flags(self, best_epoch: int | None) -> dict[str, bool]:
        """``adaptation_flags`` of the head's probabilities over every node."""
        return adaptation_flags(head_probabilities(self.head, self.z), best_epoch)


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
