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
from tests.conftest import HANG_S

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
