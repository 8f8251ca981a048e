"""Method families as data: each folder methods/<family>/ holds a manifest.toml.

The orchestrator reads manifests to know which family serves a method without
importing any model code; the service imports the family's module to host it.
The folder's name is the family's name, its Python module (methods.<family>), its
image (nodeground/<family>) and its compose, Swarm or Kubernetes service, so it is
lowercase letters and digits only (FAMILY_NAME: a Python identifier and a DNS label).
"""

from __future__ import annotations

import importlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
FAMILY_NAME = re.compile(r"[a-z][a-z0-9]{1,39}")


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
        name = manifest.parent.name
        if data["family"] != name or not FAMILY_NAME.fullmatch(name):
            raise ValueError(f"{manifest}: family {data['family']!r} must be its folder's name, 2-40 lowercase letters and digits")
        graphs = data.get("pretraining_graphs")
        family = Family(name, f"nodeground/{name}", f"methods.{name}", tuple(data["methods"]),
                        None if graphs is None else tuple(graphs), data.get("kind", "supervised"))
        families[family.name] = family
    return families


def family_of(method: str, families: dict[str, Family]) -> Family | None:
    for family in families.values():
        if method in family.methods:
            return family
    return None


def method_classes(family: Family) -> list:
    """Import the family's module and return its METHODS, checked against the manifest."""
    module = importlib.import_module(family.module)
    classes = list(module.METHODS)
    names = tuple(m.name for m in classes)
    if names != family.methods:
        raise RuntimeError(f"family {family.name}: manifest lists {family.methods} but {family.module} defines {names}")
    kinds = {m.name: m.kind for m in classes if m.kind != family.kind}
    if kinds:
        raise RuntimeError(f"family {family.name}: manifest says kind {family.kind!r} but {family.module} has {kinds}")
    return classes
