"""Method families as data: each folder methods/<family>/ holds a manifest.toml and its code.

The orchestrator learns which family serves a method without importing any model
code: the manifest says the family's kind (and a GFM's pretraining graphs), and the
methods are read from the family's source as text. The folder's name is the family's
name, its Python module (methods.<family>), its image (nodeground/<family>) and its
compose, Swarm or Kubernetes service, so it is lowercase letters and digits only
(FAMILY_NAME: a Python identifier and a DNS label). A method is declared once, by its class
(``name = "gat"`` in a class body under methods/<family>/), so adding one is one
file; the service imports the same classes to host them (``methods.families``).
"""

from __future__ import annotations

import ast
import functools
import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The manifests are data beside the method code: read as files, never imported.
ROOT = Path(__file__).resolve().parents[1] / "methods"
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
    # Where the declaration comes from (manifest ``pretraining_basis``): the paper, the released checkpoints, a
    # vendor's claim; the overlap page shows it beside the graphs, so "none" reads as what it rests on.
    pretraining_basis: str = ""
    kind: str = "supervised"  # or "gfm"; every method of the family has it
    # Upstream pins the family's image does not follow: requirement name -> how and why
    # (manifest [dependencies.differs]); its build's `pip check` may report only these.
    differs: dict[str, str] = field(default_factory=dict)
    # Pretraining graphs per checkpoint: configuration key -> its value -> that checkpoint's graphs
    # (manifest [pretraining_by.<key>]); a family whose search chooses among checkpoints declares them so.
    pretraining_by: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    # What a trial's cost grows with (manifest [cost], per method [cost.<method>]): the cost prior, whose grammar
    # contract/cost.py reads and checks (``cost_prior``); empty: the generic prior.
    cost: dict[str, Any] = field(default_factory=dict)

    def pretrained_on(self, config: dict | None) -> tuple[str, ...]:
        """The pretraining graphs of the checkpoint ``config`` selects; all the family's if it cannot tell."""
        if not self.pretraining_by or config is None:
            return self.pretraining_graphs or ()
        graphs: list[str] = []
        for key, by_value in self.pretraining_by.items():
            value = config.get(key)
            graphs.extend(by_value.get(str(value), self.pretraining_graphs or ()) if value is not None else ())
        return tuple(dict.fromkeys(graphs))


def load_families(root: Path = ROOT) -> dict[str, Family]:
    families = {}
    for manifest in sorted(root.glob("*/manifest.toml")):
        family = load_family(manifest.parent)
        families[family.name] = family
    return families


def load_family(folder: Path) -> Family:
    """The family whose manifest is ``folder/manifest.toml`` (a service reads its own alone)."""
    manifest = folder / "manifest.toml"
    data = tomllib.loads(manifest.read_text())
    name = folder.name
    if data.get("family") != name or not FAMILY_NAME.fullmatch(name):
        raise ValueError(
            f"{manifest}: family {data.get('family')!r} must be its folder's name, 2-40 lowercase letters and digits"
        )
    graphs = data.get("pretraining_graphs")
    basis = data.get("pretraining_basis", "")
    if not isinstance(basis, str) or (basis and graphs is None):
        raise ValueError(f"{manifest}: pretraining_basis is a sentence beside pretraining_graphs")
    family = Family(
        name,
        f"nodeground/{name}",
        f"methods.{name}",
        declared_methods(folder),
        None if graphs is None else tuple(graphs),
        basis,
        data.get("kind", "supervised"),
        dict(data.get("dependencies", {}).get("differs", {})),
        {k: {v: tuple(g) for v, g in by.items()} for k, by in data.get("pretraining_by", {}).items()},
        dict(data.get("cost", {})),
    )
    undeclared = {g for by in family.pretraining_by.values() for gs in by.values() for g in gs} - set(graphs or ())
    if undeclared:
        raise ValueError(f"{manifest}: pretraining_by names {sorted(undeclared)}, which pretraining_graphs lacks")
    return family


def declared_methods(folder: Path) -> tuple[str, ...]:
    """The method names a family's source declares: every top-level class whose body sets ``name = "<literal>"``.

    Files in path order, classes in file order (the order `orchestrator methods list` shows).
    """
    names: list[str] = []
    for path in sorted(folder.rglob("*.py")):
        stat = path.stat()
        names.extend(_declared_in(str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(names)


@functools.lru_cache(maxsize=512)
def _declared_in(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """One file's method names (parsed once per version of the file)."""
    tree = ast.parse(Path(path).read_text(), filename=path)
    return tuple(
        name
        for node in tree.body
        if isinstance(node, ast.ClassDef) and node.bases and (name := _class_name_literal(node)) is not None
    )


def _class_name_literal(node: ast.ClassDef) -> str | None:
    """``name = "x"`` or ``name, version, ... = "x", ...`` in the class body."""
    for statement in node.body:
        if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
            continue
        target, value = statement.targets[0], statement.value
        pairs = (
            # a file we only read may unpack unevenly; scanning it must not raise
            zip(target.elts, value.elts, strict=False)
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
            else [(target, value)]
        )
        for left, right in pairs:
            if (
                isinstance(left, ast.Name)
                and left.id == "name"
                and isinstance(right, ast.Constant)
                and isinstance(right.value, str)
            ):
                return right.value
    return None


# A family's own Python dependencies (methods/<family>/requirements.txt: exact pins over the service
# runtime) are installed --no-deps into the family's image, and on a host into this folder of the
# virtual environment (`make install`), which a local service of the family puts first on its path.
REQUIREMENTS = "requirements.txt"


def family_site(name: str, prefix: str = sys.prefix) -> Path | None:
    """Where this environment holds the family's own dependencies; None when it has none installed apart."""
    site = Path(prefix) / "families" / name
    return site if site.is_dir() else None


def family_env(name: str, env: dict[str, str]) -> dict[str, str]:
    """``env`` for a local service process of ``name``: its own dependencies first on the import path."""
    site = family_site(name)
    if site is None:
        return env
    rest = env.get("PYTHONPATH", "")
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(site), rest) if p)}


def family_of(method: str, families: dict[str, Family]) -> Family | None:
    for family in families.values():
        if method in family.methods:
            return family
    return None
