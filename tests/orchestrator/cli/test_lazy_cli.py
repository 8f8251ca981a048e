"""`orchestrator --help` lists every command without importing any command's module (pandas, gRPC, loaders)."""

from __future__ import annotations

import subprocess
import sys

import typer
from typer.testing import CliRunner

from orchestrator.cli.main import COMMANDS, app, load_command
from tests.conftest import HANG_S

HEAVY = ("pandas", "grpc", "numpy", "torch", "sklearn", "scipy", "orchestrator.store", "orchestrator.sweep")


def test_each_listed_help_line_is_the_command_s_own():
    for name, (_, _, line) in COMMANDS.items():
        command = load_command(name)
        assert command.name == name and command.get_short_help_str(1000) == line, name


def test_help_and_a_mistyped_command_import_no_command_module():
    probe = (
        "import sys\nfrom orchestrator.cli.main import app\n"
        "for args in (['--help'], ['nope']):\n"
        "    try:\n        app(args, prog_name='orchestrator')\n    except SystemExit:\n        pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=HANG_S, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
    assert "No such command 'nope'" in out.stdout + out.stderr


def test_a_command_still_runs_through_the_lazy_group():
    result = CliRunner().invoke(app, ["methods", "list"])
    assert result.exit_code == 0 and "gnn" in result.output
    assert isinstance(typer.main.get_command(app), typer.core.TyperGroup)
