"""A user's methods ranked among the shipped reference methods: the trials to report and what they cover.

The comparison is on the reference's protocol alone: the user's trials count on the reference's datasets,
regimes and splits, and only the first ``budget`` of each cell's configuration sequence (a longer run holds the
Lite run as its prefix). A user method's cells that are missing or hold fewer trials are named; the leaderboard is
recomputed over everyone who competes (the report runs on the combined trials).

Reference identity: a submission never stands in for a reference method. A method whose name reads like a
shipped one (``orchestrator.names``: after Unicode normalisation and confusable folding, so ``gсn`` with a
Cyrillic letter is ``gcn``) is refused, unless it is the user's own store's rerun of it (the same name, and every
one of its trials in the reference's cells a trial the reference holds: the same version, configuration and
dataset); a rerun competes as ``<name> (rerun)`` beside the shipped rows, which it never replaces.

Costs: records of two machines are never on one frontier. The reference rows keep their costs only when the user's
records ran on the reference's hardware; otherwise their costs are left out, so the cost pages (workflow,
Pareto) show the user's methods on the user's own records, and any reference method the user's store reran there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from orchestrator.host import hardware_of
from orchestrator.names import same_name
from orchestrator.reference import Manifest, ReferenceError, load_reference

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
RERUN = "rerun (this store)"
RERUN_SUFFIX = " (rerun)"  # a reference method the user's store reran competes under its name and this
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
    reran: frozenset[str] = frozenset(),
) -> Comparison:
    """``user`` (the user's trials, any columns of a store) among ``reference`` (the shipped rows); ``reran``: the
    reference methods the user's store reran (``store_reruns``). ReferenceError for a method that takes a reference
    method's name (the module docstring)."""
    user = _reruns_renamed(user, manifest, reran)
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
    shipped = reference.assign(origin="builtin")
    if hardware != manifest.hardware:
        shipped = shipped.assign(**{c: float("nan") for c in COST_COLUMNS if c in shipped.columns})
        notes.append(
            f"costs: the reference was measured on {manifest.hardware}, these records on {hardware or 'unknown'}: "
            "the cost pages use this store's records only (the reference methods' costs are left out; rerun one here "
            "to put it on them)"
        )
    entries = [
        _entry(m, held, manifest, _status(m, verified), hardware) for m in sorted(set(held["method"].astype(str)))
    ]
    entries += [
        {
            "method": m,
            "status": REFERENCE,
            "hardware": manifest.hardware,
            "cells": _cells(reference, m),
            "cells_expected": _expected(manifest),
            "missing": "",
        }
        for m in manifest.methods
    ]
    for entry in entries:
        if entry["missing"]:
            notes.append(
                f"{entry['method']}: {entry['cells']}/{entry['cells_expected']} reference cells; missing "
                f"{entry['missing']}"
            )
    common = [c for c in shipped.columns if c in held.columns]
    trials = pd.concat([_plain(held[common]), _plain(shipped[common])], ignore_index=True)
    return Comparison(trials, pd.DataFrame(entries, columns=list(ENTRY_COLUMNS)), notes)


def _status(method: str, verified: frozenset[str]) -> str:
    if method.endswith(RERUN_SUFFIX):
        return RERUN
    return VERIFIED if method in verified else SUBMITTED


def _reruns_renamed(user: pd.DataFrame, manifest: Manifest, reran: frozenset[str]) -> pd.DataFrame:
    """The user's trials with each reference method the store reran renamed ``<name> (rerun)``; ReferenceError for
    any other method whose name reads like a reference method's."""
    names = user["method"].astype(str)
    renamed = {}
    for method in sorted(set(names)):
        twin = next((m for m in manifest.methods if same_name(m, method)), None)
        if twin is None:
            continue
        origins = sorted(set(user.loc[names == method, "origin"].astype(str))) if "origin" in user.columns else []
        submitted = [o for o in origins if o.startswith("user:")]
        if submitted:
            raise ReferenceError(
                f"the submission {submitted[0]} names a method {method!r}, which reads as the reference method "
                f"{twin!r}: a submission never stands in for a reference method; rename it"
            )
        if method != twin or method not in reran:
            raise ReferenceError(
                f"the store's method {method!r} reads as the reference method {twin!r} but is not a rerun of it (its "
                "trials in the reference's cells are not the reference's: another version, configuration or dataset, "
                "or another name); rename it, or compare without --reference"
            )
        renamed[method] = method + RERUN_SUFFIX
    if not renamed:
        return user
    return user.assign(method=names.replace(renamed))  # not a reference name: it competes as an entrant


def store_reruns(store: Path, reference: pd.DataFrame, manifest: Manifest) -> frozenset[str]:
    """The reference methods ``store`` reran: every one of its trials of that name in the reference's cells is a
    trial the reference holds (the same key: version, configuration and dataset), and it holds at least one."""
    from orchestrator.store import read_trial_columns

    rows = read_trial_columns(store, ("trial_key", "method", "dataset", "regime", "split", "trial_index"))
    rows = rows[
        rows["method"].astype(str).isin(manifest.methods)
        & rows["dataset"].astype(str).isin(manifest.datasets)
        & rows["regime"].astype(str).isin(manifest.regimes)
        & rows["split"].astype(int).isin(manifest.splits)
        & (rows["trial_index"].astype(int) < manifest.budget)
    ]
    shipped = set(reference["trial_key"].astype(str))
    known = rows["trial_key"].astype(str).isin(shipped)
    return frozenset(
        str(m) for m, group in known.groupby(rows["method"].astype(str)) if len(group) and bool(group.all())
    )


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
    return {
        "method": method,
        "status": status,
        "hardware": hardware or "",
        "cells": _expected(manifest) - len(missing),
        "cells_expected": _expected(manifest),
        "missing": shown,
    }


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical columns as strings, so frames of other categories concatenate without losing values."""
    return frame.astype({c: "string" for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)})


def with_reference(
    trials: pd.DataFrame, name: str, store: Path | None, bundles: Sequence[Path]
) -> tuple[pd.DataFrame, Comparison]:
    """The report's trials (``load_trials``'s, bundles merged) among the shipped reference ``name``, typed as the
    analysis types them, and the comparison; the user's hardware is read from the store's and bundles' records
    (each bundle from its sealed content), the verified bundles from the maintainers' list."""
    from orchestrator.store import read_trial_columns
    from orchestrator.submission.bundle import sealed
    from orchestrator.submission.verify import verified_checksums
    from orchestrator.trial_table.load import complete_columns, refuse_out_of_range_frame

    shipped, manifest = load_reference(name)
    refuse_out_of_range_frame(shipped, f"the shipped {name} reference")
    columns = ("host_json", "method")
    hosts = [read_trial_columns(store, columns)] if store is not None and store.suffix == ".sqlite" else []
    verified: set[str] = set()
    listed = verified_checksums() if bundles else frozenset()
    for bundle in bundles:
        with sealed(bundle) as content:
            rows = read_trial_columns(content.trials, columns, immutable=True)
            hosts.append(rows)
            if content.checksum in listed:
                verified |= set(rows["method"].astype(str))
    hardware = user_hardware(pd.concat(hosts, ignore_index=True)) if hosts else None
    reran = store_reruns(store, shipped, manifest) if store is not None and store.suffix == ".sqlite" else frozenset()
    comparison = compare(
        _plain(trials), _plain(complete_columns(shipped)), manifest, hardware, frozenset(verified), reran
    )
    return complete_columns(comparison.trials), comparison
