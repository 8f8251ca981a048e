"""The dependency arrows hold: orchestrator -> contract <- methods, and the contract needs no torch.

A static scan of every import statement (the AST, so an import inside a function counts too).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: What the contract may import besides the standard library and itself.
CONTRACT_DEPENDENCIES = {"numpy", "grpc", "google"}
#: The orchestrator's readers of upstream dataset formats (PyG datasets, saved tensors) import torch
#: inside the function that converts such a file, once per dataset; nothing else may.
TORCH_READERS = {"orchestrator/data/loaders.py", "orchestrator/data/safe_pickle.py"}


def imports(path: Path) -> Iterator[tuple[str, int, bool]]:
    """(top-level module imported, line, at module level) for every absolute import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    nested = {
        id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            yield name.partition(".")[0], node.lineno, id(node) not in nested


def sources(package: str) -> list[Path]:
    found = sorted((REPO / package).rglob("*.py"))
    assert found, package
    return found


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(REPO)}:{line}"


def test_the_orchestrator_never_imports_methods_or_torch():
    wrong = []
    for path in sources("orchestrator"):
        rel = str(path.relative_to(REPO))
        for module, line, top in imports(path):
            if module == "methods":
                wrong.append(f"{where(path, line)} imports methods")
            elif module in ("torch", "torch_geometric") and (top or rel not in TORCH_READERS):
                wrong.append(f"{where(path, line)} imports {module}")
    assert not wrong, "the orchestrator reaches the methods only through the contract:\n" + "\n".join(wrong)


def test_the_contract_imports_only_numpy_grpc_and_protobuf():
    allowed = CONTRACT_DEPENDENCIES | {"contract", "__future__"} | set(sys.stdlib_module_names)
    wrong = [
        f"{where(path, line)} imports {module}"
        for path in sources("contract")
        for module, line, _ in imports(path)
        if module not in allowed
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("package", ["methods", "contract"])
def test_the_methods_and_the_contract_never_import_the_orchestrator(package):
    wrong = [
        f"{where(path, line)}"
        for path in sources(package)
        for module, line, _ in imports(path)
        if module == "orchestrator"
    ]
    assert not wrong, "\n".join(wrong)
