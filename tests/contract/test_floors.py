"""The version floors pyproject.toml promises are the tested ones: the Python that the README states and CI runs,
and a Typer range that has the private module the CLI imports."""

from __future__ import annotations

import os
import re
import sys
import tomllib
from pathlib import Path

import typer
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
#: CI's python3: Debian bookworm's 3.11 (.ci/run installs it). tomllib (contract/families.py) needs 3.11 too.
CI_PYTHON = (3, 11)
#: The first Typer with typer/_click, its vendored copy of Click 8.3.1 (fastapi/typer#1774, released in 0.26.0);
#: before it Typer depended on the click package. orchestrator/cli/main.py and errors.py import from it.
TYPER_CLICK_SINCE = Version("0.26.0")


def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_the_python_floor_is_ci_s_python():
    floor = ".".join(map(str, CI_PYTHON))
    config = project()
    assert config["project"]["requires-python"] == f">={floor}"
    assert config["tool"]["ruff"]["target-version"] == f"py{floor.replace('.', '')}"
    assert config["tool"]["mypy"]["python_version"] == floor
    assert "bookworm" in (REPO / ".ci" / "run").read_text()  # the machine CI_PYTHON stands for
    assert sys.version_info[:2] >= CI_PYTHON
    if os.environ.get("CI"):
        assert sys.version_info[:2] == CI_PYTHON, "CI runs the floor itself, so the floor is what is tested"


def test_the_readme_states_the_same_floor():
    stated = re.findall(r"Python (\d+\.\d+)\+", (REPO / "README.md").read_text())
    assert stated and set(stated) == {".".join(map(str, CI_PYTHON))}, stated


def test_the_typer_range_has_typer_click():
    (typer_requirement,) = [
        Requirement(r) for r in project()["project"]["dependencies"] if Requirement(r).name == "typer"
    ]
    floors = [Version(s.version) for s in typer_requirement.specifier if s.operator in (">=", "==", "~=")]
    assert floors and min(floors) >= TYPER_CLICK_SINCE, typer_requirement
    assert typer_requirement.specifier.contains(typer.__version__), (typer.__version__, typer_requirement)
    locked = re.search(r"^typer==(\S+)$", (REPO / "requirements.lock").read_text(), re.M)
    assert locked and typer_requirement.specifier.contains(locked.group(1)), typer_requirement
