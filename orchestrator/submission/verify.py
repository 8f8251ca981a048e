"""`orchestrator verify`: a Lite submission checked against a full-protocol rerun, and the maintainers' word on it.

A contributor's Lite bundle is an entry ``submitted (lite)``. Maintainers rerun the image under the paper's
protocol (``orchestrator submit IMAGE --protocol paper``); a Lite trial is the same trial in the full run (a budget
of K is a prefix of 201, split 0 is one of 0-4), so the check is exact: the full run must hold every cell of the
paper protocol on the Lite bundle's datasets, and every Lite trial again with the same status and every metric
within ``TOLERANCE``.

Verification is the maintainers' word, which a bundle cannot write: a bundle is ``verified`` only when its checksum
is listed in ``orchestrator/reference/verified.toml``, a file of the project (``VERIFIED``) that only a commit
changes. ``verify`` prints the entry to commit (``--record`` appends it); it writes nothing into the bundle, and a
``verification.json`` someone put there is no file of the bundle (``sealed`` refuses it).
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from contract.files import MIB, FileRefused, check_regular, read_bounded
from orchestrator.data.fetch import sha256_of
from orchestrator.metrics import TEST_METRICS, VAL_METRICS
from orchestrator.protocols import LITE, PAPER
from orchestrator.store import read_trials
from orchestrator.submission.bundle import BundleError, sealed

#: The maintainers' list of verified bundles (package data: an installed CLI reads it too).
VERIFIED = Path(__file__).resolve().parents[1] / "reference" / "verified.toml"
_DIGEST = re.compile(r"[0-9a-f]{64}")
TOLERANCE = 1e-4  # as the golden sweep's: a changed prediction moves an accuracy on a small graph by >= 1/300
COMPARED = (*VAL_METRICS, "test_primary", *TEST_METRICS)
SHOWN = 5  # mismatches named in the verdict's line


@dataclass
class Verdict:
    lite_checksum: str
    full: str
    full_checksum: str = ""  # the full run's: a bundle's checksum, or a store file's sha256
    methods: list[str] = field(default_factory=list)
    compared: int = 0
    max_difference: float = 0.0
    tolerance: float = TOLERANCE
    mismatches: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)  # paper cells the full run lacks or holds too few trials of

    @property
    def ok(self) -> bool:
        return self.compared > 0 and not self.mismatches and not self.incomplete

    def line(self) -> str:
        if self.ok:
            return (
                f"verified: {self.compared:,} lite trials rerun within {self.tolerance:g} (largest difference "
                f"{self.max_difference:.2g}) in a full run of every paper cell"
            )
        parts = []
        if self.incomplete:
            parts.append(f"the full run lacks {len(self.incomplete):,} paper cell(s) ({_first(self.incomplete)})")
        if self.mismatches:
            parts.append(f"{len(self.mismatches):,} lite trial(s) differ ({_first(self.mismatches)})")
        if not self.compared and not self.mismatches:
            parts.append("no lite trial to compare")
        return "not verified: " + "; ".join(parts)

    def entry(self) -> str:
        """The entry of ``VERIFIED`` that marks the bundle verified (TOML)."""
        methods = ", ".join(json.dumps(m) for m in self.methods)
        return (
            f'[[verified]]\nlite = "{self.lite_checksum}"\nfull = "{self.full_checksum}"\nmethods = [{methods}]\n'
            f'verified_at = "{datetime.now(UTC).isoformat(timespec="seconds")}"\ncompared = {self.compared}\n'
        )


def _first(items: list[str]) -> str:
    return "; ".join(items[:SHOWN]) + (f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def lite_bundle(bundle: Path) -> tuple[str, pd.DataFrame]:
    """A sealed bundle run under the lite protocol: its checksum and trials (with keys); BundleError otherwise."""
    with sealed(bundle) as content:
        protocol = content.submission.get("protocol")
        name = protocol.get("name") if isinstance(protocol, dict) else None
        if name != LITE.name:
            shown = name if isinstance(name, str) else "none"
            raise BundleError(f"{bundle} was run under protocol {shown[:40]}, not {LITE.name}: nothing to verify")
        return content.checksum, read_trials(content.trials, immutable=True)


def full_trials(path: Path) -> tuple[str, str, pd.DataFrame]:
    """The full run's name, checksum and trials: a bundle (its seal checked) or a run store (its sha256)."""
    if path.is_dir():
        with sealed(path) as content:
            return f"bundle {content.checksum[:12]}", content.checksum, read_trials(content.trials, immutable=True)
    check_regular(path, "the full run's store")  # a FIFO would hang the hash
    return f"store {path}", sha256_of(path), read_trials(path)


def check(lite: pd.DataFrame, full: pd.DataFrame, checksum: str, source: str) -> Verdict:
    """Compare the Lite trials with the full run's, and the full run with the paper protocol's cells."""
    verdict = Verdict(checksum, source)
    methods, datasets = sorted(set(lite["method"])), sorted(set(lite["dataset"]))
    counts = full[full["method"].isin(methods)].groupby(["method", "dataset", "regime", "split"])["trial_index"]
    held = counts.nunique().to_dict()
    for method in methods:
        for dataset in datasets:
            for regime in PAPER.regimes:
                for split in PAPER.splits:
                    have = held.get((method, dataset, regime, split), 0)
                    if have < PAPER.budget:
                        verdict.incomplete.append(f"{method} {dataset} {regime} split {split}: {have}/{PAPER.budget}")
    rerun = full.set_index("trial_key")
    for row in lite.itertuples(index=False):
        if row.trial_key not in rerun.index:
            verdict.mismatches.append(f"{row.method} {row.dataset} {row.regime} trial {row.trial_index}: not rerun")
            continue
        again = rerun.loc[row.trial_key]
        verdict.compared += 1
        if again["status"] != row.status:
            verdict.mismatches.append(
                f"{row.method} {row.dataset} {row.regime} trial {row.trial_index}: {row.status} then {again['status']}"
            )
            continue
        for column in COMPARED:
            first, second = getattr(row, column), again[column]
            if _missing(first) and _missing(second):
                continue
            difference = math.inf if _missing(first) or _missing(second) else abs(float(first) - float(second))
            verdict.max_difference = max(verdict.max_difference, difference if math.isfinite(difference) else 0.0)
            if difference > TOLERANCE:
                verdict.mismatches.append(
                    f"{row.method} {row.dataset} {row.regime} trial {row.trial_index}: {column} {first} then {second}"
                )
                break
    return verdict


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def verify(bundle: Path, full: Path) -> Verdict:
    """Check ``bundle`` (lite) against ``full``; nothing is written (``Verdict.entry`` is what to commit)."""
    checksum, lite = lite_bundle(bundle)
    source, full_checksum, rerun = full_trials(full)
    verdict = check(lite, rerun, checksum, source)
    verdict.full_checksum = full_checksum
    verdict.methods = sorted(set(lite["method"].astype(str)))
    return verdict


def record(verdict: Verdict, listing: Path | None = None) -> Path:
    """Append a passing verdict's entry to ``listing`` (default: the maintainers' list, committed afterwards)."""
    if not verdict.ok:
        raise ValueError("only a passing verdict is recorded")
    listing = listing or VERIFIED
    with listing.open("a") as out:
        out.write("\n" + verdict.entry())
    return listing


def verified_checksums(listing: Path | None = None) -> frozenset[str]:
    """The Lite bundle checksums the maintainers' list holds; BundleError (one line) when it is not such a list."""
    listing = listing or VERIFIED
    if not listing.exists():
        return frozenset()
    try:
        document = tomllib.loads(read_bounded(listing, 16 * MIB, "the list of verified bundles").decode("utf-8"))
    except (FileRefused, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BundleError(f"{listing} is not a list of verified bundles ({str(exc)[:160]})") from None
    entries = document.get("verified", [])
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("lite"), str) and _DIGEST.fullmatch(e["lite"]) for e in entries
    ):
        raise BundleError(f"{listing}: each [[verified]] entry needs lite = the bundle's 64-hex checksum")
    return frozenset(e["lite"] for e in entries)


def is_verified(bundle: Path, listing: Path | None = None) -> bool:
    """Whether the maintainers' list names ``bundle``'s sealed content (its checksum)."""
    with sealed(bundle) as content:
        return content.checksum in verified_checksums(listing)
