"""Submission bundles: what `orchestrator submit` writes and `orchestrator report` can merge.

A bundle is a directory::

    trials.sqlite     the run store (table ``trials``, every row origin "user:<id>")
    submission.json   id, image (name, id digest, repo digests, labels), the image's
                      Describe output, hardware, the exact command, the sandbox
                      limits that applied, the protocol (datasets, regimes, splits, budget)
    SHA256SUMS        sha256 of each file above
    CHECKSUM          sha256 of SHA256SUMS: the bundle's checksum

and nothing else. A bundle is read only from the files its seal names (``sealed``): any other entry beside them
refuses it (SQLite would read a ``trials.sqlite-wal`` or ``-journal`` placed there as part of the store, and the
seal does not cover it), every file is read as a regular file of bounded size (``contract.files``), and the store
is copied into a private directory while it is hashed and opened from that copy, immutable: what is read is
exactly what was checked. ``verify_bundle`` checks the seal; ``load_bundle`` returns the trials table typed as
``orchestrator.trial_table.load`` types it; ``merge_trials`` appends bundles to a built-in table (user rows are never
imputed: the analysis keys that on ``origin``), refusing a method named like another (``orchestrator.names``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from contract.files import KIB, FileRefused, json_object, open_regular, read_bounded
from orchestrator.data.fetch import sha256_of
from orchestrator.names import same_name
from orchestrator.trial_table.load import complete_columns, load_trials

TRIALS = "trials.sqlite"
SUBMISSION = "submission.json"
SUMS = "SHA256SUMS"
CHECKSUM = "CHECKSUM"
CONTENT = (TRIALS, SUBMISSION)
SEALED = (*CONTENT, SUMS, CHECKSUM)  # every entry a bundle may hold
SEAL_LIMIT = 4 * KIB  # SHA256SUMS and CHECKSUM: a few lines
SUBMISSION_LIMIT = 16 << 20  # submission.json: the image's Describe and labels, a few KiB
_DIGEST = re.compile(r"[0-9a-f]{64}")


class BundleError(ValueError):
    """A bundle is incomplete, altered, or would clash with the results it is merged into."""


def finalize_store(path: Path) -> None:
    """Fold the WAL into the database file so that the file alone is the store (and hashes stably)."""
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("PRAGMA journal_mode=DELETE")
    finally:
        db.close()


def seal(bundle: Path) -> str:
    """Write SHA256SUMS and CHECKSUM; return the bundle checksum."""
    lines = "".join(f"{sha256_of(bundle / name)}  {name}\n" for name in CONTENT)
    (bundle / SUMS).write_text(lines)
    checksum = hashlib.sha256(lines.encode()).hexdigest()
    (bundle / CHECKSUM).write_text(checksum + "\n")
    return checksum


@dataclass(frozen=True)
class Sealed:
    """A bundle's sealed content: its checksum, its submission, and a private copy of its store (valid inside
    ``sealed``, to be opened ``immutable``)."""

    bundle: Path
    checksum: str
    submission: dict[str, Any]
    trials: Path


@contextlib.contextmanager
def sealed(bundle: Path) -> Iterator[Sealed]:
    """The bundle's content, read only from the files its seal names and checked against it; BundleError otherwise.

    The store is copied (and hashed as it is copied) into a private directory removed on exit.
    """
    bundle = Path(bundle)
    if not bundle.is_dir():
        raise BundleError(f"{bundle} is not a submission bundle (a directory holding {', '.join(SEALED)})")
    entries = sorted(entry.name for entry in bundle.iterdir())
    missing = [name for name in SEALED if name not in entries]
    if missing:
        raise BundleError(f"{bundle} is not a complete submission bundle: missing {', '.join(missing)}")
    extra = [name for name in entries if name not in SEALED]
    if extra:
        shown = ", ".join(extra[:5]) + (f" and {len(extra) - 5} more" if len(extra) > 5 else "")
        raise BundleError(
            f"{bundle} holds {shown} beside its sealed files; a bundle is read only from what its seal names (a "
            "-wal or -journal file beside trials.sqlite would change the store unseen): remove them"
        )
    checksum, listed = _seal_of(bundle)
    submission = _read_submission(bundle, listed[SUBMISSION])
    with tempfile.TemporaryDirectory(prefix="nodeground-bundle-") as private:
        copy = Path(private) / TRIALS
        if _copy_hashing(bundle / TRIALS, copy) != listed[TRIALS]:
            raise BundleError(f"{bundle}: {TRIALS} was changed after the bundle was sealed (checksum mismatch)")
        copy.chmod(0o400)
        yield Sealed(bundle, checksum, submission, copy)


def _seal_of(bundle: Path) -> tuple[str, dict[str, str]]:
    """(the checksum, each sealed file's digest), the seal's two files checked against each other."""
    try:
        lines = read_bounded(bundle / SUMS, SEAL_LIMIT, f"the bundle's {SUMS}").decode("ascii")
        checksum = read_bounded(bundle / CHECKSUM, SEAL_LIMIT, f"the bundle's {CHECKSUM}").decode("ascii").strip()
    except FileRefused as exc:
        raise BundleError(str(exc)) from None
    except UnicodeDecodeError:
        raise BundleError(f"{bundle}: {SUMS} or {CHECKSUM} is not text") from None
    if hashlib.sha256(lines.encode()).hexdigest() != checksum:
        raise BundleError(f"{bundle}: SHA256SUMS does not match CHECKSUM")
    listed = {}
    for line in lines.splitlines():
        digest, _, name = line.partition("  ")
        listed[name] = digest
    if set(listed) != set(CONTENT) or not all(_DIGEST.fullmatch(d) for d in listed.values()):
        raise BundleError(
            f"{bundle}: SHA256SUMS lists {sorted(listed)[:5]}, expected a sha256 of each of {sorted(CONTENT)}"
        )
    return checksum, listed


def _read_submission(bundle: Path, digest: str) -> dict[str, Any]:
    """submission.json, hashed from the very bytes parsed: a JSON object, else BundleError."""
    try:
        data = read_bounded(bundle / SUBMISSION, SUBMISSION_LIMIT, f"the bundle's {SUBMISSION}")
    except FileRefused as exc:
        raise BundleError(str(exc)) from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise BundleError(f"{bundle}: {SUBMISSION} was changed after the bundle was sealed (checksum mismatch)")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BundleError(f"{bundle}: {SUBMISSION} is not a JSON object ({str(exc).splitlines()[0][:120]})") from None
    try:
        return json_object(document, bundle / SUBMISSION, "the bundle's submission")
    except FileRefused as exc:
        raise BundleError(str(exc)) from None


def _copy_hashing(source: Path, target: Path) -> str:
    """Copy the regular file ``source`` to ``target`` (created here, private) and return the sha256 of what was
    copied: the copy holds exactly the bytes hashed."""
    digest = hashlib.sha256()
    try:
        with open_regular(source, "the bundle's store") as (fd, _):
            out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                while block := os.read(fd, 1 << 20):
                    digest.update(block)
                    view = memoryview(block)
                    while view:
                        view = view[os.write(out, view) :]
            finally:
                os.close(out)
    except FileRefused as exc:
        raise BundleError(str(exc)) from None
    return digest.hexdigest()


def verify_bundle(bundle: Path) -> str:
    """The bundle's checksum, after checking every file against it; BundleError otherwise."""
    with sealed(bundle) as content:
        return content.checksum


def load_bundle(bundle: Path) -> pd.DataFrame:
    """The bundle's trials, verified and typed; every row must be a user submission."""
    with sealed(bundle) as content:
        trials = load_trials(content.trials, immutable=True)
    origins = set(trials["origin"].astype(str))
    if not all(o.startswith("user:") for o in origins):
        raise BundleError(
            f"{bundle}: rows with origin {sorted(o for o in origins if not o.startswith('user:'))}; a bundle holds "
            "user rows only"
        )
    return trials


def merge_trials(trials: pd.DataFrame, bundles: list[Path]) -> pd.DataFrame:
    """``trials`` plus the rows of each bundle; refuses a submitted method named like a built-in one or another
    bundle's (``orchestrator.names``: after Unicode normalisation and confusable folding)."""
    frames = [trials]
    taken = {str(m): str(o) for m, o in trials[["method", "origin"]].drop_duplicates().itertuples(index=False)}
    for bundle in bundles:
        extra = load_bundle(bundle)
        for method, origin in extra[["method", "origin"]].drop_duplicates().itertuples(index=False):
            clash = next((m for m in taken if same_name(m, str(method)) and taken[m] != str(origin)), None)
            if clash is not None:
                raise BundleError(
                    f"{bundle}: method {method!r} ({origin}) clashes with {taken[clash]} results named {clash!r}"
                )
            taken[str(method)] = str(origin)
        frames.append(extra)
    plain = [f.astype({c: "string" for c in f.columns if isinstance(f[c].dtype, pd.CategoricalDtype)}) for f in frames]
    return complete_columns(pd.concat(plain, ignore_index=True))
