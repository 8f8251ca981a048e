"""Bad input ends in one clear line on stderr and a non-zero exit, never a traceback.

One handler for every command (``fail``, which the app's group ``orchestrator.cli.main.LazyGroup`` calls, and
``user_errors`` for a command called on its own): the errors ``EXPECTED`` names are something the user can fix and
print ``error: ...`` (every package's own such errors derive from ``contract.errors.UserError``);
a usage error (an unknown flag, ``--budget 1.5``) prints Typer's message on one line instead of its
usage box; anything else is a bug: one ``error:`` line naming the file the full traceback went to.
All of them exit 2; Ctrl-C exits 130. A reader that closes the pipe (``orchestrator reference show | head``) has
what it wanted: the command ends quietly with exit 1, as Click and Rich end their own writes to a closed pipe.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import os
import sqlite3
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer
from typer._click.exceptions import UsageError  # private to Typer: pyproject.toml pins its range

from contract.errors import UserError
from contract.weights import cache_dir

F = TypeVar("F", bound=Callable[..., Any])

EXIT_USAGE = 2  # bad input, or a bug reported in one line: nothing ran, or what ran is stored
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 1  # Click's and Rich's code for a closed pipe: one code, whichever wrote
_MAX_PATH_SHOWN = 160  # an OSError's path in the one line (a 5,000-character store path stays readable)


EXPECTED: tuple[type[BaseException], ...] = (
    UserError,  # the packages' errors a user can fix: a flag, a dataset, a store in use, a service not started, ...
    OSError,  # FileNotFoundError, PermissionError, a name too long, a full disk, ...
    sqlite3.DatabaseError,
    ValueError,
)


def _shown_path(path: object) -> str:
    text = str(path)
    return text if len(text) <= _MAX_PATH_SHOWN else f"{text[: _MAX_PATH_SHOWN // 2]}...{text[-_MAX_PATH_SHOWN // 2 :]}"


def message_of(exc: BaseException) -> str:
    """The one line an expected error prints (without the ``error: `` prefix)."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {_shown_path(exc.filename)}" if exc.filename is not None else ""
        return f"{exc.strerror}{where}"
    message = exc.args[0] if isinstance(exc, LookupError) and exc.args else str(exc)
    lines = str(message).strip().splitlines() or [type(exc).__name__]
    return lines[0] if len(lines) == 1 else f"{lines[0]} (+{len(lines) - 1} more lines)"


def crash_log(exc: BaseException) -> Path | None:
    """Write ``exc``'s traceback under the cache's ``logs/`` (else the temp directory); where it went."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    for folder in (cache_dir() / "logs", Path(tempfile.gettempdir())):
        path = folder / f"orchestrator-crash-{stamp}-{os.getpid()}.log"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text(f"orchestrator {' '.join(sys.argv[1:])}\n{text}")
        except OSError:
            continue
        return path
    return None


def fail(exc: BaseException) -> NoReturn:
    """Report ``exc`` in one line on stderr and exit (see the module docstring)."""
    if isinstance(exc, BrokenPipeError):
        # what is still buffered for the closed pipe would fail again at exit: it goes nowhere instead
        with contextlib.suppress(OSError, ValueError):  # ValueError: a stdout with no descriptor (tests)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        raise typer.Exit(EXIT_BROKEN_PIPE) from None
    if isinstance(exc, KeyboardInterrupt):
        print("interrupted: finished trials are stored; rerun the same command to resume", file=sys.stderr)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    if isinstance(exc, UsageError):
        print(f"error: {message_of(UserError(exc.format_message()))}", file=sys.stderr)
    elif isinstance(exc, EXPECTED):
        print(f"error: {message_of(exc)}", file=sys.stderr)
    else:
        log = crash_log(exc)
        where = f"the traceback is in {log}" if log else "no traceback could be written"
        print(f"error: unexpected {type(exc).__name__}: {message_of(exc)} ({where})", file=sys.stderr)
    raise typer.Exit(EXIT_USAGE) from None


def user_errors(command: F) -> F:
    """Wrap a Typer command in the one handler (also when it is called outside the app)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except (Exception, KeyboardInterrupt) as exc:
            fail(exc)

    return wrapper  # type: ignore[return-value]
