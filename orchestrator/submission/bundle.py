"""Submission bundles: what `orchestrator submit` writes and `orchestrator report` can merge.

A bundle is a directory::

    trials.sqlite     the run store (table ``trials``, every row origin "user:<id>")
    submission.json   id, image (name, id digest, repo digests, labels), the image's
                      Describe output, hardware, the exact command, the sandbox
                      limits that applied, the protocol (datasets, regimes, splits, budget)
    SHA256SUMS        sha256 of each file above
    CHECKSUM          sha256 of SHA256SUMS: the bundle's checksum

``verify_bundle`` recomputes the checksums; ``load_bundle`` verifies and
returns the trials table typed as ``orchestrator.trials.load`` types it;
``merge_trials`` appends bundles to a built-in table (user rows are never
imputed: the analysis keys that on ``origin``).
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pandas as pd

from orchestrator.data.fetch import sha256_of
from orchestrator.trials.load import complete_columns, load_trials

TRIALS = "trials.sqlite"
SUBMISSION = "submission.json"
SUMS = "SHA256SUMS"
CHECKSUM = "CHECKSUM"
CONTENT = (TRIALS, SUBMISSION)


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


def verify_bundle(bundle: Path) -> str:
    """The bundle's checksum, after checking every file against it; BundleError otherwise."""
    bundle = Path(bundle)
    missing = [n for n in (*CONTENT, SUMS, CHECKSUM) if not (bundle / n).is_file()]
    if missing:
        raise BundleError(f"{bundle} is not a complete submission bundle: missing {', '.join(missing)}")
    lines = (bundle / SUMS).read_text()
    checksum = (bundle / CHECKSUM).read_text().strip()
    if hashlib.sha256(lines.encode()).hexdigest() != checksum:
        raise BundleError(f"{bundle}: SHA256SUMS does not match CHECKSUM")
    listed = {}
    for line in lines.splitlines():
        digest, _, name = line.partition("  ")
        listed[name] = digest
    if set(listed) != set(CONTENT):
        raise BundleError(f"{bundle}: SHA256SUMS lists {sorted(listed)}, expected {sorted(CONTENT)}")
    for name, digest in listed.items():
        if sha256_of(bundle / name) != digest:
            raise BundleError(f"{bundle}: {name} was changed after the bundle was sealed (checksum mismatch)")
    return checksum


def load_bundle(bundle: Path) -> pd.DataFrame:
    """The bundle's trials, verified and typed; every row must be a user submission."""
    verify_bundle(bundle)
    trials = load_trials(Path(bundle) / TRIALS)
    origins = set(trials["origin"].astype(str))
    if not all(o.startswith("user:") for o in origins):
        raise BundleError(
            f"{bundle}: rows with origin {sorted(o for o in origins if not o.startswith('user:'))}; a bundle holds "
            "user rows only"
        )
    return trials


def merge_trials(trials: pd.DataFrame, bundles: list[Path]) -> pd.DataFrame:
    """``trials`` plus the rows of each bundle; refuses a submitted method named like a built-in one."""
    frames = [trials]
    taken = {str(m): str(o) for m, o in trials[["method", "origin"]].drop_duplicates().itertuples(index=False)}
    for bundle in bundles:
        extra = load_bundle(bundle)
        for method, origin in extra[["method", "origin"]].drop_duplicates().itertuples(index=False):
            if str(method) in taken and taken[str(method)] != str(origin):
                raise BundleError(
                    f"{bundle}: method {method!r} ({origin}) clashes with {taken[str(method)]} results of the same name"
                )
            taken[str(method)] = str(origin)
        frames.append(extra)
    plain = [f.astype({c: "string" for c in f.columns if isinstance(f[c].dtype, pd.CategoricalDtype)}) for f in frames]
    return complete_columns(pd.concat(plain, ignore_index=True))
