"""Bad input ends in one clear line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import functools
import sqlite3
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from contract.space import ConfigError
from orchestrator.data.fetch import FetchError
from orchestrator.data.graph import GraphError
from orchestrator.data.loaders import LoaderError
from orchestrator.data.registry import DatasetError
from orchestrator.data.splits import SplitError
from orchestrator.data.user import UserDatasetError
from orchestrator.services.client import ServiceUnavailable
from orchestrator.services.directory import UnknownMethod
from orchestrator.store import StoreBusy

F = TypeVar("F", bound=Callable[..., Any])


class UserError(Exception):
    """Something the user can fix; the message says what."""


EXPECTED = (
    UserError,
    DatasetError,
    UnknownMethod,
    SplitError,
    GraphError,
    FetchError,
    LoaderError,
    UserDatasetError,
    ConfigError,
    ServiceUnavailable,
    StoreBusy,
    FileNotFoundError,
    sqlite3.DatabaseError,
    ValueError,
)


def user_errors(command: F) -> F:
    """Wrap a Typer command: expected errors print `error: ...` and exit 2; Ctrl-C exits 130."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except EXPECTED as exc:
            message = exc.args[0] if isinstance(exc, LookupError) and exc.args else str(exc)
            print(f"error: {message}", file=sys.stderr)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            print("interrupted: finished trials are stored; rerun the same command to resume", file=sys.stderr)
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]
