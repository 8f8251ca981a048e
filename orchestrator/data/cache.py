"""Canonical tensors cached by content, so that a second load is fast.

The key of a catalog task is a hash of everything that determines its
canonical graph: the canonical-form version, the loader, its arguments, and
the sha256 of every upstream file (catalog or lock). The cached file records
the graph's own content hash and is written atomically, only after a load
succeeded; a file that does not read back cleanly is ignored and replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.data.fetch import cache_dir, resolve_sha256
from orchestrator.data.graph import Graph

# The version of the canonical form and the loaders: bump it when either changes what a catalog task loads as,
# and every cache key and every catalog task's identity (its part of the trial keys) changes with it.
CANONICAL_VERSION = "nodeground-canonical-v1"
CATALOG_IDENTITY_PREFIX = "catalog:"  # a trial key's dataset part: this, or a content hash (user, synthetic)


def canonical_dir() -> Path:
    return cache_dir() / "canonical"


def entry_key(entry: dict[str, Any]) -> str | None:
    """Content key of a catalog entry; None while some file's hash is still unknown (first download)."""
    hashes = []
    for spec in entry.get("files", []):
        digest = resolve_sha256(spec["url"], spec["sha256"])
        if digest is None:
            return None
        hashes.append(digest)
    return _entry_digest(entry, hashes)


def catalog_identity(entry: dict[str, Any]) -> str:
    """A catalog task's identity in trial keys: what ``datasets/catalog.toml`` pins, so a plan needs no data.

    The canonical form's and loaders' version, the loader and its arguments, and every file's URL and
    sha256 as the catalog declares it. A file the catalog marks ``unverified`` contributes only its URL
    (its local lock may differ between machines; pin its hash in the catalog to pin the content). For a
    task whose files are all pinned this is its cache key.
    """
    return CATALOG_IDENTITY_PREFIX + _entry_digest(entry, [spec["sha256"] for spec in entry.get("files", [])])


def _entry_digest(entry: dict[str, Any], hashes: list[str]) -> str:
    files = [
        [spec["url"], digest, spec.get("path", ""), spec.get("extract", "")]
        for spec, digest in zip(entry.get("files", []), hashes, strict=True)
    ]
    identity = {
        "version": CANONICAL_VERSION,
        "name": entry["name"],
        "loader": entry["loader"],
        "args": entry.get("args", {}),
        "files": files,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def cache_path(key: str) -> Path:
    return canonical_dir() / f"{key}.npz"


def save_graph(graph: Graph, path: Path) -> None:
    """Write a graph atomically (temporary file, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, Any] = {
        "x": graph.x,
        "edge_index": graph.edge_index,
        "y": graph.y,
        "meta": np.frombuffer(
            json.dumps(
                {
                    "name": graph.name,
                    "num_classes": graph.num_classes,
                    "content_hash": graph.content_hash,
                    "public": len(graph.public_splits),
                }
            ).encode(),
            dtype=np.uint8,
        ),
    }
    for i, (train, val, test) in enumerate(graph.public_splits):
        arrays[f"public_{i}_train"], arrays[f"public_{i}_val"], arrays[f"public_{i}_test"] = train, val, test
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_content_hash(path: Path) -> str | None:
    """The content hash a cached graph recorded, without reading its tensors; None if unreadable."""
    try:
        with np.load(path) as raw:
            return str(json.loads(raw["meta"].tobytes().decode())["content_hash"])
    except Exception:
        return None


def read_shapes(path: Path) -> dict[str, tuple[int, ...]] | None:
    """The shapes of a cached graph's tensors (x, edge_index, y), from the array headers alone; None if unreadable."""
    try:
        with zipfile.ZipFile(path) as archive:
            shapes = {}
            for name in ("x", "edge_index", "y"):
                with archive.open(f"{name}.npy") as member:
                    version = np.lib.format.read_magic(member)
                    read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
                    shapes[name] = tuple(read[version](member)[0])
            return shapes
    except Exception:
        return None


def read_graph(path: Path, verify: bool = False) -> Graph | None:
    """The cached graph, or None if absent or unreadable (then it is reloaded and rewritten)."""
    if not path.exists():
        return None
    try:
        with np.load(path) as raw:
            meta = json.loads(raw["meta"].tobytes().decode())
            public = tuple(
                (raw[f"public_{i}_train"], raw[f"public_{i}_val"], raw[f"public_{i}_test"])
                for i in range(meta["public"])
            )
            graph = Graph(meta["name"], raw["x"], raw["edge_index"], raw["y"], int(meta["num_classes"]), public)
    except Exception:
        return None
    if verify and graph.content_hash != meta["content_hash"]:
        return None
    return graph
