"""Every name a benchmark imports from this repository exists, including the imports inside its functions (which
run only under `make bench`): a moved test helper broke `make bench BENCH=scoring`, and the family layout's move
of GraphPFN's and G2T-FM's helpers broke `make bench BENCH=gfm`, while `make test` stayed green."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent
MODULES = sorted(p for p in BENCH.glob("*.py") if not p.name.startswith(("test_", "__")))
OURS = ("contract", "methods", "orchestrator", "tests")  # upstream code (gfm_upstream) is there only when asked for


def _exists(module: str, name: str) -> bool:
    try:
        return hasattr(importlib.import_module(module), name) or bool(importlib.import_module(f"{module}.{name}"))
    except ImportError:
        return False


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_every_name_a_benchmark_imports_exists(path: Path) -> None:
    imports = [
        (node.module, alias.name)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in OURS
        for alias in node.names
    ]
    missing = [f"{module}.{name}" for module, name in imports if not _exists(module, name)]
    assert not missing, f"{path.name} imports what does not exist: {missing}"
