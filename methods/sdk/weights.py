"""Loading pretrained weights in a service: verification against the catalog, a code-free ``torch.load``.

The catalog, the directory rule and the digest are the contract's (``contract.weights``);
a file whose sha256 differs from the catalog is refused here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract.weights import WeightsEntry, WeightsError, file_sha256, load_weights_catalog, weights_dir


@dataclass(frozen=True)
class ResolvedWeights:
    entry: WeightsEntry
    path: Path
    sha256: str
    official: bool  # the catalog's file, byte for byte


UNVERIFIED = "unverified"  # catalog sha256 for a file whose digest could not be recorded yet
UNVERIFIED_ENV = "NODEGROUND_ALLOW_UNVERIFIED_WEIGHTS"


def unverified_allowed() -> bool:
    """Whether this process accepts ``unverified`` catalog entries (results from them are never official)."""
    return os.environ.get(UNVERIFIED_ENV, "") == "1"


def resolve(entry: WeightsEntry, root: Path | None = None, allow_unverified: bool = False) -> ResolvedWeights:
    """The verified local file of ``entry``; WeightsError if it is absent or was altered.

    An entry whose catalog sha256 is ``"unverified"`` is refused unless
    ``allow_unverified``; then it resolves with ``official=False`` and the file's
    actual sha256, so results from it are never labeled official.
    """
    root = root or weights_dir()
    path = root / entry.relative_path
    if not path.is_file():
        raise WeightsError(
            f"weights {entry.id} not found at {path}; fetch them with `orchestrator weights fetch {entry.id}` "
            f"(or point NODEGROUND_WEIGHTS at a directory holding {entry.relative_path})"
        )
    digest = file_sha256(path)
    if entry.sha256 == UNVERIFIED:
        if not allow_unverified:
            raise WeightsError(
                f'weights {entry.id} at {path} have no recorded sha256 in the catalog (sha256 = "unverified"); '
                f"record the upstream file's sha256 in the catalog, or allow unverified weights explicitly "
                f"(results are then labeled non-official); file sha256 {digest}"
            )
        return ResolvedWeights(entry, path, digest, official=False)
    if digest != entry.sha256:
        raise WeightsError(
            f"weights {entry.id} at {path} fail verification: sha256 {digest}, catalog says {entry.sha256}"
        )
    return ResolvedWeights(entry, path, digest, official=True)


def safe_torch_load(path: Path) -> Any:
    """``torch.load`` that never runs pickled code (tensors, dicts, lists, numbers, strings only).

    A checkpoint is a stranger's file even when its sha256 matches the catalog:
    the hash pins the bytes, it does not vouch for them. The error is one line.
    """
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # pickle.UnpicklingError and friends; torch's message spans many lines
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        reason = next((line for line in lines if "global" in line.lower()), lines[0] if lines else "")
        raise WeightsError(
            f"{Path(path).name}: cannot be loaded without running code it carries: {type(exc).__name__}: {reason}"
        ) from None


def weights_problems(
    ids: tuple[str, ...], allow_unverified: bool = False, allow_missing: bool = False
) -> dict[str, str]:
    """Why each of ``ids`` cannot be used now (empty: all verify). Cheap after the first call per file.

    ``allow_missing`` accepts a set of files that is absent as a whole (a method that
    can run without them, e.g. with random-init weights), never a partial set.
    """
    catalog = load_weights_catalog()
    unknown = [i for i in ids if i not in catalog]
    if unknown:
        return {i: f"weights id {i!r} is not in any methods/*/weights.toml" for i in unknown}
    root = weights_dir()
    if allow_missing and not any((root / catalog[i].relative_path).is_file() for i in ids):
        return {}
    problems: dict[str, str] = {}
    for weights_id in ids:
        try:
            resolve(catalog[weights_id], root, allow_unverified=allow_unverified)
        except WeightsError as exc:
            problems[weights_id] = str(exc)
    return problems
