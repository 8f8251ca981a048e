"""Every package's errors a user can fix share one base, which the CLI turns into one `error:` line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import typer

from contract.errors import UserError
from contract.space import ConfigError
from orchestrator.cli.errors import EXIT_BROKEN_PIPE, EXIT_USAGE, fail
from orchestrator.data.fetch import FetchError
from orchestrator.data.graph import GraphError
from orchestrator.data.loaders import LoaderError
from orchestrator.data.registry import DatasetError
from orchestrator.data.splits import SplitError
from orchestrator.data.user import UserDatasetError
from orchestrator.services.client import ServiceUnavailable
from orchestrator.services.directory import UnknownMethod
from orchestrator.store import StoreBusy
from tests.conftest import HANG_S, TINY_SWEEP

# each with the base it had before the one base: `except ValueError` and the like still catch it
USER_ERRORS = [
    (ConfigError, ValueError),
    (FetchError, RuntimeError),
    (GraphError, ValueError),
    (LoaderError, RuntimeError),
    (DatasetError, LookupError),
    (SplitError, ValueError),
    (UserDatasetError, ValueError),
    (ServiceUnavailable, RuntimeError),
    (UnknownMethod, LookupError),
    (StoreBusy, RuntimeError),
]


@pytest.mark.parametrize(("error", "base"), USER_ERRORS, ids=lambda c: c.__name__)
def test_each_is_a_user_error_and_keeps_its_base(error, base):
    assert issubclass(error, UserError) and issubclass(error, base)


@pytest.mark.parametrize(("error", "base"), USER_ERRORS, ids=lambda c: c.__name__)
def test_the_cli_prints_its_message_in_one_line(error, base, capsys):
    with pytest.raises(typer.Exit) as exited:
        fail(error("what to fix\nand why"))
    assert exited.value.exit_code == EXIT_USAGE
    assert capsys.readouterr().err == "error: what to fix (+1 more lines)\n"


@pytest.mark.parametrize("command", [["reference", "show"], ["methods", "list"]], ids=["print", "rich"])
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(command):
    read, write = os.pipe()
    os.close(read)  # `| head` that has had its lines: every write now fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", *command], stdout=write, stderr=subprocess.PIPE, text=True,
            timeout=HANG_S,
        )  # fmt: skip
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (EXIT_BROKEN_PIPE, "")


def test_sigterm_stops_a_run_as_ctrl_c_does_even_where_ctrl_c_is_ignored(tmp_path):
    """A script's background job ignores SIGINT (its shell sets it aside), so `kill` (SIGTERM) is how it is stopped:
    the trials finished so far stay stored, the services close, and the run says how to resume (exit 130)."""
    import signal
    import sqlite3

    from tests.conftest import wait_for

    store = tmp_path / "r.sqlite"
    command = [
        sys.executable,
        "-m",
        "orchestrator",
        "run",
        *TINY_SWEEP,
        "--budget",
        "200",
        "--parallel",
        "1",
        "--services",
        "embedded",
        "--no-warmup",
        "--store",
        str(store),
    ]

    def stored() -> int:
        try:
            with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
                return int(db.execute("SELECT count(*) FROM trials").fetchone()[0])
        except sqlite3.Error:
            return 0

    def as_a_background_job() -> None:  # `cmd &` in a script: the shell sets SIGINT aside
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    run = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=as_a_background_job
    )
    try:
        wait_for(lambda: stored() >= 1 or run.poll() is not None, "the first stored trial")
        run.send_signal(signal.SIGINT)  # ignored, as in a script's background job
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=HANG_S)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 130, err
    assert "interrupted: finished trials are stored; rerun the same command to resume" in err
    assert 1 <= stored() < 200
