"""The version floors pyproject.toml promises are the tested ones: the Python that the README states and CI runs."""

from __future__ import annotations

import os
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: CI's python3: Debian bookworm's 3.11 (.ci/run installs it). tomllib (contract/families.py) needs 3.11 too.
CI_PYTHON = (3, 11)


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
