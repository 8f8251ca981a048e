"""Every command's flags, generated: each invocation ends in its result or one `error:` line, never a traceback,
a usage box or an exception out of the CLI, and never an unexpected error (one the handler has to log).

Invocations run in process (Typer's CliRunner) in a sandbox a generated flag cannot leave: the working
directory, cache and weights are temporary, no subprocess can start (services, docker, sbatch), no socket
can connect (downloads), no service is dialled, and `methods new` writes under a temporary root.
The example count is fixed (EXAMPLES) so `make test` stays bounded.
"""

from __future__ import annotations

import pickle
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest
import typer.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer import _click
from typer.main import get_command
from typer.testing import CliRunner

from orchestrator.cli import methods as methods_cli
from orchestrator.cli.main import app
from orchestrator.services import client as client_module
from orchestrator.services.client import ServiceUnavailable
from tests.orchestrator.data.test_user_bombs import npz_bomb

EXAMPLES = 400
FUZZ = dict(
    deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)


def _leaves(command, path=()):
    """(words, click command) for every runnable command, sub-commands included (a lazy group's loaded by name)."""
    if not hasattr(command, "list_commands"):
        return [(path, command)]
    ctx = _click.Context(command)
    names = sorted(command.list_commands(ctx))
    return [leaf for name in names for leaf in _leaves(command.get_command(ctx, name), (*path, name))]


COMMANDS = _leaves(get_command(app))


def hostile_files(root: Path) -> list[str]:
    """Files a flag may name: a decompression bomb, complex and object arrays, a raw pickle, text, a directory."""
    root.mkdir(parents=True, exist_ok=True)
    npz_bomb(root / "bomb.npz")  # 1 GiB of float32 zeros declared, about 1 MiB on disk
    np.savez(root / "complex.npz", x=np.ones((4, 2), np.complex64), edge_index=np.zeros((2, 1), int), y=np.zeros(4))
    (root / "raw.pkl").write_bytes(pickle.dumps({"x": [1, 2]}))
    (root / "text.csv").write_text("a,b\n1,2\n")
    (root / "store.sqlite").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)  # a damaged store
    (root / "dir").mkdir(exist_ok=True)
    return [str(root / name) for name in ("bomb.npz", "complex.npz", "raw.pkl", "text.csv", "store.sqlite", "dir")]


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
HOSTILE = [
    "", " ", "-", "nan", "inf", "-inf", "-1", "0", "1.5", "1e20", "99999999999999999999", ",", ",,", "a,b",
    "=", "mlp=", "x=y:z", "10/10/80", "public", "0/3", "3/2", "1/0", "embedded", "docker", "csv", "parquet",
    "x" * 5000, "/proc/nonexistent/out", "/", "../..", "\u00e9\u6f22", "None", "true",
]  # fmt: skip


@st.composite
def invocations(draw, files: list[str]) -> list[str]:
    words, command = draw(st.sampled_from(COMMANDS))
    value = st.one_of(st.sampled_from(HOSTILE), st.sampled_from(files), TEXT)
    args = list(words)
    params = [p for p in command.params if p.name != "help"]
    for param in draw(st.lists(st.sampled_from(params), unique_by=lambda p: p.name, max_size=6)) if params else []:
        if getattr(param, "param_type_name", "") == "argument":
            args += [draw(value) for _ in range(max(1, param.nargs))]
        elif getattr(param, "is_flag", False):
            args.append(draw(st.sampled_from(param.opts + list(param.secondary_opts or []))))
        else:
            args += [draw(st.sampled_from(param.opts)), draw(value)]
    return args


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-fuzz")
    return root, hostile_files(root / "files")


def _refused(*args, **kwargs):
    raise OSError("no processes or connections under the CLI fuzz")


def _no_service(self, timeout):
    raise ServiceUnavailable(f"method service at {self.endpoint} did not become healthy (no services under the fuzz)")


def test_every_command_s_flags_end_in_one_line_never_a_traceback(sandbox, monkeypatch):
    root, files = sandbox
    monkeypatch.chdir(root)
    for name, value in (("NODEGROUND_CACHE", root / "cache"), ("NODEGROUND_WEIGHTS", root / "weights")):
        monkeypatch.setenv(name, str(value))
    monkeypatch.setenv("NODEGROUND_MIRROR", str(root / "mirror"))
    monkeypatch.setattr(subprocess.Popen, "__init__", _refused)
    monkeypatch.setattr(socket.socket, "connect", _refused)
    monkeypatch.setattr(socket, "create_connection", _refused)
    monkeypatch.setattr(client_module.MethodClient, "wait_healthy", _no_service)
    scaffold = methods_cli.scaffold
    monkeypatch.setattr(methods_cli, "scaffold", lambda name, _root, date=None: scaffold(name, root / "repo", date))
    command = get_command(app)  # built once: Typer's runner would rebuild the whole tree per invocation
    monkeypatch.setattr(typer.testing, "_get_command", lambda _app: command)
    outcomes: dict[int, int] = {}

    @settings(max_examples=EXAMPLES, **FUZZ)
    @given(invocations(files))
    def check(args):
        result = CliRunner().invoke(app, args)
        outcomes[result.exit_code] = outcomes.get(result.exit_code, 0) + 1
        shown = (args[:6], result.output[-800:], repr(result.exception))
        assert result.exception is None or isinstance(result.exception, SystemExit), shown
        assert "Traceback" not in result.output and "╭─" not in result.stderr, shown
        assert result.exit_code in (0, 1, 2), shown
        if result.exit_code == 2:
            errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
            assert len(errors) == 1 and result.stderr.strip().splitlines()[-1] == errors[0], shown
            assert not errors[0].startswith("error: unexpected "), shown

    check()
    print(f"{EXAMPLES} invocations over {len(COMMANDS)} commands; exit codes {dict(sorted(outcomes.items()))}")
