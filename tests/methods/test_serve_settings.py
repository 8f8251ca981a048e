"""Every setting a service reads is parsed once, at start-up: a bad one (a flag or its variable) ends in one `error:`
line naming it and the accepted range, and exit 2, before anything is served."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from contract.settings import SERVICE_LIMITS, SERVICE_SETTINGS
from methods.serve import PORT, main
from tests.conftest import HANG_S, REPO

BAD = ("abc", "-1", "1e99")
BY_ENV = [(s.env, s.expected()) for s in SERVICE_SETTINGS]
BY_FLAG = [(s.flag, s.expected()) for s in (PORT, *SERVICE_LIMITS)]


def served_check(capsys, argv: list[str]) -> tuple[int, list[str]]:
    """``methods.serve`` run in this process with ``--check`` (a setting it accepts loads the family and exits 0):
    its exit code and its stderr's lines."""
    try:
        code = main(["--family", "gnn", "--check", *argv])
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("raw", BAD)
@pytest.mark.parametrize(("name", "expected"), BY_ENV + BY_FLAG)
def test_a_bad_setting_is_one_line_naming_it_and_its_range_and_exit_2(monkeypatch, capsys, name, expected, raw):
    if name.startswith("--"):
        code, lines = served_check(capsys, [name, raw])
    else:
        monkeypatch.setenv(name, raw)
        code, lines = served_check(capsys, [])
    assert code == 2 and len(lines) == 1, lines
    assert lines[0] == f"error: {name}={raw!r}: must be {expected}"


def test_a_bad_setting_stops_the_real_command_in_one_line():
    """The issue's case: `NODEGROUND_MAX_MODELS=abc python -m methods.serve --family gnn --port 0` (was: a traceback
    and exit 1; `-1` was served)."""
    for raw in BAD:
        result = subprocess.run(
            [sys.executable, "-m", "methods.serve", "--family", "gnn", "--port", "0"], capture_output=True, text=True,
            cwd=REPO, timeout=HANG_S, env={**os.environ, "NODEGROUND_MAX_MODELS": raw},
        )  # fmt: skip
        assert result.returncode == 2 and result.stderr.strip().splitlines() == [
            f"error: NODEGROUND_MAX_MODELS={raw!r}: must be an integer in [1, 1000000]"
        ]


def test_a_device_the_service_cannot_name_is_refused_at_start_up(monkeypatch, capsys):
    monkeypatch.setenv("NODEGROUND_DEVICE", "gpu7")
    assert served_check(capsys, []) == (
        2,
        ["error: NODEGROUND_DEVICE='gpu7': must be a torch device such as cpu or cuda:0"],
    )


def test_good_settings_pass_and_a_usage_error_is_one_line_too(monkeypatch, capsys):
    monkeypatch.setenv("NODEGROUND_MAX_MODELS", "8")
    code, lines = served_check(capsys, ["--max-upload-bytes", "8e9", "--upload-idle-seconds", "0.5"])
    assert code == 0
    code, lines = served_check(capsys, ["--no-such-flag"])
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: unrecognized arguments")


@pytest.mark.parametrize("host", ["999.1.1.1", "256.0.0.1", "not a host", "bad-.example"])
def test_a_host_no_service_can_bind_is_one_line(capsys, host):
    """Finding 16: `methods.serve --host 999.1.1.1` printed a 25-line traceback."""
    try:
        code = main(["--family", "gnn", "--host", host])
    except SystemExit as exit_:
        code = exit_.code
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: --host {host!r} is neither an IP address")


def test_a_port_in_use_is_refused_not_shared(tmp_path):
    """Finding 9: with gRPC's SO_REUSEPORT on, a second service bound a port in use and took two thirds of new
    connections (a stale service of an older checkout would serve part of a sweep)."""
    from methods.sdk.service import MethodServicer, build_server
    from tests.orchestrator.test_sweep_engine import QuickMLP

    server, port = build_server(MethodServicer("test", [QuickMLP]), "127.0.0.1:0")
    server.start()
    try:
        with pytest.raises(OSError, match=rf"could not bind 127.0.0.1:{port}: the port is in use"):
            build_server(MethodServicer("test", [QuickMLP]), f"127.0.0.1:{port}")
        done = subprocess.run(
            [sys.executable, "-m", "methods.serve", "--family", "gnn", "--port", str(port)], capture_output=True,
            text=True, cwd=REPO, timeout=HANG_S,
        )  # fmt: skip
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.strip().splitlines()[-1] == (
            f"error: could not bind 127.0.0.1:{port}: the port is in use, or the address is not this host's"
        )
    finally:
        server.stop(0)
