"""Method families as data: each folder methods/<family>/ holds a manifest.toml.

The orchestrator reads manifests to know which family serves a method without
importing any model code; the service imports the family's module to host it
(``methods.families.method_classes``).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

# The manifests are data beside the method code: read as files, never imported.
ROOT = Path(__file__).resolve().parents[1] / "methods"


@dataclass(frozen=True)
class Family:
    name: str
    image: str
    module: str
    methods: tuple[str, ...]
    # A GFM family's pretraining graphs (catalog names; empty: synthetic data only). Its results
    # on these graphs are not held out, and the report replaces them (pretraining-overlap audit).
    # None: a family that trains from scratch on each task declares nothing.
    pretraining_graphs: tuple[str, ...] | None = None
    kind: str = "supervised"  # or "gfm"; every method of the family has it


def load_families(root: Path = ROOT) -> dict[str, Family]:
    families = {}
    for manifest in sorted(root.glob("*/manifest.toml")):
        data = tomllib.loads(manifest.read_text())
        graphs = data.get("pretraining_graphs")
        family = Family(data["family"], data["image"], data["module"], tuple(data["methods"]),
                        None if graphs is None else tuple(graphs), data.get("kind", "supervised"))
        families[family.name] = family
    return families


def family_of(method: str, families: dict[str, Family]) -> Family | None:
    for family in families.values():
        if method in family.methods:
            return family
    return None

