"""A family imports only the SDK and its own modules: what families share lives in ``methods.sdk``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

METHODS = Path(__file__).resolve().parents[3] / "methods"
NOT_FAMILIES = {"sdk", "templates", "__pycache__"}
FAMILIES = sorted(
    p.name for p in METHODS.iterdir() if p.is_dir() and p.name not in NOT_FAMILIES and any(p.glob("*.py"))
)


def imported_methods_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a ``methods...`` module in ``path``, at any depth of the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolved against the family's own package
                found.append((node.lineno, "methods.<relative>" if node.level > 1 else f"methods.{path.parent.name}"))
            elif node.module:
                found.append((node.lineno, node.module))
    return [(line, name) for line, name in found if name == "methods" or name.startswith("methods.")]


def allowed(module: str, family: str) -> bool:
    return any(module == root or module.startswith(root + ".") for root in ("methods.sdk", f"methods.{family}"))


def test_every_python_family_is_checked():
    assert {"gnn", "graphtransformer", "graphany", "graphpfn", "gvt", "node4all", "nodepfn", "g2tfm"} <= set(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_family_imports_only_the_sdk_and_itself(family):
    strays = [
        f"{path.relative_to(METHODS.parent)}:{line}: {module}"
        for path in sorted((METHODS / family).rglob("*.py"))
        for line, module in imported_methods_modules(path)
        if not allowed(module, family)
    ]
    assert not strays, (
        f"methods/{family} imports outside methods.sdk and itself (move what is shared into the SDK): {strays}"
    )


def test_the_scan_sees_a_sibling_import(tmp_path):
    """The check can fail: an import of a sibling family, even inside a function, is found."""
    module = tmp_path / "gvt" / "method.py"
    module.parent.mkdir()
    module.write_text(
        "from methods.sdk import Method\n\ndef f():\n"
        "    from methods.graphpfn.common import x\n    import methods.gnn.model\n"
    )
    assert [m for _, m in imported_methods_modules(module) if not allowed(m, "gvt")] == [
        "methods.graphpfn.common",
        "methods.gnn.model",
    ]
