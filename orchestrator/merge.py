"""Union run stores by trial key: the way shards of one sweep (SLURM array tasks, machines) become one store.

A trial key names one (method@version, dataset, regime, split, configuration, dataset content), so
two stores that hold the same key ran the same trial. What decides whether two rows of one key
agree is what the trial *produced* (``RESULT_COLUMNS``: status, graph hash, configuration, every
metric); where and how fast it ran (endpoint, timings, host, timestamps) legitimately differs
between machines and is not compared. Rules, applied in the order the stores are given (the target
first):

- a key new to the target is added;
- rows that agree are identical duplicates: the first one is kept;
- an ``unavailable`` row (the trial never ran) gives way to any other row of its key;
- rows that disagree are a conflict: the merge writes nothing and lists them, unless the user
  picks ``keep-first`` or ``keep-last``;
- the store's supersede rule holds in the merged store too: one dataset name has one content in
  ``trials``. When the stores bring several, the current one is the content no store has
  superseded, and among those the one with the latest trial; the rows of the others move to
  ``superseded_trials`` (kept, never read by ``show``/``export``/``report``).

Only complete results are published. Shard stores record the plan they ran (``Store.write_plan``: its
id and its definition, every shard's trial count, their own keys); the merge recomputes the plan from its
definition (checked against its id), spells out every shard's trial keys and counts those with an outcome
(any status but ``unavailable``) in the merged store: a count a store records is never believed. A merge
that leaves planned trials without one is refused, naming the shards and how many of their trials are
missing, unless ``partial`` is asked for: the store then says so in its ``meta`` table
(``read_merge_state``), and ``report`` and ``show`` say so too. Stores without a recorded plan (unsharded
runs) are merged without that check. A plan that cannot be recomputed (a shard store an older orchestrator
wrote: its plan id digests every key, ``legacy_plan_id``, or it recorded no definition) is named, its shards
to be run again once (which skips their stored trials and records the plan anew), and the merge is not
complete until they are. Spelling out the paper protocol's 1.9 M keys takes about a minute of one core.

Before anything is written each source is checked: it is a run store, its tables have the columns a
row needs and every value has its column's type (a number where a number belongs, a known status,
valid JSON in ``*_json`` columns); unknown columns are dropped and named. The merge takes the
target's claim, so no sweep writes it meanwhile. When it refuses it writes nothing: an existing
target keeps its rows (one transaction, rolled back); a new target is built under a temporary name
beside it and renamed into place only once the merge succeeded.

Merging is idempotent: merging the same stores again adds nothing. Rows are streamed through
temporary tables, never held in memory, so a paper-scale sweep (2.15 million trials) merges in
bounded memory.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.metrics import TEST_METRICS, VAL_METRICS, VALUE_RANGES, range_condition
from orchestrator.plan import Plan, PlanDefinitionError, plan_from_definition
from orchestrator.records import COLUMNS, RETRIED_STATUSES, STATUS_UNAVAILABLE, STATUSES, current_key
from orchestrator.store import (
    MERGE_META_KEY,
    PLAN_DEFINITIONS,
    PLAN_SLOTS,
    PLAN_TRIALS,
    SERVICE_COLUMNS,
    SERVICES,
    SUPERSEDED,
    TRIALS,
    Store,
    Table,
    claim_lock,
    connect_read_only,
    legacy_plan_id,
    open_existing,
)

RESULT_COLUMNS: tuple[str, ...] = (
    "method",
    "method_version",
    "dataset",
    "dataset_hash",
    "task_type",
    "regime",
    "split",
    "config_hash",
    "status",
    *VAL_METRICS,
    *TEST_METRICS,
    "primary_metric",
    "test_primary",
    "origin",
)
CONFLICT_RULES = ("refuse", "keep-first", "keep-last")
SHOWN = 5  # conflicts and shards a message names before "and N more"
_BATCH = 5000  # rows per round trip when streaming a source into the target's temporary tables
_ACCEPTED = {"REAL": ("real", "integer", "null"), "INTEGER": ("integer", "null"), "TEXT": ("text", "null")}
_CHECKED = (TRIALS, SUPERSEDED, SERVICES, PLAN_SLOTS, PLAN_TRIALS, PLAN_DEFINITIONS)
# the temporary tables a source is staged in
_STAGED = ("incoming", "incoming_superseded", "incoming_slots", "incoming_plan", "incoming_definitions", "replace_keys")


class MergeConflict(ValueError):
    """Two stores hold different results for the same trial key."""


class MergeIncomplete(ValueError):
    """The merged store would lack planned trials (and a partial merge was not asked for)."""


class SourceError(ValueError):
    """A store to merge is not one, or holds rows that break the record schema."""


@dataclass
class Conflict:
    key: str
    kept_from: Path
    other_from: Path
    differing: tuple[str, ...]


@dataclass(frozen=True)
class ShardGap:
    """A shard of the plan whose trials are not all in the merged store."""

    shard: int
    shards: int
    missing: int
    planned: int
    started: bool  # False: no store of it recorded its plan (its task never started, or its store was not given)

    def describe(self) -> str:
        never = "" if self.started else ", never started"
        return f"shard {self.shard}/{self.shards} ({self.missing} of {self.planned} missing{never})"


@dataclass(frozen=True)
class Completeness:
    """The merged store against the plans its shards recorded, each recomputed from its definition."""

    plans: tuple[str, ...]  # plan ids; more than one: shards of different plans were merged
    shard_counts: tuple[int, ...]
    planned: int  # the recomputed plan's trials (0 when no plan could be recomputed)
    gaps: tuple[ShardGap, ...]
    # (shard, shards) of each shard whose store an older orchestrator recorded (``legacy_plan_id``): a digest of every
    # key, which no definition recomputes
    legacy: tuple[tuple[int, int], ...] = ()
    unverified: tuple[str, ...] = ()  # plans that could not be recomputed here, each with why

    @property
    def complete(self) -> bool:
        return (
            len(self.plans) == 1
            and len(self.shard_counts) == 1
            and not self.gaps
            and not self.legacy
            and not self.unverified
        )

    @property
    def missing(self) -> int:
        return sum(g.missing for g in self.gaps)

    def summary(self) -> str:
        parts = []
        if self.legacy:
            shown = ", ".join(f"{shard}/{shards}" for shard, shards in self.legacy[:SHOWN])
            more = f" and {len(self.legacy) - SHOWN} more" if len(self.legacy) > SHOWN else ""
            parts.append(
                f"shard(s) {shown}{more} recorded their plan with an older orchestrator, whose plan ids cannot be "
                "recomputed: run each again on its store with this version (`orchestrator slurm resubmit "
                "--only I,...`, or `orchestrator run` with the sweep's flags, --shard I/N and --store on it), which "
                "skips its stored trials and records its plan anew"
            )
        if self.unverified:
            parts.append(
                f"plan(s) {'; '.join(self.unverified[:SHOWN])} cannot be recomputed here, so its trials cannot be "
                "counted: run its shards again with this version (they skip their stored trials and record the plan "
                "anew)"
            )
        current = [p for p in self.plans if not legacy_plan_id(p)]
        if len(current) > 1 or len(self.shard_counts) > 1:
            parts.append(
                f"the stores hold shards of {len(self.plans)} different plans ({', '.join(self.plans)}) "
                f"or shard counts ({', '.join(map(str, self.shard_counts))}): a shard ran other flags or "
                "after a dataset changed; rerun it with the sweep's flags"
            )
        if self.gaps:
            shown = ", ".join(g.describe() for g in self.gaps[:SHOWN])
            more = f" and {len(self.gaps) - SHOWN} more shard(s)" if len(self.gaps) > SHOWN else ""
            parts.append(f"{self.missing} of {self.planned} planned trials missing: {shown}{more}")
        return "; ".join(parts) or f"all {self.planned} planned trials stored"

    def as_meta(self) -> dict[str, Any]:
        return {
            "state": "complete" if self.complete else "partial",
            "plans": list(self.plans),
            "shards": list(self.shard_counts),
            "planned": self.planned,
            "missing_trials": self.missing,
            "summary": self.summary(),
            "gaps": [g.__dict__ for g in self.gaps],
            "legacy_shards": [list(shard) for shard in self.legacy],
            "unverified_plans": list(self.unverified),
            "merged_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }


@dataclass
class MergeReport:
    added: int = 0
    identical: int = 0
    replaced: int = 0  # unavailable rows superseded, or conflicts resolved by keep-last
    services_added: int = 0
    conflicts: list[Conflict] = field(default_factory=list)  # the first SHOWN
    conflict_count: int = 0
    superseded: dict[str, int] = field(default_factory=dict)  # dataset -> rows moved to superseded_trials
    dropped: dict[str, tuple[str, ...]] = field(default_factory=dict)  # "store: table" -> unknown columns dropped
    completeness: Completeness | None = None  # None: no store recorded a plan


@dataclass
class _Source:
    path: Path
    columns: dict[str, tuple[str, ...]]  # table -> the known columns it has (absent tables: missing)
    dropped: dict[str, tuple[str, ...]]  # table -> its columns the record schema does not know


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def differing_columns(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, ...]:
    """The result columns in which two rows of one trial key disagree (empty: identical duplicates)."""
    return tuple(c for c in RESULT_COLUMNS if not _same(a.get(c), b.get(c)))


# ---- checking a source ---------------------------------------------------------


def check_source(path: Path) -> _Source:
    """Refuse (SourceError, one line) a file that is not a run store or whose rows break the record schema."""
    path = Path(path)
    db = open_existing(path, SourceError, ranges=False)  # _check_values checks every value, ranges included
    try:
        return _check(db, path)
    except sqlite3.DatabaseError as exc:
        raise SourceError(f"{path} is not a NodeGround run store: {exc}") from None
    finally:
        db.close()


def _check(db: sqlite3.Connection, path: Path) -> _Source:
    columns: dict[str, tuple[str, ...]] = {}
    dropped: dict[str, tuple[str, ...]] = {}
    for table in _CHECKED:
        present = [row[1] for row in db.execute(f"PRAGMA table_info({table.name})")]
        if not present:
            if table is TRIALS:
                raise SourceError(f"{path} is not a NodeGround run store: it has no trials table")
            continue
        missing = sorted(table.required - set(present))
        if missing:
            raise SourceError(f"{path}: table {table.name} lacks column(s) {', '.join(missing)}; nothing was merged")
        columns[table.name] = tuple(c for c in table.types if c in present)
        unknown = tuple(c for c in present if c not in table.types and not (table is SERVICES and c == "id"))
        if unknown:
            dropped[table.name] = unknown
        _check_values(db, path, table, columns[table.name])
    return _Source(path, columns, dropped)


def _value_rules(table: Table, present: tuple[str, ...]) -> Iterator[tuple[str, str, str]]:
    """(column, SQL condition a good value meets, what a good value is) for every column present."""
    for column in present:
        sql_type = table.types[column]
        accepted = ", ".join(f"'{t}'" for t in _ACCEPTED[sql_type])
        condition = f"typeof({column}) IN ({accepted})"
        what = {"REAL": "a number", "INTEGER": "an integer", "TEXT": "text"}[sql_type]
        if column in table.required:
            condition += f" AND {column} IS NOT NULL"
            what += ", never empty"
        if column.endswith("_json"):
            condition += f" AND ({column} IS NULL OR json_valid({column}))"
            what += " (JSON)"
        if column == "status":
            condition += f" AND {column} IN ({', '.join(repr(s) for s in STATUSES)})"
            what = f"one of {', '.join(STATUSES)}"
        if column in VALUE_RANGES and table in (TRIALS, SUPERSEDED):
            low, high = VALUE_RANGES[column]
            condition += f" AND {range_condition(column)}"
            what += f" in [{low:g}, {high:g}]" if math.isfinite(high) else f", finite and >= {low:g}"
        yield column, condition, what


def _check_values(db: sqlite3.Connection, path: Path, table: Table, present: tuple[str, ...]) -> None:
    rules = list(_value_rules(table, present))
    if not rules:
        return
    counts = db.execute(
        f"SELECT {', '.join(f'COALESCE(SUM(NOT ({cond})), 0)' for _, cond, _ in rules)} FROM {table.name}"
    ).fetchone()
    bad = [(rule, n) for rule, n in zip(rules, counts, strict=True) if n]
    if not bad:
        return
    (column, condition, what), count = bad[0]
    label = "trial_key" if "trial_key" in present else "rowid"
    row = db.execute(
        f"SELECT {label}, typeof({column}), quote({column}) FROM {table.name} WHERE NOT ({condition}) LIMIT 1"
    ).fetchone()
    others = f" (and {len(bad) - 1} other column(s))" if len(bad) > 1 else ""
    shown = row[2] if len(row[2]) <= 40 else row[2][:37] + "..."
    raise SourceError(
        f"{path}: {table.name}.{column} must be {what}, but {count} row(s) hold otherwise{others}, e.g. "
        f"{label} {row[0]!r}: {row[1]} {shown}; nothing was merged"
    )


# ---- merging -------------------------------------------------------------------


def merge_stores(into: Path, sources: list[Path], on_conflict: str = "refuse", partial: bool = False) -> MergeReport:
    """Merge ``sources`` into the store ``into`` (created if missing) in one transaction.

    Refuses (MergeConflict, MergeIncomplete, SourceError, StoreBusy) without writing anything.
    """
    if on_conflict not in CONFLICT_RULES:
        raise ValueError(f"on_conflict must be one of {', '.join(CONFLICT_RULES)}, got {on_conflict!r}")
    into = Path(into)
    if not sources:
        raise ValueError("name at least one store to merge")
    checked = []
    for source in map(Path, sources):
        if into.exists() and source.exists() and source.resolve() == into.resolve():
            raise ValueError(f"{source} is the target store itself")
        checked.append(check_source(source))
    remove_stale_scratch(into)
    if into.exists():
        with Store(into, claim=True) as target:
            return _written(into, lambda: _merge(target, checked, on_conflict, partial))
    scratch = into.with_name(f"{_scratch_prefix(into)}{socket.gethostname()}-{os.getpid()}")
    try:
        with Store(scratch) as target:
            report = _written(into, lambda: _merge(target, checked, on_conflict, partial))
        claim = claim_lock(into)
        try:
            if into.exists():
                raise ValueError(f"{into} was created by another process while merging; merge again")
            os.replace(scratch, into)
        finally:
            claim.close()
        return report
    finally:
        _remove_scratch(scratch)


def _written(into: Path, merge: Callable[[], MergeReport]) -> MergeReport:
    """``merge()``, a write that fails (a full disk: SQLite rolled its transaction back) said as such, in one line."""
    try:
        return merge()
    except sqlite3.OperationalError as exc:
        raise sqlite3.OperationalError(f"{into}: {exc}; nothing was merged") from None


def _scratch_prefix(into: Path) -> str:
    return f".{into.name}.merging-"


def _remove_scratch(scratch: Path) -> None:
    for leftover in (scratch, *(scratch.with_name(scratch.name + s) for s in ("-wal", "-shm", "-journal"))):
        leftover.unlink(missing_ok=True)


def remove_stale_scratch(into: Path) -> list[Path]:
    """Remove what a merge into ``into`` that was killed left beside it (its hidden scratch store, up to the size of
    the merged store): the scratch of a process of this host that no longer runs; the removed scratch stores.

    A scratch is named ``.<target>.merging-<host>-<pid>`` (an older orchestrator's ``.<target>.merging-<pid>`` counts
    as this host's); another host's is left alone, since whether its merge still runs cannot be told from here.
    """
    removed = []
    prefix = _scratch_prefix(into)
    for path in into.parent.glob(f"{prefix}*"):
        if path.name.endswith(("-wal", "-shm", "-journal")):
            continue
        host, _, pid = path.name[len(prefix) :].rpartition("-")
        if not pid.isdigit() or (host and host != socket.gethostname()) or _running(int(pid)):
            continue
        _remove_scratch(path)
        removed.append(path)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _merge(target: Store, sources: list[_Source], on_conflict: str, partial: bool) -> MergeReport:
    report = MergeReport()
    for source in sources:
        for table, columns in source.dropped.items():
            report.dropped[f"{source.path}: {table}"] = columns
    with target.transaction() as db:
        db.create_function("current_key", 2, current_key, deterministic=True)
        services = {tuple(row) for row in db.execute(f"SELECT {', '.join(SERVICE_COLUMNS)} FROM services")}
        for position, source in enumerate(sources):
            _merge_source(db, source, sources[:position], target.path, on_conflict, report, services)
        report.superseded = _supersede(db)
        report.completeness = completeness(db)
        if report.conflicts and on_conflict == "refuse":
            raise MergeConflict(conflict_message(report.conflicts, report.conflict_count))
        if report.completeness is not None:
            if not report.completeness.complete and not partial:
                raise MergeIncomplete(
                    f"incomplete: {report.completeness.summary()}; nothing was merged (wait for the shards to "
                    "finish or resubmit them; pass --partial to publish a store marked partial)"
                )
            db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                (MERGE_META_KEY, json.dumps(report.completeness.as_meta(), sort_keys=True)),
            )
    return report


def _stage(db: sqlite3.Connection, source: _Source, table: Table, name: str) -> int:
    """Copy a source table into the temporary table ``name`` (keys in today's form); the rows copied."""
    db.execute(f"DROP TABLE IF EXISTS temp.{name}")
    db.execute(table.ddl(f"temp.{name}").replace("CREATE TABLE IF NOT EXISTS", "CREATE TABLE"))
    present = source.columns.get(table.name)
    if not present:
        return 0
    keyed = "trial_key" in present and "dataset_hash" in present and table in (TRIALS, SUPERSEDED)
    insert = f"INSERT OR IGNORE INTO temp.{name} ({', '.join(present)}) VALUES ({', '.join('?' for _ in present)})"
    key_at, hash_at = (present.index("trial_key"), present.index("dataset_hash")) if keyed else (0, 0)
    copied = 0
    with contextlib.closing(connect_read_only(source.path)) as src:
        cursor = src.execute(f"SELECT {', '.join(present)} FROM {table.name}")
        while rows := cursor.fetchmany(_BATCH):
            if keyed:  # a store from before keys carried the dataset hash merges under today's keys
                rows = [(*r[:key_at], current_key(r[key_at], r[hash_at]), *r[key_at + 1 :]) for r in rows]
            db.executemany(insert, rows)
            copied += len(rows)
    return copied


def _merge_source(
    db: sqlite3.Connection,
    source: _Source,
    earlier: list[_Source],
    target: Path,
    on_conflict: str,
    report: MergeReport,
    services: set[tuple],
) -> None:
    cols = ", ".join(COLUMNS)
    _stage(db, source, TRIALS, "incoming")
    same = " AND ".join(f"i.{c} IS t.{c}" for c in RESULT_COLUMNS)
    report.identical += db.execute(
        f"SELECT COUNT(*) FROM temp.incoming i JOIN main.trials t ON t.trial_key = i.trial_key WHERE {same}"
    ).fetchone()[0]
    db.execute("DROP TABLE IF EXISTS temp.replace_keys")
    db.execute("CREATE TABLE temp.replace_keys (trial_key TEXT PRIMARY KEY)")
    differing = db.execute(
        f"SELECT i.trial_key, i.status, t.status FROM temp.incoming i JOIN main.trials t "
        f"ON t.trial_key = i.trial_key WHERE NOT ({same})"
    )
    replace = []
    for key, status, held_status in differing:
        if status == STATUS_UNAVAILABLE:
            report.identical += 1  # the held row ran the trial (or neither did): keep it
            continue
        if held_status != STATUS_UNAVAILABLE:
            report.conflict_count += 1
            if len(report.conflicts) < SHOWN:
                report.conflicts.append(_conflict(db, key, source, earlier, target, on_conflict))
            if on_conflict != "keep-last":
                continue
        replace.append((key,))
        report.replaced += 1
    db.executemany("INSERT INTO temp.replace_keys VALUES (?)", replace)
    db.execute(
        f"INSERT OR REPLACE INTO main.trials ({cols}) SELECT {cols} FROM temp.incoming "
        "WHERE trial_key IN (SELECT trial_key FROM temp.replace_keys)"
    )
    report.added += db.execute(
        f"INSERT INTO main.trials ({cols}) SELECT {cols} FROM temp.incoming i "
        "WHERE NOT EXISTS (SELECT 1 FROM main.trials t WHERE t.trial_key = i.trial_key)"
    ).rowcount
    if _stage(db, source, SUPERSEDED, "incoming_superseded"):
        db.execute(
            f"INSERT INTO main.superseded_trials ({cols}) SELECT {cols} FROM temp.incoming_superseded "
            f"EXCEPT SELECT {cols} FROM main.superseded_trials"
        )
    if "services" in source.columns:
        with contextlib.closing(connect_read_only(source.path)) as src:
            present = source.columns["services"]
            for row in src.execute(f"SELECT {', '.join(present)} FROM services ORDER BY id"):
                values = dict(zip(present, row, strict=True))
                full = tuple(values.get(c) for c in SERVICE_COLUMNS)
                if full not in services:
                    services.add(full)
                    db.execute(
                        f"INSERT INTO services ({', '.join(SERVICE_COLUMNS)}) "
                        f"VALUES ({', '.join('?' for _ in SERVICE_COLUMNS)})",
                        full,
                    )
                    report.services_added += 1
    _stage(db, source, PLAN_SLOTS, "incoming_slots")
    _stage(db, source, PLAN_TRIALS, "incoming_plan")
    # A shard's recorded plan replaces what the target knew of that shard; other shards' counts only fill gaps.
    db.execute(
        "DELETE FROM main.plan_trials WHERE (shards, shard) IN "
        "(SELECT shards, shard FROM temp.incoming_slots WHERE recorded = 1)"
    )
    db.execute("INSERT OR REPLACE INTO main.plan_slots SELECT * FROM temp.incoming_slots WHERE recorded = 1")
    db.execute("INSERT OR IGNORE INTO main.plan_slots SELECT * FROM temp.incoming_slots WHERE recorded = 0")
    db.execute(
        "INSERT OR IGNORE INTO main.plan_trials SELECT p.* FROM temp.incoming_plan p JOIN temp.incoming_slots s "
        "ON s.shards = p.shards AND s.shard = p.shard AND s.recorded = 1"
    )
    _stage(db, source, PLAN_DEFINITIONS, "incoming_definitions")
    db.execute("INSERT OR IGNORE INTO main.plan_definitions SELECT * FROM temp.incoming_definitions")
    for name in _STAGED:
        db.execute(f"DROP TABLE IF EXISTS temp.{name}")


def _conflict(
    db: sqlite3.Connection, key: str, source: _Source, earlier: list[_Source], target: Path, on_conflict: str
) -> Conflict:
    """The conflict of ``key``: which columns differ, and between which stores."""
    select = f"SELECT {', '.join(RESULT_COLUMNS)} FROM {{}} WHERE trial_key = ?"
    held = dict(zip(RESULT_COLUMNS, db.execute(select.format("main.trials"), (key,)).fetchone(), strict=True))
    new = dict(zip(RESULT_COLUMNS, db.execute(select.format("temp.incoming"), (key,)).fetchone(), strict=True))
    held_from = next((s.path for s in earlier if _holds(s.path, key)), target)
    if on_conflict == "keep-last":
        return Conflict(key, source.path, held_from, differing_columns(held, new))
    return Conflict(key, held_from, source.path, differing_columns(held, new))


def _holds(path: Path, key: str) -> bool:
    old_form = key.rsplit("|", 1)[0]  # a store from before keys carried the dataset hash
    with contextlib.closing(connect_read_only(path)) as db:
        return db.execute("SELECT 1 FROM trials WHERE trial_key IN (?, ?)", (key, old_form)).fetchone() is not None


def _supersede(db: sqlite3.Connection) -> dict[str, int]:
    """One content per dataset name in ``trials``: the others' rows move to ``superseded_trials``."""
    contents = db.execute(
        "SELECT dataset, dataset_hash, MAX(finished_at) FROM trials WHERE dataset_hash IS NOT NULL "
        "AND dataset IN (SELECT dataset FROM trials WHERE dataset_hash IS NOT NULL GROUP BY dataset "
        "HAVING COUNT(DISTINCT dataset_hash) > 1) GROUP BY dataset, dataset_hash"
    ).fetchall()
    by_dataset: dict[str, list[tuple[str, str]]] = {}
    for dataset, content, latest in contents:
        by_dataset.setdefault(dataset, []).append((content, latest or ""))
    moved: dict[str, int] = {}
    cols = ", ".join(COLUMNS)
    for dataset, found in by_dataset.items():
        old = {
            h
            for (h,) in db.execute("SELECT DISTINCT dataset_hash FROM superseded_trials WHERE dataset = ?", (dataset,))
        }
        # content no store has superseded first, then the latest trial (then the hash, for a deterministic tie)
        current = max(found, key=lambda c: (c[0] not in old, c[1], c[0]))[0]
        stale = "FROM trials WHERE dataset = ? AND dataset_hash IS NOT NULL AND dataset_hash != ?"
        db.execute(f"INSERT INTO superseded_trials ({cols}) SELECT {cols} {stale}", (dataset, current))
        moved[dataset] = db.execute(f"DELETE {stale}", (dataset, current)).rowcount
    return moved


def completeness(db: sqlite3.Connection) -> Completeness | None:
    """Which trials of the plans the store's shards recorded lack an outcome; None when no shard recorded a plan.

    Each plan is recomputed from the definition its shards recorded (``plan_from_definition``), checked against its
    plan id, and its shards' trials are spelled out and looked up: the counts a store records are never believed
    (a shard store holding 0 or -100 planned trials once made a merge "complete"). A plan without a definition (an
    older orchestrator's) or whose definition does not give its id cannot be counted, so the merge is not complete.
    """
    slots = db.execute("SELECT shards, shard, plan_id, recorded FROM plan_slots ORDER BY shards, shard").fetchall()
    if not slots:
        return None
    definitions: dict[str, list[str]] = {}
    for plan_id, definition in db.execute("SELECT plan_id, definition FROM plan_definitions"):
        definitions.setdefault(plan_id, []).append(definition)
    counts = tuple(sorted({s[0] for s in slots}))
    plans = tuple(sorted({s[2] for s in slots}))
    gaps: list[ShardGap] = []
    unverified: list[str] = []
    planned = 0
    for plan_id in plans:
        if legacy_plan_id(plan_id):
            continue
        plan, why = _recomputed(plan_id, definitions.get(plan_id, []))
        if plan is None:
            unverified.append(f"{plan_id} ({why})")
            continue
        for shards in sorted({s[0] for s in slots if s[2] == plan_id}):
            if shards > max(1, len(plan.cells)):
                unverified.append(f"{plan_id} ({shards:,} shards recorded for its {len(plan.cells):,} cells)")
                continue
            recorded = {s[1] for s in slots if s[2] == plan_id and s[0] == shards and s[3]}
            sizes, done = plan.shard_trials(shards), _done_per_shard(db, plan, shards)
            planned = sum(sizes) if shards == counts[-1] else planned
            gaps += [
                ShardGap(shard, shards, size - done.get(shard, 0), size, shard in recorded)
                for shard, size in enumerate(sizes)
                if size > done.get(shard, 0)
            ]
    return Completeness(
        plans=plans,
        shard_counts=counts,
        planned=planned,
        gaps=tuple(gaps),
        legacy=tuple((s[1], s[0]) for s in slots if s[3] and legacy_plan_id(s[2])),
        unverified=tuple(unverified),
    )


def _recomputed(plan_id: str, definitions: list[str]) -> tuple[Plan | None, str]:
    """The plan one of its recorded definitions describes, the one ``plan_id`` digests; else None and why."""
    if not definitions:
        return None, "no definition recorded: an older orchestrator ran its shards"
    why = ""
    for definition in definitions:  # a damaged store's definition beside a good one: the good one counts
        try:
            plan = plan_from_definition(definition)
        except PlanDefinitionError as exc:
            why = str(exc)
            continue
        if plan.plan_id() == plan_id:
            return plan, ""
        why = f"its recorded definition gives plan id {plan.plan_id()}"
    return None, why


def _done_per_shard(db: sqlite3.Connection, plan: Plan, shards: int) -> dict[int, int]:
    """Per shard of ``plan`` in ``shards``: its trials (spelled out now, cell by cell) that have an outcome here."""
    db.execute("DROP TABLE IF EXISTS temp.planned")
    db.execute("CREATE TABLE temp.planned (trial_key TEXT PRIMARY KEY, shard INTEGER)")
    batch: list[tuple[str, int]] = []
    for cell, shard in zip(plan.cells, plan.shards(shards), strict=True):
        batch += [(t.key, shard) for t in plan.trials([cell])]
        if len(batch) >= _BATCH:
            db.executemany("INSERT OR IGNORE INTO temp.planned VALUES (?, ?)", batch)
            batch = []
    db.executemany("INSERT OR IGNORE INTO temp.planned VALUES (?, ?)", batch)
    marks = ", ".join("?" for _ in RETRIED_STATUSES)
    done = db.execute(
        "SELECT p.shard, COUNT(*) FROM temp.planned p JOIN main.trials t ON t.trial_key = p.trial_key "
        f"WHERE t.status NOT IN ({marks}) GROUP BY p.shard",
        RETRIED_STATUSES,
    ).fetchall()
    db.execute("DROP TABLE temp.planned")
    return dict(done)


def conflict_message(conflicts: list[Conflict], total: int | None = None) -> str:
    """One line naming the conflicting keys (the first few) and how to resolve them."""
    total = len(conflicts) if total is None else total
    first = "; ".join(
        f"{c.key} ({', '.join(c.differing)} differ between {c.kept_from} and {c.other_from})" for c in conflicts[:SHOWN]
    )
    more = f" and {total - SHOWN} more" if total > SHOWN else ""
    return (
        f"{total} trial key(s) hold different results in different stores: {first}{more}; "
        "nothing was merged (pass --on-conflict keep-first or keep-last to choose)"
    )
