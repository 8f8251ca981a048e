"""Dataset names -> canonical graphs: the built-in synthetic tasks plus the catalog."""

from __future__ import annotations

import difflib
import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any

from orchestrator.data.graph import Graph
from orchestrator.data.loaders import LOADERS
from orchestrator.data.synthetic import SYNTHETIC, load_synthetic

CATALOG_PATH = Path(__file__).resolve().parents[2] / "datasets" / "catalog.toml"


class DatasetError(LookupError):
    """Unknown dataset name."""


@lru_cache(maxsize=1)
def catalog() -> dict[str, dict[str, Any]]:
    """Catalog entries by lower-case name and alias."""
    entries: dict[str, dict[str, Any]] = {}
    for task in tomllib.loads(CATALOG_PATH.read_text())["task"]:
        for key in [task["name"], *task.get("aliases", [])]:
            entries[key.lower()] = task
    return entries


def known_names() -> list[str]:
    return sorted(set(SYNTHETIC) | {t["name"] for t in catalog().values()})


def resolve_name(name: str) -> str:
    """The canonical task name for a name or alias; DatasetError with suggestions otherwise."""
    key = name.strip().lower()
    if key in SYNTHETIC:
        return key
    if key in catalog():
        return catalog()[key]["name"]
    close = difflib.get_close_matches(key, sorted(set(known_names()) | set(catalog())), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known datasets: {', '.join(known_names())}"
    raise DatasetError(f"unknown dataset {name!r}{hint}")


def load_dataset(name: str) -> Graph:
    canonical = resolve_name(name)
    if canonical in SYNTHETIC:
        return load_synthetic(canonical)
    entry = catalog()[canonical]
    return LOADERS[entry["loader"]](entry)
