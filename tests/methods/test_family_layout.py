"""Every family has the scaffold's shape: ``method.py`` the service-facing methods, ``model.py`` the networks,
``__init__.py`` only re-exporting them, and no function longer than a screen (a long fit is named steps)."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest
from torch import nn

from contract.cost import prior_problems
from contract.families import load_families, load_family
from methods.families import method_classes

METHODS = Path(__file__).resolve().parents[2] / "methods"
FAMILIES = load_families()
# The longest function a family may hold, docstring included: NodePFN's fit, once 93 lines, is now its steps.
MAX_FUNCTION_LINES = 60


def layout_problems(folder: Path) -> list[str]:
    """What in ``folder`` departs from the shape, read from the source (nothing is imported)."""
    problems = [f"no {name}" for name in ("__init__.py", "method.py", "model.py") if not (folder / name).is_file()]
    if (folder / "manifest.toml").is_file():  # its cost prior, whose check the family's resource checks read
        problems += prior_problems(load_family(folder))
    if (folder / "__init__.py").is_file():
        problems += _reexport_problems(folder / "__init__.py", f"methods.{folder.name}")
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            modules += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            for module in (m for m in modules if m.startswith("methods.sdk.")):
                problems.append(
                    f"{path.name}:{node.lineno} imports {module}; a family imports the SDK's face, methods.sdk"
                )
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    where = f"{path.name}:{node.lineno} {node.name}"
                    problems.append(f"{where} is {lines} lines (at most {MAX_FUNCTION_LINES})")
    return problems


def _reexport_problems(init: Path, package: str) -> list[str]:
    """``__init__.py`` may hold a docstring, imports from the family's own modules and ``__all__`` naming them."""
    body = ast.parse(init.read_text()).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    imported: list[str] = []
    exported: list[str] | None = None
    problems = []
    for node in body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"{package}."):
            imported += [alias.asname or alias.name for alias in node.names]
        elif isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            exported = [e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)]
        else:
            problems.append(f"__init__.py:{node.lineno} does more than re-export (move it to method.py or model.py)")
    if exported is None or sorted(exported) != sorted(imported):
        problems.append(f"__init__.py: __all__ {exported} is not what it imports, {imported}")
    return problems


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_family_has_the_scaffolds_shape(family):
    assert layout_problems(METHODS / family) == []


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_methods_live_in_method_py_and_networks_in_model_py(family):
    """The service-facing classes are method.py's, re-exported by the package; every network is model.py's."""
    package = f"methods.{family}"
    classes = method_classes(FAMILIES[family])
    assert {c.__module__ for c in classes} == {f"{package}.method"}
    assert set(importlib.import_module(package).__all__) == {c.__name__ for c in classes}
    modules = [importlib.import_module(f"{package}.{p.stem}") for p in (METHODS / family).glob("*.py")]
    networks = {
        f"{module.__name__}.{name}"
        for module in modules
        for name, obj in vars(module).items()
        if inspect.isclass(obj) and issubclass(obj, nn.Module) and obj.__module__ == module.__name__
    }
    assert {n for n in networks if not n.startswith(f"{package}.model.")} == set()


def test_every_family_is_checked():
    assert {"gnn", "graphtransformer", "graphany", "graphpfn", "gvt", "node4all", "nodepfn", "g2tfm", "ephris"} <= set(
        FAMILIES
    )


def test_a_folder_of_methods_without_a_manifest_is_no_family():
    """The SDK, the scaffold's templates, and centroid: a Node.js method shipped as its own image (README)."""
    folders = {p.name for p in METHODS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders - set(FAMILIES) == {"sdk", "templates", "centroid"}
    assert (METHODS / "centroid" / "Dockerfile").is_file() and not list((METHODS / "centroid").glob("*.py"))


def test_the_scan_finds_each_departure(tmp_path):
    """The check can fail: the old layouts (a models.py, a class in __init__, an SDK module imported past its face, a
    93-line fit) are each reported."""
    folder = tmp_path / "oldfam"
    folder.mkdir()
    init = '"""Old."""\n\nfrom methods.oldfam.models import A\n\n\nclass B:\n    name = "b"\n'
    (folder / "__init__.py").write_text(init)
    long_fit = "from methods.sdk.memory import require_memory\n\n\ndef fit():\n" + "    x = 1\n" * 92
    (folder / "models.py").write_text(long_fit)
    assert layout_problems(folder) == [
        "no method.py",
        "no model.py",
        "__init__.py:6 does more than re-export (move it to method.py or model.py)",
        "__init__.py: __all__ None is not what it imports, ['A']",
        "models.py:1 imports methods.sdk.memory; a family imports the SDK's face, methods.sdk",
        f"models.py:4 fit is 93 lines (at most {MAX_FUNCTION_LINES})",
    ]


def test_the_scan_finds_a_malformed_cost_prior(tmp_path):
    """The family's resource checks and the price read its prior: a malformed one is a departure of the family."""
    folder = tmp_path / "badprior"
    folder.mkdir()
    init = '"""Bad prior."""\n\nfrom methods.badprior.method import M\n\n__all__ = ["M"]\n'
    (folder / "__init__.py").write_text(init)
    (folder / "method.py").write_text('class M(Method):\n    name = "m"\n')
    (folder / "model.py").write_text("")
    (folder / "manifest.toml").write_text('family = "badprior"\n[cost]\nmemory = { "arcs" = -1 }\n')
    assert layout_problems(folder) == [
        "methods/badprior/manifest.toml [cost]: the weight of 'arcs' must be a positive number, got -1"
    ]
