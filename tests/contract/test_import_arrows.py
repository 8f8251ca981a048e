"""The dependency arrows hold: orchestrator -> contract <- methods, the contract needs no torch, the public face
(nodeground) composes both and neither imports it, and only the report command and the face's comparison reach the
report (orchestrator.analysis); the rest reads the trial table's rules from orchestrator.trial_table.

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
#: The report, and the modules outside it that may import it: the command that writes it, the face's comparison.
REPORT = "orchestrator.analysis"
REPORT_READERS = {"orchestrator/cli/report.py", "nodeground/leaderboard.py"}


def imported_names(path: Path) -> Iterator[tuple[str, int, bool]]:
    """(dotted name imported, line, at module level) for every import in ``path``, relative ones resolved.

    ``from a.b import c`` yields ``a.b.c``: ``c`` may be a module (``from orchestrator import analysis``).
    """
    tree = ast.parse(path.read_text(), str(path))
    nested = {
        id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)
    }
    package = path.relative_to(REPO).parent.parts
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = [*package[: len(package) - node.level + 1], node.module] if node.level else [node.module]
            prefix = ".".join(part for part in base if part)
            names = [f"{prefix}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            yield name, node.lineno, id(node) not in nested


def imports(path: Path) -> Iterator[tuple[str, int, bool]]:
    """(top-level module imported, line, at module level) for every import in ``path``."""
    for name, line, top in imported_names(path):
        yield name.partition(".")[0], line, top


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


#: (room, what it never imports): the methods and the contract stand below the orchestrator, and every side below the
#: public face, which composes them.
BELOW = [("methods", "orchestrator"), ("contract", "orchestrator")] + [
    (room, "nodeground") for room in ("orchestrator", "methods", "contract")
]


@pytest.mark.parametrize(("package", "above"), BELOW)
def test_no_room_imports_one_above_it(package, above):
    wrong = [
        f"{where(path, line)}" for path in sources(package) for module, line, _ in imports(path) if module == above
    ]
    assert not wrong, f"{package} never imports {above}:\n" + "\n".join(wrong)


def test_only_the_report_command_and_the_faces_comparison_import_the_report():
    """The planner, `show`/`export`, sweeps, submissions, the reference, merges, estimates, Slurm, every CLI command
    but `report`, the rules package (orchestrator.trial_table) and the public face but its comparison never import
    orchestrator.analysis."""
    scanned = [
        path
        for path in [*sources("orchestrator"), *sources("nodeground")]
        if not path.relative_to(REPO).is_relative_to("orchestrator/analysis")
        and str(path.relative_to(REPO)) not in REPORT_READERS
    ]
    names = {str(path.relative_to(REPO)) for path in scanned}
    assert {"orchestrator/plan.py", "orchestrator/results.py", "orchestrator/merge.py", "orchestrator/price/model.py",
            "orchestrator/slurm.py", "orchestrator/trial_table/selection.py", "orchestrator/submission/bundle.py",
            "orchestrator/reference/compare.py", "orchestrator/sweep.py", "orchestrator/run_trial.py",
            "orchestrator/cli/export.py", "orchestrator/cli/run.py", "nodeground/inprocess.py"} <= names  # fmt: skip
    wrong = [
        f"{where(path, line)}: {path.read_text().splitlines()[line - 1].strip()}"
        for path in scanned
        for name, line, _ in imported_names(path)
        if name == REPORT or name.startswith(REPORT + ".")
    ]
    assert not wrong, (
        f"only {', '.join(sorted(REPORT_READERS))} import the report; shared rules live in orchestrator.trial_table:\n"
        + "\n".join(wrong)
    )
