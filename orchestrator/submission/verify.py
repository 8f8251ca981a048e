"""`orchestrator verify`: a Lite submission checked against a full-protocol rerun, and the verdict kept beside it.

A contributor's Lite bundle is an entry ``submitted (lite)``. Maintainers rerun the image under the paper's
protocol (``orchestrator submit IMAGE --protocol paper``); a Lite trial is the same trial in the full run (a budget
of K is a prefix of 201, split 0 is one of 0-4), so the check is exact: the full run must hold every cell of the
paper protocol on the Lite bundle's datasets, and every Lite trial again with the same status and every metric
within ``TOLERANCE``. A bundle that passes gets ``verification.json`` (outside its seal, naming the checksum it
verified), and the report shows its methods as ``verified``.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from orchestrator.protocols import LITE, PAPER
from orchestrator.store import read_trials
from orchestrator.submission.bundle import SUBMISSION, TRIALS, BundleError, verify_bundle

VERIFICATION = "verification.json"
TOLERANCE = 1e-4  # as the golden sweep's: a changed prediction moves an accuracy on a small graph by >= 1/300
COMPARED = ("val_loss", "val_accuracy", "test_primary", "test_accuracy", "test_macro_f1", "test_cross_entropy",
            "test_auroc", "test_precision")  # fmt: skip
SHOWN = 5  # mismatches named in the verdict's line


@dataclass
class Verdict:
    lite_checksum: str
    full: str
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
            return (f"verified: {self.compared:,} lite trials rerun within {self.tolerance:g} (largest difference "
                    f"{self.max_difference:.2g}) in a full run of every paper cell")  # fmt: skip
        parts = []
        if self.incomplete:
            parts.append(f"the full run lacks {len(self.incomplete):,} paper cell(s) ({_first(self.incomplete)})")
        if self.mismatches:
            parts.append(f"{len(self.mismatches):,} lite trial(s) differ ({_first(self.mismatches)})")
        if not self.compared and not self.mismatches:
            parts.append("no lite trial to compare")
        return "not verified: " + "; ".join(parts)


def _first(items: list[str]) -> str:
    return "; ".join(items[:SHOWN]) + (f"; and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def lite_bundle(bundle: Path) -> tuple[str, pd.DataFrame]:
    """A sealed bundle run under the lite protocol: its checksum and trials (with keys); BundleError otherwise."""
    checksum = verify_bundle(bundle)
    protocol = json.loads((bundle / SUBMISSION).read_text()).get("protocol", {}).get("name")
    if protocol != LITE.name:
        raise BundleError(f"{bundle} was run under protocol {protocol or 'none'}, not {LITE.name}: nothing to verify")
    return checksum, read_trials(bundle / TRIALS)


def full_trials(path: Path) -> tuple[str, pd.DataFrame]:
    """The full run's trials: a bundle (its seal checked) or a run store."""
    if path.is_dir():
        return f"bundle {verify_bundle(path)[:12]}", read_trials(path / TRIALS)
    return f"store {path}", read_trials(path)


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
            verdict.mismatches.append(f"{row.method} {row.dataset} {row.regime} trial {row.trial_index}: "
                                      f"{row.status} then {again['status']}")  # fmt: skip
            continue
        for column in COMPARED:
            first, second = getattr(row, column), again[column]
            if _missing(first) and _missing(second):
                continue
            difference = math.inf if _missing(first) or _missing(second) else abs(float(first) - float(second))
            verdict.max_difference = max(verdict.max_difference, difference if math.isfinite(difference) else 0.0)
            if difference > TOLERANCE:
                verdict.mismatches.append(f"{row.method} {row.dataset} {row.regime} trial {row.trial_index}: "
                                          f"{column} {first} then {second}")  # fmt: skip
                break
    return verdict


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def verify(bundle: Path, full: Path) -> Verdict:
    """Check ``bundle`` (lite) against ``full``; write ``verification.json`` into the bundle when it passes."""
    checksum, lite = lite_bundle(bundle)
    source, rerun = full_trials(full)
    verdict = check(lite, rerun, checksum, source)
    if verdict.ok:
        record = {**asdict(verdict), "verified_at": datetime.now(UTC).isoformat(timespec="seconds")}
        (bundle / VERIFICATION).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    else:
        (bundle / VERIFICATION).unlink(missing_ok=True)
    return verdict


def is_verified(bundle: Path) -> bool:
    """Whether ``bundle`` carries a passing verification of exactly its sealed content."""
    path = bundle / VERIFICATION
    if not path.is_file():
        return False
    try:
        return json.loads(path.read_text()).get("lite_checksum") == verify_bundle(bundle)
    except (ValueError, BundleError):
        return False
