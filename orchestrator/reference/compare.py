"""A user's methods ranked among the shipped reference methods: the trials to report and what they cover.

The comparison is on the reference's protocol alone: the user's trials count on the reference's datasets,
regimes and splits, and only the first ``budget`` of each cell's configuration sequence (a longer run holds the
Lite run as its prefix). A user method's cells that are missing or hold fewer trials are named; the leaderboard is
recomputed over everyone who competes (the report runs on the combined trials).

Costs: records of two machines are never on one frontier. The reference rows keep their costs only when the user's
records ran on the reference's hardware; otherwise their costs are left out, so the cost pages (workflow,
Pareto) show the user's methods on the user's own records, and any reference method the user's store holds,
re-measured there, which then replaces the shipped rows of that method.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from orchestrator.host import hardware_of
from orchestrator.reference import Manifest, load_reference

COST_COLUMNS = (
    "fit_service_s",
    "predict_service_s",
    "fit_cpu_s",
    "predict_cpu_s",
    "fit_peak_rss_bytes",
    "fit_peak_gpu_bytes",
    "predict_peak_rss_bytes",
    "predict_peak_gpu_bytes",
)
REFERENCE = "reference"
SUBMITTED = "submitted (lite)"
VERIFIED = "verified"
ENTRY_COLUMNS = ("method", "status", "hardware", "cells", "cells_expected", "missing")
#: The origin of a store's method that the reference lacks (a scaffold run in the user's clone is "builtin" there):
#: like a bundle's "user:<id>", so its missing cells stay missing instead of taking the imputed gcn-Default result.
ENTRANT_ORIGIN = "user:store"


@dataclass
class Comparison:
    """The combined trials and what the report says of them."""

    trials: pd.DataFrame
    entries: pd.DataFrame  # ENTRY_COLUMNS: one row per method that competes
    notes: list[str] = field(default_factory=list)


def user_hardware(trials: pd.DataFrame) -> str | None:
    """The hardware most of the user's records ran on (None without a host column)."""
    if "host_json" not in trials.columns:
        return None
    lines = trials["host_json"].map(hardware_of).value_counts()
    return str(lines.index[0]) if len(lines) else None


def compare(
    user: pd.DataFrame,
    reference: pd.DataFrame,
    manifest: Manifest,
    hardware: str | None,
    verified: frozenset[str] = frozenset(),
) -> Comparison:
    """``user`` (the user's trials, any columns of a store) among ``reference`` (the shipped rows)."""
    held = user[
        user["dataset"].astype(str).isin(manifest.datasets)
        & user["regime"].astype(str).isin(manifest.regimes)
        & user["split"].astype(int).isin(manifest.splits)
        & (user["trial_index"].astype(int) < manifest.budget)
    ]
    if "origin" in held.columns:  # an entrant the reference lacks competes as a submission: named, never imputed
        entrant = ~held["method"].astype(str).isin(manifest.methods) & (held["origin"].astype(str) == "builtin")
        held = held.assign(origin=held["origin"].astype(str).mask(entrant, ENTRANT_ORIGIN))
    notes = []
    dropped = len(user) - len(held)
    if dropped:
        notes.append(
            f"{dropped:,} of the store's trials lie outside the {manifest.protocol} reference (its datasets, regimes "
            f"{', '.join(manifest.regimes)}, split {', '.join(map(str, manifest.splits))}, the first {manifest.budget} "
            "configurations of each cell) and are not compared"
        )
    remeasured = set(held["method"].astype(str)) & set(manifest.methods)
    shipped = reference[~reference["method"].astype(str).isin(remeasured)].assign(origin="builtin")
    if hardware != manifest.hardware:
        shipped = shipped.assign(**{c: float("nan") for c in COST_COLUMNS if c in shipped.columns})
        notes.append(
            f"costs: the reference was measured on {manifest.hardware}, these records on {hardware or 'unknown'}: "
            "the cost pages use this store's records only (the reference methods' costs are left out; rerun one here "
            "to put it on them)"
        )
    entries = [_entry(m, held, manifest, SUBMITTED if m not in verified else VERIFIED, hardware) for m in
               sorted(set(held["method"].astype(str)))]  # fmt: skip
    entries += [
        {"method": m, "status": REFERENCE, "hardware": manifest.hardware, "cells": _cells(reference, m),
         "cells_expected": _expected(manifest), "missing": ""}
        for m in manifest.methods if m not in remeasured
    ]  # fmt: skip
    for entry in entries:
        if entry["missing"]:
            notes.append(f"{entry['method']}: {entry['cells']}/{entry['cells_expected']} reference cells; missing "
                         f"{entry['missing']}")  # fmt: skip
    common = [c for c in shipped.columns if c in held.columns]
    trials = pd.concat([_plain(held[common]), _plain(shipped[common])], ignore_index=True)
    return Comparison(trials, pd.DataFrame(entries, columns=list(ENTRY_COLUMNS)), notes)


def _expected(manifest: Manifest) -> int:
    return len(manifest.datasets) * len(manifest.regimes) * len(manifest.splits)


def _cells(frame: pd.DataFrame, method: str) -> int:
    return int(frame[frame["method"].astype(str) == method].groupby(["dataset", "regime", "split"]).ngroups)


def _entry(method: str, held: pd.DataFrame, manifest: Manifest, status: str, hardware: str | None) -> dict:
    """A user method's coverage of the reference's cells: a cell counts with every one of its ``budget`` trials."""
    rows = held[held["method"].astype(str) == method]
    counts = rows.groupby(["dataset", "regime", "split"], observed=True)["trial_index"].nunique()
    missing = []
    for dataset in manifest.datasets:
        for regime in manifest.regimes:
            for split in manifest.splits:
                have = int(counts.get((dataset, regime, split), 0))
                if have < manifest.budget:
                    missing.append(
                        f"{dataset} {regime} split {split}" + (f" ({have}/{manifest.budget})" if have else "")
                    )
    shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
    return {"method": method, "status": status, "hardware": hardware or "", "cells": _expected(manifest) - len(missing),
            "cells_expected": _expected(manifest), "missing": shown}  # fmt: skip


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical columns as strings, so frames of other categories concatenate without losing values."""
    return frame.astype({c: "string" for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)})


def with_reference(
    trials: pd.DataFrame, name: str, store: Path | None, bundles: Sequence[Path]
) -> tuple[pd.DataFrame, Comparison]:
    """The report's trials (``load_trials``'s, bundles merged) among the shipped reference ``name``, typed as the
    analysis types them, and the comparison; the user's hardware is read from the store's and bundles' records."""
    from orchestrator.store import read_trial_columns
    from orchestrator.submission.bundle import TRIALS
    from orchestrator.submission.verify import is_verified
    from orchestrator.trials.load import complete_columns

    shipped, manifest = load_reference(name)
    hosts = [*([store] if store is not None else []), *(b / TRIALS for b in bundles)]
    hardware = user_hardware(
        pd.concat([read_trial_columns(p, ("host_json",)) for p in hosts if p.suffix == ".sqlite"], ignore_index=True)
    )
    verified = frozenset(
        str(m) for b in bundles if is_verified(b) for m in read_trial_columns(b / TRIALS, ("method",))["method"]
    )
    comparison = compare(_plain(trials), _plain(complete_columns(shipped)), manifest, hardware, verified)
    return complete_columns(comparison.trials), comparison
