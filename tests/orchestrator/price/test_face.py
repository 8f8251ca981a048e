"""The price package keeps a stated face: outside it, code imports ``orchestrator.price`` and only the names its
``__all__`` lists; inside it, each module imports only the modules above it; no module outgrows a reading."""

from __future__ import annotations

from pathlib import Path

import orchestrator.price as price
from tests.contract.test_import_arrows import REPO, imported_names, where

PACKAGE = REPO / "orchestrator" / "price"
#: The package's modules, each importing only those before it (the order the package docstring gives).
ORDER = ("sizes", "model", "records", "cells", "backtest", "probe")
MAX_LINES = 700


def outside_sources() -> list[Path]:
    roots = ("orchestrator", "nodeground", "methods", "contract", "docker", "tests")
    return [p for root in roots for p in sorted((REPO / root).rglob("*.py")) if not p.is_relative_to(PACKAGE)]


def test_outside_the_package_only_its_face_is_imported():
    wrong = []
    for path in outside_sources():
        for name, line, _ in imported_names(path):
            if not name.startswith("orchestrator.price."):
                continue
            attribute = name.removeprefix("orchestrator.price.")
            if attribute not in price.__all__:
                wrong.append(f"{where(path, line)} imports {name}")
    assert not wrong, "import the price from orchestrator.price, names of its __all__ only:\n" + "\n".join(wrong)


def test_the_face_names_public_things_that_exist():
    assert all(not name.startswith("_") and hasattr(price, name) for name in price.__all__)
    assert len(set(price.__all__)) == len(price.__all__)


def test_each_module_imports_only_the_modules_above_it():
    assert sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__") == sorted(ORDER)
    wrong = []
    for index, module in enumerate(ORDER):
        path = PACKAGE / f"{module}.py"
        for name, line, _ in imported_names(path):
            if name.startswith("orchestrator.price."):
                used = name.removeprefix("orchestrator.price.").partition(".")[0]
                if used not in ORDER[:index]:
                    wrong.append(f"{where(path, line)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_no_module_of_the_package_is_over_700_lines():
    long = {p.name: n for p in PACKAGE.glob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long
