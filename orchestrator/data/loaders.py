"""Loaders: turn a catalog entry's verified files into a canonical graph.

Each loader reuses the ecosystem's reader (PyG dataset classes) after our own
verified fetch has placed the raw files where that reader looks for them, so
the reader never downloads anything unverified.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.data.fetch import cache_dir, fetch
from orchestrator.data.graph import Graph, canonicalize


def _raw_files(entry: dict[str, Any], raw_dir: Path) -> None:
    for spec in entry["files"]:
        fetch(spec["url"], spec["sha256"], dest=raw_dir / Path(spec["url"]).name)


def load_planetoid(entry: dict[str, Any]) -> Graph:
    from torch_geometric.datasets import Planetoid

    name = entry["args"]["name"]
    root = cache_dir() / "pyg" / "planetoid"
    _raw_files(entry, root / name / "raw")
    data = Planetoid(str(root), name)[0]
    return canonicalize(entry["name"], data.x.numpy(), data.edge_index.numpy(), data.y.numpy())


LOADERS: dict[str, Callable[[dict[str, Any]], Graph]] = {
    "planetoid": load_planetoid,
}
