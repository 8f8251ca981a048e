"""Helpers shared by the in-context GFM families (graphpfn, nodepfn, g2tfm).

* **Memory budget.** In-context attention is quadratic in the context; every
  fit estimates its peak working set *before* running and raises
  ``ResourceError`` (→ RESOURCE_EXHAUSTED → record status ``oom``) stating the
  estimate and the budget. The budget is ``NODEGROUND_MEMORY_BUDGET_BYTES``, or
  75% of the memory available on the device (free GPU memory, or RAM within the container's limit).
* **Frozen weights, loaded once per process.** A fit asks for a family's
  weights; the first call reads them from the mounted weights directory
  (verified by sha256, ``methods.sdk.weights.resolve``) and caches the frozen
  module for later fits. That one-time read is charged to the first fit of the
  process and reported as ``weights_load_seconds`` (0 on later fits); the
  download itself (``orchestrator weights fetch``) is never inside a fit.
* **Random-init weights.** With ``NODEGROUND_RANDOM_INIT_WEIGHTS=1`` a service
  whose official weights are absent builds the official structure with seeded
  random parameters instead (offline tests, smoke runs). Every fit reports
  ``weights_id``, ``weights_sha256`` (of the file, or of the random state_dict's
  bytes) and ``weights_official`` in ``ctx.info``; random weights are never
  reported as official. ``NODEGROUND_RANDOM_INIT_ARCH`` (JSON) may shrink the
  random structure for fast tests; it is ignored when real weights are used.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from contract.weights import WeightsError, load_weights_catalog
from methods.sdk.method import FitContext, Method, ResourceError, available_memory_bytes
from methods.sdk.weights import ResolvedWeights, resolve, safe_torch_load, weights_problems  # noqa: F401 (re-exported for the PFN families)

BUDGET_ENV = "NODEGROUND_MEMORY_BUDGET_BYTES"
RANDOM_ENV = "NODEGROUND_RANDOM_INIT_WEIGHTS"
ARCH_ENV = "NODEGROUND_RANDOM_INIT_ARCH"
UNVERIFIED_ENV = "NODEGROUND_ALLOW_UNVERIFIED_WEIGHTS"
DEFAULT_BUDGET_FRACTION = 0.75
RANDOM_INIT_SEED = 20260101  # fixed: the "random-init" weights are the same in every process


# ---- memory budget -----------------------------------------------------------


def memory_budget_bytes(device: torch.device) -> int:
    explicit = os.environ.get(BUDGET_ENV)
    if explicit:
        try:
            return int(float(explicit))
        except ValueError as exc:
            raise ValueError(f"{BUDGET_ENV}={explicit!r} is not a number of bytes") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        device = torch.device("cpu")
    return int(available_memory_bytes(device) * DEFAULT_BUDGET_FRACTION)


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def require_memory(method: str, estimate: dict[str, float], device: torch.device, ctx: FitContext | None = None) -> None:
    """Raise ResourceError when the summed estimate exceeds the budget; record both in ctx.info."""
    total = float(sum(estimate.values()))
    budget = memory_budget_bytes(device)
    if ctx is not None:
        ctx.info["memory_estimate_bytes"] = int(total)
        ctx.info["memory_budget_bytes"] = int(budget)
    if total > budget:
        parts = ", ".join(f"{k} {fmt_bytes(v)}" for k, v in estimate.items())
        raise ResourceError(
            f"{method}: in-context inference needs an estimated {fmt_bytes(total)} on {device.type} ({parts}), "
            f"over the memory budget of {fmt_bytes(budget)} (set by {BUDGET_ENV} or "
            f"{int(DEFAULT_BUDGET_FRACTION * 100)}% of available memory); refused before running"
        )


def attention_chunk(n_queries: int, n_keys: int, batch: int, heads: int, cap_bytes: int = 256 << 20) -> int:
    """Queries per chunk so that one chunk's score matrix (batch x heads x q x k floats) stays under cap."""
    per_query = max(1, batch * heads * n_keys * 4)
    return int(max(1, min(n_queries, cap_bytes // per_query)))


def chunked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk: int) -> torch.Tensor:
    """SDPA over query chunks; q (B, H, Lq, D), k/v (B, H, Lk, D). Queries never interact, so chunking is exact."""
    if q.shape[-2] <= chunk:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return torch.cat(
        [torch.nn.functional.scaled_dot_product_attention(q[..., s : s + chunk, :], k, v) for s in range(0, q.shape[-2], chunk)],
        dim=-2,
    )


def param_bytes(module: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters()) + sum(b.numel() * b.element_size() for b in module.buffers())


# ---- weights -------------------------------------------------------------------


@dataclass
class Frozen:
    """A frozen module and where its parameters came from."""

    module: nn.Module
    weights_id: str
    sha256: str
    official: bool
    config: dict[str, Any]
    load_seconds: float


_CACHE: dict[tuple[Any, ...], Frozen] = {}


def state_sha256(module: nn.Module) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def random_init_allowed() -> bool:
    return os.environ.get(RANDOM_ENV, "") == "1"


def arch_overrides() -> dict[str, Any]:
    raw = os.environ.get(ARCH_ENV, "")
    return json.loads(raw) if raw else {}


class FrozenGFM(Method):
    """An in-context GFM whose ``weights`` may be absent as a whole when random init is allowed."""

    @classmethod
    def weights_problems(cls) -> dict[str, str]:
        return weights_problems(cls.weights, allow_unverified=os.environ.get(UNVERIFIED_ENV, "") == "1", allow_missing=random_init_allowed())


def resolve_optional(weights_id: str) -> ResolvedWeights | None:
    """The verified weights file, or None when it is absent (and random init is allowed)."""
    catalog = load_weights_catalog()
    if weights_id not in catalog:
        raise WeightsError(f"weights id {weights_id!r} is not in any methods/*/weights.toml")
    try:
        return resolve(catalog[weights_id], allow_unverified=os.environ.get(UNVERIFIED_ENV, "") == "1")
    except WeightsError as exc:
        if "not found" in str(exc) and random_init_allowed():
            return None
        if "not found" in str(exc):
            raise WeightsError(f"{exc}; or set {RANDOM_ENV}=1 to run the official structure with random (non-official) weights") from exc
        raise


def load_frozen(
    key: str,
    weights_ids: tuple[str, ...],
    build: Callable[[dict[str, Any]], nn.Module],
    default_config: dict[str, Any],
    load_state: Callable[[dict[str, ResolvedWeights]], dict[str, Any]],
    device: torch.device,
) -> Frozen:
    """Build (or reuse) the frozen model: official files when present, else seeded random init.

    ``load_state(files)`` reads the verified files and returns ``{"config": ...,
    "state": ..., "allowed_missing": (...)}``: the structure config found in the
    checkpoint (overriding ``default_config``), the state_dict in our module's
    names, and key prefixes/suffixes that may legitimately be absent.
    """
    resolved = {wid: resolve_optional(wid) for wid in weights_ids}
    present = {wid: r for wid, r in resolved.items() if r is not None}
    if present and len(present) != len(resolved):
        missing = sorted(set(resolved) - set(present))
        raise WeightsError(f"{key}: weights {', '.join(missing)} missing while {', '.join(sorted(present))} are present; fetch all of them")
    official = bool(present) and all(r.official for r in present.values())
    cache_key = (key, str(device), tuple((wid, str(r.path), r.sha256) for wid, r in present.items()), json.dumps(arch_overrides(), sort_keys=True) if not present else "")
    if cache_key in _CACHE:
        cached = _CACHE[cache_key]
        return Frozen(cached.module, cached.weights_id, cached.sha256, cached.official, cached.config, 0.0)
    start = time.perf_counter()
    if present:
        loaded = load_state(present)
        config = {**default_config, **loaded.get("config", {})}
        module = build(config)
        missing_keys, unexpected = module.load_state_dict(loaded["state"], strict=False)
        allowed_missing = loaded.get("allowed_missing", ())
        missing_keys = [k for k in missing_keys if not any(k.startswith(p) or k.endswith(p) for p in allowed_missing)]
        if missing_keys or unexpected:
            raise WeightsError(
                f"{key}: checkpoint does not match the model structure: missing {missing_keys[:5]} (of {len(missing_keys)}), "
                f"unexpected {list(unexpected)[:5]} (of {len(unexpected)})"
            )
        sha = "+".join(r.sha256 for r in present.values())
        weights_id = "+".join(present)
    else:
        config = {**default_config, **arch_overrides()}
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(RANDOM_INIT_SEED)
            module = build(config)
        sha = state_sha256(module)
        weights_id = "random-init"
    module = module.to(device).eval()
    for p in module.parameters():
        p.requires_grad_(False)
    frozen = Frozen(module, weights_id, sha, official, config, time.perf_counter() - start)
    _CACHE[cache_key] = frozen
    return frozen


def report_weights(ctx: FitContext, frozen: Frozen) -> None:
    ctx.info["weights_id"] = frozen.weights_id
    ctx.info["weights_sha256"] = frozen.sha256
    ctx.info["weights_official"] = frozen.official
    ctx.info["weights_load_seconds"] = round(frozen.load_seconds, 4)


# ---- graph helpers -----------------------------------------------------------------


def edges_without_self_loops(edge_index: np.ndarray) -> np.ndarray:
    keep = edge_index[0] != edge_index[1]
    return edge_index[:, keep]


def uniform_rows(n: int, c: int) -> np.ndarray:
    return np.full((n, c), 1.0 / c, dtype=np.float32)


def finish_probs(probs: np.ndarray) -> np.ndarray:
    probs = np.nan_to_num(np.asarray(probs, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    probs = np.clip(probs, 0.0, None)
    s = probs.sum(axis=1, keepdims=True)
    bad = s[:, 0] <= 0
    probs[bad] = 1.0
    s[bad] = probs.shape[1]
    return (probs / s).astype(np.float32)
