"""Union run stores by trial key: the way shards of one sweep (SLURM array tasks, machines) become one store.

A trial key names one (method@version, dataset, regime, split, configuration), so two stores that
hold the same key ran the same trial. What decides whether two rows of one key agree is what the
trial *produced* (``RESULT_COLUMNS``: status, graph hash, configuration, every metric); where and
how fast it ran (endpoint, timings, host, timestamps) legitimately differs between machines and is
not compared. Rules, applied in the order the stores are given (the target first):

- a key new to the target is added;
- rows that agree are identical duplicates: the first one is kept;
- an ``unavailable`` row (the trial never ran) gives way to any other row of its key;
- rows that disagree are a conflict: the merge writes nothing and lists them, unless the user
  picks ``keep-first`` or ``keep-last``.

Merging is idempotent: merging the same stores again adds nothing. Service rows (start and
warm-up of each service) are appended once each.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.records import COLUMNS, STATUS_UNAVAILABLE, current_key
from orchestrator.store import SERVICE_COLUMNS, Store, read_trials

RESULT_COLUMNS: tuple[str, ...] = (
    "method", "method_version", "dataset", "dataset_hash", "task_type", "regime", "split", "config_hash",
    "status", "val_loss", "val_accuracy", "val_auroc", "test_accuracy", "test_macro_f1",
    "test_cross_entropy", "test_auroc", "test_precision", "primary_metric", "test_primary", "origin",
)  # fmt: skip
CONFLICT_RULES = ("refuse", "keep-first", "keep-last")


class MergeConflict(ValueError):
    """Two stores hold different results for the same trial key."""


@dataclass
class Conflict:
    key: str
    kept_from: Path
    other_from: Path
    differing: tuple[str, ...]


@dataclass
class MergeReport:
    added: int = 0
    identical: int = 0
    replaced: int = 0  # unavailable rows superseded, or conflicts resolved by keep-last
    services_added: int = 0
    conflicts: list[Conflict] = field(default_factory=list)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def differing_columns(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, ...]:
    """The result columns in which two rows of one trial key disagree (empty: identical duplicates)."""
    return tuple(c for c in RESULT_COLUMNS if not _same(a.get(c), b.get(c)))


def _rows(path: Path, table: str, columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every row of a table as plain values (a store from an older version lacks newer columns: None)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if not present:
            return []
        db.row_factory = sqlite3.Row
        picked = [c for c in columns if c in present]
        rows: list[dict[str, Any]] = [
            {c: row[c] if c in present else None for c in columns}
            for row in db.execute(f"SELECT {', '.join(picked)} FROM {table}")
        ]
    if table == "trials":  # a store from before keys carried the dataset hash merges under today's keys
        for row in rows:
            row["trial_key"] = current_key(row["trial_key"], row.get("dataset_hash"))
    return rows


def merge_stores(into: Path, sources: list[Path], on_conflict: str = "refuse") -> MergeReport:
    """Merge ``sources`` into the store ``into`` (created if missing) in one transaction."""
    if on_conflict not in CONFLICT_RULES:
        raise ValueError(f"on_conflict must be one of {', '.join(CONFLICT_RULES)}, got {on_conflict!r}")
    into = Path(into)
    if not sources:
        raise ValueError("name at least one store to merge")
    for source in sources:
        read_trials(source)  # refuses a missing file or one that is not a run store, in one line
        if into.exists() and Path(source).resolve() == into.resolve():
            raise ValueError(f"{source} is the target store itself")
    report = MergeReport()
    with Store(into) as target:
        kept: dict[str, tuple[dict[str, Any], Path]] = {
            r["trial_key"]: (r, into) for r in _rows(into, "trials", COLUMNS)
        }
        changed: dict[str, dict[str, Any]] = {}
        services = {tuple(r.values()) for r in _rows(into, "services", SERVICE_COLUMNS)}
        new_services: list[dict[str, Any]] = []
        for source in map(Path, sources):
            for row in _rows(source, "trials", COLUMNS):
                key = row["trial_key"]
                if key not in kept:
                    kept[key] = (row, source)
                    changed[key] = row
                    report.added += 1
                    continue
                held, held_from = kept[key]
                differing = differing_columns(held, row)
                if not differing:
                    report.identical += 1
                elif row["status"] == STATUS_UNAVAILABLE:
                    report.identical += 1  # the held row ran the trial; this one never did
                elif held["status"] == STATUS_UNAVAILABLE or on_conflict == "keep-last":
                    if held["status"] != STATUS_UNAVAILABLE:
                        report.conflicts.append(Conflict(key, source, held_from, differing))
                    kept[key] = (row, source)
                    changed[key] = row
                    report.replaced += 1
                else:
                    report.conflicts.append(Conflict(key, held_from, source, differing))
            for row in _rows(source, "services", SERVICE_COLUMNS):
                if tuple(row.values()) not in services:
                    services.add(tuple(row.values()))
                    new_services.append(row)
        if report.conflicts and on_conflict == "refuse":
            raise MergeConflict(conflict_message(report.conflicts))
        target.write_rows(changed.values(), new_services)
        report.services_added = len(new_services)
    return report


def conflict_message(conflicts: list[Conflict], shown: int = 5) -> str:
    """One line naming the conflicting keys (the first few) and how to resolve them."""
    first = "; ".join(
        f"{c.key} ({', '.join(c.differing)} differ between {c.kept_from} and {c.other_from})" for c in conflicts[:shown]
    )
    more = f" and {len(conflicts) - shown} more" if len(conflicts) > shown else ""
    return (
        f"{len(conflicts)} trial key(s) hold different results in different stores: {first}{more}; "
        "nothing was merged (pass --on-conflict keep-first or keep-last to choose)"
    )
