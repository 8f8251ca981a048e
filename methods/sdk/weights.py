"""Loading pretrained weights in a service: verification against the catalog, a code-free ``torch.load``.

The catalog, the directory rule and the digest are the contract's (``contract.weights``);
a file whose sha256 differs from the catalog is refused here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract.settings import ALLOW_UNVERIFIED_WEIGHTS
from contract.weights import (
    UNVERIFIED,
    WeightsEntry,
    WeightsError,
    load_weights_catalog,
    verify_file,
    weights_dir,
)


@dataclass(frozen=True)
class ResolvedWeights:
    entry: WeightsEntry
    path: Path
    sha256: str
    official: bool  # the catalog's file, byte for byte


UNVERIFIED_ENV = ALLOW_UNVERIFIED_WEIGHTS.env


def unverified_allowed() -> bool:
    """Whether this process accepts ``unverified`` catalog entries (results from them are never official)."""
    return ALLOW_UNVERIFIED_WEIGHTS.read() == 1


def resolve(entry: WeightsEntry, root: Path | None = None, allow_unverified: bool = False) -> ResolvedWeights:
    """The verified local file of ``entry``; WeightsError if it is absent or was altered.

    The entry's integrity field decides (``contract.weights.verify_file``: sha256, Git
    blob id, or the sha256 of a pinned manifest). An entry whose catalog sha256 is
    ``"unverified"`` is refused unless ``allow_unverified``; then it resolves with
    ``official=False`` and the file's actual sha256, so results from it are never labeled official.
    """
    root = root or weights_dir()
    path = root / entry.relative_path
    if not path.is_file():
        raise WeightsError(
            f"weights {entry.id} not found at {path}; fetch them with `orchestrator weights fetch {entry.id}` "
            f"(or point NODEGROUND_WEIGHTS at a directory holding {entry.relative_path})"
        )
    verdict = verify_file(entry, path, root)
    if entry.sha256 == UNVERIFIED:
        if not allow_unverified:
            raise WeightsError(
                f'weights {entry.id} at {path} have no recorded digest in the catalog (sha256 = "unverified": '
                f"{entry.unverified_reason}); allow unverified weights explicitly with {UNVERIFIED_ENV}=1 "
                f"(results are then labeled non-official); file sha256 {verdict.sha256}"
            )
        return ResolvedWeights(entry, path, verdict.sha256, official=False)
    if verdict.problem:
        raise WeightsError(f"weights {entry.id} at {path} fail verification: {verdict.problem}")
    return ResolvedWeights(entry, path, verdict.sha256, official=True)


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
