"""Reading a file whose path a user gives: a regular file only, and never more of it than a stated cap.

A path can name a FIFO (a read waits forever for a writer), a device (``/dev/zero`` and ``/dev/urandom`` never end),
a directory, or a sparse file of hundreds of GiB; each of those once hung a command or took the machine's memory.
So every such read opens the file without blocking, checks what it is and how large it is *before* reading a byte,
then reads at most ``limit`` bytes (one more byte than the cap is refused, in case the file grows meanwhile). A
refusal is one line (``FileRefused``, a ``UserError``) that names the path and what is wrong.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator
from typing import Any

from contract.errors import UserError

KIB, MIB = 1 << 10, 1 << 20
JSON_LIMIT = 16 * MIB  # a JSON file the tool reads (a submission, a registry, a manifest): far above any real one
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


class FileRefused(ValueError, UserError):
    """A path that is not a regular file, or a file larger than what may be read of it."""


def size_text(nbytes: float) -> str:
    """Bytes for a person: ``12.0 KiB``, ``3.4 GiB``."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:,.0f} {unit}" if unit == "bytes" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} TiB"  # pragma: no cover - the loop returns


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


@contextlib.contextmanager
def open_regular(path: str | os.PathLike[str], what: str, limit: int | None = None) -> Iterator[tuple[int, int]]:
    """The open descriptor of ``path`` and its size, once it is known to be a regular file of at most ``limit`` bytes.

    Opened without blocking (a FIFO's open then returns at once instead of waiting for a writer) and checked on the
    descriptor itself, so a name swapped for a FIFO after a check is caught too. ``what`` says what the file is for.
    """
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise FileRefused(f"{what} {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(f"{what} {path} is {_kind(info.st_mode)}, not a regular file")
        if limit is not None and info.st_size > limit:
            raise FileRefused(
                f"{what} {path} holds {size_text(info.st_size)}, more than the {size_text(limit)} it may hold"
            )
        os.set_blocking(fd, True)
        yield fd, info.st_size
    finally:
        os.close(fd)


def check_regular(path: str | os.PathLike[str], what: str, limit: int | None = None) -> int:
    """The size of ``path`` once it is known to be a regular file of at most ``limit`` bytes; FileRefused otherwise."""
    with open_regular(path, what, limit) as (_, size):
        return size


def read_bounded(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them; FileRefused otherwise."""
    with open_regular(path, what, limit) as (fd, _):
        chunks, total = [], 0
        while chunk := os.read(fd, min(MIB, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise FileRefused(f"{what} {path} grew past the {size_text(limit)} it may hold while being read")
    return b"".join(chunks)


def read_json(path: str | os.PathLike[str], what: str, limit: int = JSON_LIMIT) -> Any:
    """The JSON value in ``path`` (bounded as ``read_bounded``); FileRefused naming the file when it is not JSON."""
    data = read_bounded(path, limit, what)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FileRefused(f"{what} {path} is not valid JSON ({str(exc).splitlines()[0][:120]})") from None


_JSON_NAMES = {
    dict: "an object",
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "true or false",
    type(None): "null",
}
_MISSING: Any = object()


def json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words (``an array``, ``a string``)."""
    return _JSON_NAMES.get(type(value), type(value).__name__)


def json_object(value: Any, path: str | os.PathLike[str], what: str) -> dict[str, Any]:
    """``value`` when it is a JSON object; FileRefused saying what it is instead."""
    if not isinstance(value, dict):
        raise FileRefused(f"{what} {path} holds {json_kind(value)}, not an object")
    return value


def json_field(
    document: dict[str, Any],
    key: str,
    kinds: type | tuple[type, ...],
    path: str | os.PathLike[str],
    what: str,
    default: Any = _MISSING,
) -> Any:
    """``document[key]`` when it is of ``kinds`` (``default`` when absent, if given); FileRefused naming the field.

    A bool is not a number here (JSON tells them apart; Python's ``bool`` subclasses ``int``).
    """
    if key not in document:
        if default is not _MISSING:
            return default
        raise FileRefused(f"{what} {path} lacks the field {key!r}")
    value = document[key]
    allowed = kinds if isinstance(kinds, tuple) else (kinds,)
    if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
        wanted = " or ".join(dict.fromkeys(_JSON_NAMES.get(k, k.__name__) for k in allowed))
        raise FileRefused(f"{what} {path}: {key!r} is {json_kind(value)}, not {wanted}")
    return value
