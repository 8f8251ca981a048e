"""`orchestrator methods new`: the scaffold passes the project's lint unchanged, whatever the family's name."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from tests.conftest import HANG_S

REPO = Path(__file__).resolve().parents[3]
# Names that sort before and after "sdk" (the SDK import's place among the family's own), and the longest allowed.
NAMES = ("ab", "mymethod", "zeta9", "z" * 40)


def _lint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=HANG_S)


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tree with the project's lint configuration and one scaffolded family per name, written by the command."""
    root = tmp_path_factory.mktemp("tree")
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    for name in NAMES:
        result = CliRunner().invoke(app, ["methods", "new", name, "--root", str(root)])
        assert result.exit_code == 0, result.output
    return root


def test_the_scaffold_passes_ruff_check_and_format_unchanged(scaffolded):
    checked = _lint("ruff", "check", "methods", cwd=scaffolded)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    formatted = _lint("ruff", "format", "--check", "methods", cwd=scaffolded)
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    read = int(formatted.stdout.split(" files already formatted")[0].split()[-1])
    assert read >= 3 * len(NAMES), formatted.stdout  # every module of every family was read (and its README)


def test_the_scaffold_passes_mypy_on_its_own_code(scaffolded):
    """The family's own annotations as `make lint`'s mypy reads them (torch and the SDK not followed: seconds)."""
    typed = _lint(
        "mypy", "--follow-imports=skip", "--ignore-missing-imports", "--check-untyped-defs", "--no-incremental",
        "methods", cwd=scaffolded,
    )  # fmt: skip
    assert typed.returncode == 0, typed.stdout + typed.stderr


def test_the_lint_catches_what_the_old_templates_wrote(scaffolded, tmp_path):
    """The check can fail: the old __init__ docstring (E501 for any name) and the import order for names after
    "sdk" (I001) are each found."""
    family = tmp_path / "methods" / "zeta9"
    shutil.copytree(scaffolded / "methods" / "zeta9", family)
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    init = family / "__init__.py"
    old = '"""Method family "zeta9" (scaffolded by `orchestrator methods new zeta9`): its methods are the classes in '
    old += 'this folder that set `name`."""'
    init.write_text(old + "\n\n" + init.read_text().split('"""', 2)[2].lstrip())
    method = family / "method.py"
    text = method.read_text()
    own = next(line for line in text.splitlines() if line.startswith("from .model import"))
    text = text.replace(own + "\n", "").replace(
        "from methods.sdk import", "from methods.zeta9.model import LogisticRegression\nfrom methods.sdk import"
    )
    method.write_text(text)
    found = _lint("ruff", "check", "--output-format", "concise", "methods", cwd=tmp_path).stdout
    assert "__init__.py:1:121: E501" in found and "method.py" in found and "I001" in found, found


def test_new_refuses_a_template_whose_cost_prior_is_malformed(tmp_path, monkeypatch):
    """`methods new` reads the prior it wrote (contract.cost): a malformed one is said at once, not at a first fit."""
    import orchestrator.cli.methods as methods_cli

    templates = tmp_path / "templates"
    shutil.copytree(methods_cli.TEMPLATES, templates)
    manifest = templates / "manifest.toml.tmpl"
    manifest.write_text(manifest.read_text().replace('"arcs" = 40', '"arcs" = 0'))
    monkeypatch.setattr(methods_cli, "TEMPLATES", templates)
    result = CliRunner().invoke(app, ["methods", "new", "zeta7", "--root", str(tmp_path / "repo")])
    assert result.exit_code == 2, result.output  # a user error
    assert "methods/zeta7/manifest.toml: its cost prior is malformed" in result.output
