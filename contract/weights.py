"""Pretrained weights as data: a catalog per family, one directory rule, a cached file digest.

Each GFM family lists its checkpoints in ``methods/<family>/weights.toml``
(``[[weights]]`` entries: id, model, version, url, license, description and
exactly one integrity field, ``INTEGRITY_FIELDS``: the file's ``sha256``; its
``git_blob_sha1``, for a plain Git object whose published id is all there is;
``sha256_from``, the URL of a revision-pinned JSON manifest whose ``sha256``
key is the file's digest, the form a Hugging Face release that verifies its
own checkpoint publishes; or ``sha256 = "unverified"`` with ``unverified_reason``
saying why no digest is known and what would verify the file). Weights are
never baked into images: they live in a directory
laid out like their upstream URLs without the scheme (the same layout as a
download mirror), mounted read-only into containers and named by
``NODEGROUND_WEIGHTS`` (default ``$NODEGROUND_CACHE/weights``) and inside
a container always at ``WEIGHTS_MOUNT``. The
orchestrator fetches into it (``orchestrator weights fetch``); a service
verifies on load (``methods.sdk.weights``). Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from contract.families import ROOT as METHODS_ROOT


class WeightsError(RuntimeError):
    """Weights missing, unknown, or failing verification."""


UNVERIFIED = "unverified"  # catalog sha256 of a file whose digest is not known (unverified_reason says why)
INTEGRITY_FIELDS = ("sha256", "git_blob_sha1", "sha256_from")
_HEX = {"sha256": re.compile(r"[0-9a-f]{64}"), "git_blob_sha1": re.compile(r"[0-9a-f]{40}")}


@dataclass(frozen=True)
class WeightsEntry:
    id: str
    model: str
    version: str
    url: str
    license: str
    sha256: str = ""
    description: str = ""
    git_blob_sha1: str = ""  # Git's object id of the file: sha1 of "blob <size>\0" + its bytes
    sha256_from: str = ""  # URL of a revision-pinned JSON manifest whose "sha256" key is this file's digest
    unverified_reason: str = ""  # with sha256 = "unverified": why no digest is known and what would verify it
    family: str = ""  # the family folder whose weights.toml lists it (set by load_weights_catalog)

    @property
    def relative_path(self) -> Path:
        return url_path(self.url)

    @property
    def integrity(self) -> tuple[str, str]:
        """(kind, value): the integrity field that is set and its value, or (``unverified``, the reason)."""
        if self.sha256 == UNVERIFIED:
            return UNVERIFIED, self.unverified_reason
        kind = next(k for k in INTEGRITY_FIELDS if getattr(self, k))
        return kind, getattr(self, kind)

    def problems(self) -> list[str]:
        """What makes the entry unusable as a catalog line (checked when the catalog loads)."""
        given = [k for k in INTEGRITY_FIELDS if getattr(self, k)]
        if len(given) != 1:
            named = ", ".join(given) or "none"
            return [f"names {len(given)} integrity fields ({named}); exactly one of {', '.join(INTEGRITY_FIELDS)}"]
        if self.sha256 == UNVERIFIED:
            return [] if self.unverified_reason.strip() else ['sha256 = "unverified" without unverified_reason']
        kind, value = self.integrity
        if kind in _HEX and not _HEX[kind].fullmatch(value):
            return [f"{kind} {value!r} is not {_HEX[kind].pattern} (lower-case hex)"]
        if kind == "sha256_from" and not value.startswith("https://"):
            return [f"sha256_from {value!r} is not an https URL"]
        return []


def url_path(url: str) -> Path:
    """Where a file of ``url`` lives in the weights directory (and in a mirror): the URL without its scheme."""
    parsed = urlparse(url)
    return Path(parsed.netloc) / parsed.path.lstrip("/")


def load_weights_catalog(root: Path = METHODS_ROOT) -> dict[str, WeightsEntry]:
    entries: dict[str, WeightsEntry] = {}
    for path in sorted(root.glob("*/weights.toml")):
        for item in tomllib.loads(path.read_text()).get("weights", []):
            try:
                entry = WeightsEntry(**item, family=path.parent.name)
            except TypeError as exc:
                raise WeightsError(f"{path}: weights entry {item.get('id', '?')!r}: {exc}") from None
            problems = entry.problems()
            if problems:
                raise WeightsError(f"{path}: weights {entry.id!r} {problems[0]}")
            if entry.id in entries:
                raise WeightsError(f"weights id {entry.id!r} is listed twice ({path})")
            entries[entry.id] = entry
    return entries


WEIGHTS_MOUNT = "/weights"  # where a container sees the weights directory (read-only); its NODEGROUND_WEIGHTS


def cache_dir() -> Path:
    """NodeGround's cache on this host (``NODEGROUND_CACHE``, default ``~/.cache/nodeground``): data files, the
    catalog lock and, unless ``NODEGROUND_WEIGHTS`` says otherwise, the weights."""
    return Path(os.environ.get("NODEGROUND_CACHE") or Path.home() / ".cache" / "nodeground")


def weights_dir() -> Path:
    """Where weights live: the one rule that `orchestrator weights`, `make weights`, `make up`, the compose and
    Swarm files and the services use."""
    explicit = os.environ.get("NODEGROUND_WEIGHTS")
    return Path(explicit) if explicit else cache_dir() / "weights"


_VERIFIED: dict[tuple[str, str, int, int], str] = {}  # (kind, path, size, mtime_ns) -> digest: hash each file once


def _digest(path: Path, kind: str) -> str:
    stat = path.stat()
    key = (kind, str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _VERIFIED:
        h = hashlib.sha256() if kind == "sha256" else hashlib.sha1(f"blob {stat.st_size}\0".encode())
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _VERIFIED[key] = h.hexdigest()
    return _VERIFIED[key]


def file_sha256(path: Path) -> str:
    return _digest(path, "sha256")


def git_blob_sha1(path: Path) -> str:
    """Git's object id of the file's bytes (what ``git hash-object`` prints)."""
    return _digest(path, "git_blob_sha1")


def manifest_sha256(manifest: Path) -> str:
    """The ``sha256`` a revision-pinned JSON manifest (``sha256_from``) records; WeightsError if it records none."""
    try:
        value = json.loads(manifest.read_text(encoding="utf-8")).get("sha256")
    except (OSError, ValueError, AttributeError) as exc:
        raise WeightsError(f"{manifest}: not a JSON object with a sha256 key ({type(exc).__name__})") from None
    if not isinstance(value, str) or not _HEX["sha256"].fullmatch(value):
        raise WeightsError(f"{manifest}: its sha256 {value!r} is not 64 lower-case hex digits")
    return value


@dataclass(frozen=True)
class Verdict:
    """How a local file stands against its catalog entry."""

    sha256: str  # the file's own sha256 (what records name)
    official: bool  # the catalog's file, verified by the entry's integrity field
    problem: str = ""  # why it is refused (a mismatch); empty when it verifies or is merely unverified


def verify_file(entry: WeightsEntry, path: Path, root: Path) -> Verdict:
    """Check ``path`` against ``entry`` by its integrity field; ``root`` holds a ``sha256_from`` manifest."""
    kind, value = entry.integrity
    digest = file_sha256(path)
    if kind == UNVERIFIED:
        return Verdict(digest, False)
    if kind == "sha256_from":
        manifest = root / url_path(value)
        if not manifest.is_file():
            return Verdict(digest, False, f"its manifest {value} is not at {manifest} (fetch the weights again)")
        value, actual = manifest_sha256(manifest), digest
    else:
        actual = digest if kind == "sha256" else git_blob_sha1(path)
    if actual != value:
        return Verdict(digest, False, f"{kind.replace('_from', '')} {actual}, catalog says {value}")
    return Verdict(digest, True)


if __name__ == "__main__":  # `python contract/weights.py`: print the weights directory (used by `make up`)
    print(weights_dir())
