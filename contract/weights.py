"""Pretrained weights as data: a catalog per family, one directory rule, a cached file digest.

Each GFM family lists its checkpoints in ``methods/<family>/weights.toml``
(``[[weights]]`` entries: id, model, version, url, sha256, license,
description). Weights are never baked into images: they live in a directory
laid out like their upstream URLs without the scheme (the same layout as a
download mirror), mounted read-only into containers and named by
``NODEGROUND_WEIGHTS`` (default ``$NODEGROUND_CACHE/weights``). The
orchestrator fetches into it (``orchestrator weights fetch``); a service
verifies on load (``methods.sdk.weights``). Standard library only.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import tomllib

from contract.families import ROOT as METHODS_ROOT


class WeightsError(RuntimeError):
    """Weights missing, unknown, or failing verification."""


@dataclass(frozen=True)
class WeightsEntry:
    id: str
    model: str
    version: str
    url: str
    sha256: str
    license: str
    description: str = ""
    family: str = ""  # the family folder whose weights.toml lists it (set by load_weights_catalog)

    @property
    def relative_path(self) -> Path:
        parsed = urlparse(self.url)
        return Path(parsed.netloc) / parsed.path.lstrip("/")


def load_weights_catalog(root: Path = METHODS_ROOT) -> dict[str, WeightsEntry]:
    entries: dict[str, WeightsEntry] = {}
    for path in sorted(root.glob("*/weights.toml")):
        for item in tomllib.loads(path.read_text()).get("weights", []):
            entry = WeightsEntry(**item, family=path.parent.name)
            if entry.id in entries:
                raise WeightsError(f"weights id {entry.id!r} is listed twice ({path})")
            entries[entry.id] = entry
    return entries


def weights_dir() -> Path:
    """Where weights live: the one rule that `orchestrator weights`, `make weights`, `make up` and the services use."""
    explicit = os.environ.get("NODEGROUND_WEIGHTS")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("NODEGROUND_CACHE") or Path.home() / ".cache" / "nodeground"
    return Path(cache) / "weights"


_VERIFIED: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256: hash each file once


def file_sha256(path: Path) -> str:
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _VERIFIED:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _VERIFIED[key] = h.hexdigest()
    return _VERIFIED[key]


if __name__ == "__main__":  # `python contract/weights.py`: print the weights directory (used by `make up`)
    print(weights_dir())
