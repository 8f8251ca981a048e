"""The run store: a SQLite file with one row per trial (table ``trials``) and one per service start (``services``).

Each record is written in its own transaction in WAL mode with full fsync, so
that a ``kill -9`` at any moment leaves a readable file in which every trial
is either wholly stored or absent. Rows of an environment failure (status
``unavailable``: the service was down, hung or not ready) are retried by a rerun,
and so is a ``timeout`` stored under a smaller time limit than the rerun's; every
other row is the trial's outcome and counts as done.

A trial's key carries its dataset's content hash. When a dataset registered
again under the same name (``datasets add --replace``) gets its first trial, the
rows of its earlier content move to ``superseded_trials``: kept, never lost, but
no longer read by ``show``/``export``/``report``, which so never mix two graphs.

One orchestrator writes a store at a time: a sweep claims it (exclusive
``flock``s on ``<store>.lock`` beside the resolved path and on the database file
itself, so a symlink or a hard link reaches the same claim; released by the kernel
when the process ends, even by ``kill -9``) and a second one is refused with who holds it. Readers
(``show``/``export``/``report``) never claim and open the store read-only, also
on a read-only file system or directory.

``services`` holds warm-up that belongs to no method's workflow: the seconds a
service process took to start and import (embedded services only) and the time
of one tiny fit+predict per method right after it came up (first-call lazy
initialisation: CUDA context, checkpoint loading, kernel caches). Trials are
never charged for it.

A shard's store also keeps the plan it ran (``plan_slots``: every shard of the plan
with its trial count; ``plan_trials``: the keys of the shards this store ran), so a
merge can tell a complete sweep from a partial one without planning it again; and
``meta`` holds what a merge concluded (``merge``: complete or partial, and what is
missing), which ``report`` and ``show`` read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from contract.errors import UserError
from orchestrator.metrics import RANGES_TEXT, out_of_range, range_violation_sql
from orchestrator.records import COLUMNS, RETRIED_STATUSES, STATUS_TIMEOUT, TrialRecord, current_key

TRIAL_ORDER = "ORDER BY method, dataset, regime, split, trial_index"  # how the store hands out its trials


@dataclass
class ServiceRecord:
    """One service brought into use by a sweep (a start, a restart, or a remote endpoint first dialled)."""

    endpoint: str
    family: str
    source: str  # embedded | remote | in-process (nodeground.run)
    pool: str  # the method or family name trials were routed by
    started_at: str  # UTC timestamp of the process start (embedded) or first contact (remote)
    start_seconds: float | None = None  # process start + imports + first health answer; None for remote endpoints
    warmup_seconds: float | None = None  # the warm-up fits+predicts below, end to end
    warmup_methods: str = ""  # comma-separated methods warmed up
    warmup_error: str | None = None  # what failed during warm-up (the sweep goes on)
    pid: int | None = None


SERVICE_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ServiceRecord))


def _sql_type(annotation: str) -> str:
    return "REAL" if "float" in annotation else "INTEGER" if ("int" in annotation or "bool" in annotation) else "TEXT"


def _types(record: type) -> dict[str, str]:
    return {f.name: _sql_type(str(f.type)) for f in dataclasses.fields(record)}


def _required(record: type) -> frozenset[str]:
    """The fields a record cannot be made without: their columns are never NULL in a store we wrote."""
    missing = dataclasses.MISSING
    return frozenset(
        f.name for f in dataclasses.fields(record) if f.default is missing and f.default_factory is missing
    )


@dataclass(frozen=True)
class Table:
    """A store table: its columns (name -> SQL type), those a row must fill, and its primary key."""

    name: str
    types: dict[str, str]
    required: frozenset[str]
    key: tuple[str, ...] = ()
    leading: str = ""  # a column before the typed ones (the services' row id)

    def ddl(self, name: str | None = None) -> str:
        inline = len(self.key) == 1
        cols = [f"{c} {t}{' PRIMARY KEY' if inline and c == self.key[0] else ''}" for c, t in self.types.items()]
        if self.key and not inline:
            cols.append(f"PRIMARY KEY ({', '.join(self.key)})")
        if self.leading:
            cols.insert(0, self.leading)
        return f"CREATE TABLE IF NOT EXISTS {name or self.name} ({', '.join(cols)})"


TRIALS = Table("trials", _types(TrialRecord), _required(TrialRecord), ("trial_key",))
SUPERSEDED = Table("superseded_trials", _types(TrialRecord), _required(TrialRecord))
SERVICES = Table(
    "services", _types(ServiceRecord), _required(ServiceRecord), leading="id INTEGER PRIMARY KEY AUTOINCREMENT"
)
# Every shard of the plan this store's shard belongs to: its trial count, and whether its keys are here (recorded).
PLAN_SLOTS = Table(
    "plan_slots",
    {"shards": "INTEGER", "shard": "INTEGER", "plan_id": "TEXT", "trials": "INTEGER", "recorded": "INTEGER"},
    frozenset({"shards", "shard", "plan_id", "trials", "recorded"}),
    ("shards", "shard"),
)
PLAN_TRIALS = Table(  # the keys of each recorded shard
    "plan_trials",
    {"shards": "INTEGER", "shard": "INTEGER", "trial_key": "TEXT"},
    frozenset({"shards", "shard", "trial_key"}),
    ("shards", "shard", "trial_key"),
)
PLAN_DEFINITIONS = Table(  # what each recorded plan id digests: a merge recomputes the plan's trials from it
    "plan_definitions",
    {"plan_id": "TEXT", "definition": "TEXT"},
    frozenset({"plan_id", "definition"}),
    ("plan_id", "definition"),
)
META = Table("meta", {"key": "TEXT", "value": "TEXT"}, frozenset({"key"}), ("key",))
TABLES = (TRIALS, SUPERSEDED, SERVICES, PLAN_SLOTS, PLAN_TRIALS, PLAN_DEFINITIONS, META)
MERGE_META_KEY = "merge"  # meta row a merge writes: JSON with "state" (complete | partial) and what is missing


# A plan id that digests the plan's definition (``orchestrator.plan.Plan.plan_id``) starts with this. One without it
# was recorded by an older orchestrator, which digested every planned key: the two kinds never match each other.
PLAN_ID_PREFIX = "def1-"


def legacy_plan_id(plan_id: str) -> bool:
    """Whether a recorded plan id is of the older kind (a digest of every key), which no plan id of today matches."""
    return not plan_id.startswith(PLAN_ID_PREFIX)


@dataclass(frozen=True)
class ShardPlan:
    """What a shard task records before its first trial: the plan's shards and this shard's trial keys."""

    plan_id: str  # digest of the plan's definition (orchestrator.plan.Plan.plan_id)
    shards: int
    shard: int
    counts: tuple[int, ...]  # trials of every shard of the plan
    keys: tuple[str, ...]  # this shard's trial keys
    definition: str = ""  # what the plan id digests, as JSON (``orchestrator.plan.Plan.definition``): a merge
    # recomputes every shard's trials from it, never trusting ``counts``


class StoreBusy(RuntimeError, UserError):
    """Another orchestrator is writing this store."""


@dataclass
class Claim:
    """The descriptors that hold a store's claim: its ``.lock`` file's, and its database file's where it exists."""

    fds: tuple[int, ...]

    def close(self) -> None:
        """Release the claim (closing the descriptors releases their flocks)."""
        for fd in self.fds:
            os.close(fd)
        self.fds = ()


def claim_file(path: Path) -> Path:
    """The file a store's claim flocks: ``<store>.lock`` beside the path with every symlink resolved."""
    real = Path(os.path.realpath(path))
    return real.with_name(real.name + ".lock")


def claim_lock(path: Path) -> Claim:
    """Claim the store at ``path`` for this process: exclusive flocks on ``<store>.lock`` and on the store file itself.

    The claim is the file's, not the name's: the ``.lock`` file sits beside the path with every symlink resolved,
    and the database file (where it exists) is flocked too, which a hard link under another name shares. The kernel
    releases both when the descriptors close or the process ends, also under ``kill -9``. StoreBusy names the
    process that holds it, or says that the file system cannot lock.
    """
    real = Path(os.path.realpath(path))
    lock = claim_file(path)
    fd = _flock(os.open(lock, os.O_RDWR | os.O_CREAT, 0o644), path)
    if fd is None:
        holder = _holder(lock)
        raise StoreBusy(
            f"{path} is being written by another orchestrator ({holder}); wait for it to finish, "
            "or give this run its own --store (two writers would compute every trial twice)"
        )
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}".encode(), 0)
    try:
        store_fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return Claim((fd,))  # a store not made yet: nothing can reach it by another name
    except BaseException:
        os.close(fd)
        raise
    if _flock(store_fd, path, fd) is None:
        os.close(fd)
        raise StoreBusy(
            f"{path} is being written by another orchestrator through another name of the same file (a hard link); "
            "wait for it to finish, or give this run its own --store"
        )
    return Claim((fd, store_fd))


def drop_claim(path: Path) -> None:
    """Remove the store's ``.lock`` file, claimed first so that no writer holds it (a finished submission bundle holds
    only its sealed files). A claimant racing the removal still meets the database file's flock, which every claim
    takes; StoreBusy while another process writes the store."""
    claim = claim_lock(path)
    try:
        claim_file(path).unlink(missing_ok=True)
    finally:
        claim.close()


def _flock(fd: int, path: Path, *also: int) -> int | None:
    """``fd`` with an exclusive flock taken, or None (``fd`` closed) when another process holds one; StoreBusy (every
    descriptor closed) when the file system refuses flock."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError as exc:
        for held in (fd, *also):
            os.close(held)
        raise StoreBusy(
            f"cannot claim {path}: its file system refuses flock ({exc.strerror}; Lustre mounted without "
            "-o flock?): keep stores on a local disk (docs/cluster.md)"
        ) from None
    return fd


def _holder(lock: Path) -> str:
    try:
        with open(lock, "rb") as held:
            return held.read(512).decode(errors="replace").strip() or "another process"
    except OSError:
        return "another process"


class Store:
    def __init__(self, path: Path, claim: bool = False) -> None:
        """Open (creating or upgrading) a store; ``claim`` takes the writer's claim before anything is written."""
        self._claim: Claim | None = None
        self.path = Path(path)
        if self.path.exists() and not self.path.is_file():  # a FIFO or a device would hang SQLite's first read
            raise ValueError(f"{self.path} is not a NodeGround run store: not a regular file")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if claim:
            self.claim()
        try:
            self._open()
        except BaseException:
            self.close()
            raise
        placeholders = ", ".join("?" for _ in COLUMNS)
        self._insert = f"INSERT OR REPLACE INTO trials ({', '.join(COLUMNS)}) VALUES ({placeholders})"
        self._service_insert = (
            f"INSERT INTO services ({', '.join(SERVICE_COLUMNS)}) VALUES ({', '.join('?' for _ in SERVICE_COLUMNS)})"
        )

    def _open(self) -> None:
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # WAL at synchronous=NORMAL: a commit appends to the WAL without an fsync (the WAL is synced at each
        # checkpoint). A killed process (kill -9, OOM, crash) loses nothing committed: the WAL is in the OS
        # page cache and the next open replays it. Only an OS crash or power loss can drop the last few
        # commits, and never corrupts the database (WAL frames are checksummed; a torn tail is discarded).
        # A dropped trial is not in done_keys and is re-run on resume, so nothing is lost or duplicated.
        self._db.execute("PRAGMA synchronous=NORMAL")
        for table in TABLES:
            self._db.execute(table.ddl())
        self._db.execute("CREATE INDEX IF NOT EXISTS trials_cell ON trials (method, dataset, regime, split)")
        self._add_missing_columns()
        self._db.execute("CREATE INDEX IF NOT EXISTS trials_content ON trials (dataset, dataset_hash)")
        self._upgrade_keys()

    def _add_missing_columns(self) -> None:
        """A store written by an older version gains columns added since (as NULL)."""
        for table in (TRIALS, SUPERSEDED, SERVICES):
            present = {row[1] for row in self._db.execute(f"PRAGMA table_info({table.name})")}
            for name, sql_type in table.types.items():
                if name not in present:
                    self._db.execute(f"ALTER TABLE {table.name} ADD COLUMN {name} {sql_type}")

    def _upgrade_keys(self) -> None:
        """Keys written before they carried the dataset's content hash gain the hash their row recorded.

        So a rerun over an old store skips exactly the trials whose dataset is
        unchanged and runs again those whose dataset was registered anew.
        """
        self._db.create_function("current_key", 2, current_key, deterministic=True)
        self._db.execute(
            "UPDATE OR IGNORE trials SET trial_key = current_key(trial_key, dataset_hash) "
            "WHERE trial_key != current_key(trial_key, dataset_hash)"
        )

    def contents_keyed_otherwise(self, dataset: str, identity: str) -> set[str]:
        """The content hashes recorded by ``dataset``'s rows whose key ends in another dataset identity."""
        query = "SELECT DISTINCT dataset_hash FROM trials WHERE dataset = ? AND substr(trial_key, -?) != ?"
        return {h for (h,) in self._db.execute(query, (dataset, len(identity) + 1, f"|{identity}")) if h}

    def rekey_content(self, dataset: str, content_hash: str, identity: str) -> int:
        """Keys of ``dataset`` that end in its content hash end in ``identity`` instead (the catalog's identity of
        that content, see ``orchestrator.data.registry.dataset_identity``); how many rows changed.

        One transaction; a row whose new key is already stored keeps its old one (``OR IGNORE``, as ``_upgrade_keys``).
        """
        suffix = f"|{content_hash}"
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            changed = self._db.execute(
                "UPDATE OR IGNORE trials SET trial_key = substr(trial_key, 1, length(trial_key) - ?) || ? "
                "WHERE dataset = ? AND dataset_hash = ? AND substr(trial_key, -?) = ?",
                (len(suffix), f"|{identity}", dataset, content_hash, len(suffix), suffix),
            ).rowcount
        return changed

    def claim(self) -> None:
        """Become this store's only writer for as long as it is open; StoreBusy names the current one."""
        if self._claim is None:
            self._claim = claim_lock(self.path)

    def close(self) -> None:
        if hasattr(self, "_db"):  # absent when the claim or the open failed
            self._db.close()
        if self._claim is not None:
            self._claim.close()  # releases the flocks
            self._claim = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def done_keys(self, time_limit: float | None = None) -> set[str]:
        """Keys a rerun skips: every stored outcome except environment failures and, given the rerun's
        ``time_limit``, timeouts stored under a smaller limit (or an unrecorded one): a longer limit may finish them."""
        where, params = _done_rule(time_limit)
        return {key for (key,) in self._db.execute(f"SELECT trial_key FROM trials WHERE {where}", params)}

    def write(self, record: TrialRecord) -> None:
        """Store one trial in its own transaction; a rerun of the same key replaces it.

        Rows of the same dataset name with another content hash move to ``superseded_trials`` first.
        """
        row = record.as_row()
        stale = "FROM trials WHERE dataset = ? AND dataset_hash IS NOT ? AND dataset_hash IS NOT NULL"
        args = (record.dataset, record.dataset_hash)
        if record.dataset_hash and self._db.execute(f"SELECT 1 {stale} LIMIT 1", args).fetchone():
            columns = ", ".join(COLUMNS)
            with self._db:  # one transaction: moved and written together, or neither
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute(f"INSERT INTO superseded_trials ({columns}) SELECT {columns} {stale}", args)
                self._db.execute(f"DELETE {stale}", args)
                self._db.execute(self._insert, [row[c] for c in COLUMNS])
            return
        self._db.execute(self._insert, [row[c] for c in COLUMNS])

    def supersede(self, keys: Iterable[str]) -> int:
        """Move the rows of ``keys`` to ``superseded_trials`` (kept, never lost), so a rerun runs them again; how many
        moved."""
        chosen = sorted(set(keys))
        columns = ", ".join(COLUMNS)
        moved = 0
        with self.transaction() as db:
            for start in range(0, len(chosen), 500):  # SQLite's bound on a statement's parameters
                part = chosen[start : start + 500]
                where = f"FROM trials WHERE trial_key IN ({', '.join('?' for _ in part)})"
                db.execute(f"INSERT INTO superseded_trials ({columns}) SELECT {columns} {where}", part)
                moved += db.execute(f"DELETE {where}", part).rowcount
        return moved

    def write_many(self, records: Iterable[TrialRecord]) -> None:
        for record in records:
            self.write(record)

    def write_rows(self, trials: Iterable[dict], services: Iterable[dict] = ()) -> None:
        """Store trial rows and service rows (plain column dicts, e.g. from another store) in one transaction."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany(self._insert, ([row.get(c) for c in COLUMNS] for row in trials))
            self._db.executemany(self._service_insert, ([row.get(c) for c in SERVICE_COLUMNS] for row in services))
        except BaseException:
            self._rollback()
            raise
        self._db.execute("COMMIT")

    def _rollback(self) -> None:
        """Roll back the open transaction, if SQLite has not already (it does on a full disk, SQLITE_FULL): a ROLLBACK
        then would fail ("no transaction is active") and hide why the write failed."""
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (taken at once, so no other writer slips in); rolled back when the block raises."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._rollback()
            raise
        self._db.execute("COMMIT")

    def write_plan(self, plan: ShardPlan) -> None:
        """Record the plan this store's shard runs, replacing the one an earlier run recorded."""
        with self.transaction() as db:
            db.execute("DELETE FROM plan_slots")
            db.execute("DELETE FROM plan_trials")
            db.executemany(
                "INSERT INTO plan_slots VALUES (?, ?, ?, ?, ?)",
                [(plan.shards, i, plan.plan_id, n, int(i == plan.shard)) for i, n in enumerate(plan.counts)],
            )
            db.executemany(
                "INSERT OR IGNORE INTO plan_trials VALUES (?, ?, ?)",
                ((plan.shards, plan.shard, key) for key in plan.keys),
            )
            if plan.definition:
                db.execute("INSERT OR IGNORE INTO plan_definitions VALUES (?, ?)", (plan.plan_id, plan.definition))

    def write_service(self, record: ServiceRecord) -> None:
        row = dataclasses.asdict(record)
        self._db.execute(self._service_insert, [row[c] for c in SERVICE_COLUMNS])

    def frame(self) -> pd.DataFrame:
        return pd.read_sql(f"SELECT * FROM trials {TRIAL_ORDER}", self._db)

    def services_frame(self) -> pd.DataFrame:
        return pd.read_sql("SELECT * FROM services ORDER BY id", self._db)


def _done_rule(time_limit: float | None) -> tuple[str, list[object]]:
    """The WHERE clause (and its parameters) of the rows a rerun under ``time_limit`` skips (``Store.done_keys``)."""
    marks = ", ".join("?" for _ in RETRIED_STATUSES)
    where = f"status NOT IN ({marks})"
    params: list[object] = list(RETRIED_STATUSES)
    if time_limit is not None:
        where += " AND NOT (status = ? AND (time_limit_s IS NULL OR time_limit_s < ?))"
        params += [STATUS_TIMEOUT, time_limit]
    return where, params


def read_done(path: Path, time_limit: float | None) -> list[tuple[str, str, str, str, int, str | None]]:
    """(key, method, dataset, regime, split, dataset hash) of each row a rerun under ``time_limit`` skips."""
    where, params = _done_rule(time_limit)
    query = f"SELECT trial_key, method, dataset, regime, split, dataset_hash FROM trials WHERE {where}"
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no run store at {path}")
    if not path.is_file():
        raise ValueError(f"{path} is not a NodeGround run store: not a regular file")
    db = connect_read_only(path)
    try:
        return db.execute(query, params).fetchall()
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{path} is not a NodeGround run store: {exc}") from None
    finally:
        db.close()


def connect_read_only(path: Path, immutable: bool = False) -> sqlite3.Connection:
    """A read-only connection to a store, also where SQLite cannot create WAL's ``-shm`` file.

    A read-only file system or directory makes ``mode=ro`` fail on a WAL store
    ("unable to open database file"); it is then opened ``immutable``, which reads
    the database file without locks (what a writer left in an uncheckpointed
    ``-wal`` beside it, after a crash, is not seen: nothing could have written it back).
    ``immutable`` opens it so at once: the database file alone, whatever lies beside it (a sealed bundle's store).
    """
    uri = Path(path).resolve().as_uri()
    if immutable:
        return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True)
    db = None
    try:
        db = sqlite3.connect(f"{uri}?mode=ro", uri=True)
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError:
        if db is not None:
            db.close()
        return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True)


def open_existing(
    path: Path, error: type[ValueError] = ValueError, immutable: bool = False, ranges: bool = True
) -> sqlite3.Connection:
    """A read-only connection to the store at ``path``: FileNotFoundError when absent, ``error`` when not SQLite
    (or not a regular file: a FIFO would hang SQLite's first read) or, unless ``ranges`` is off (for a reader that
    checks every value itself, as a merge does), when it holds a number out of its range (``refuse_out_of_range``)."""
    if not path.exists():
        raise FileNotFoundError(f"no run store at {path}")
    if not path.is_file():
        raise error(f"{path} is not a NodeGround run store: not a regular file")
    try:
        db = connect_read_only(path, immutable)
    except sqlite3.DatabaseError as exc:
        raise error(f"{path} is not a NodeGround run store: {exc}") from None
    try:
        if ranges:
            refuse_out_of_range(db, path, error)
    except BaseException:
        db.close()
        raise
    return db


def refuse_out_of_range(db: sqlite3.Connection, path: Path, error: type[Exception] = ValueError) -> None:
    """Refuse a store (``error``, one line naming the first row's key) holding a metric or cost outside its range
    (``orchestrator.metrics.VALUE_RANGES``): an accuracy of 5.0 or a val_loss of -1 came from no trial."""
    try:
        present = [row[1] for row in db.execute("PRAGMA table_info(trials)")]
    except sqlite3.DatabaseError as exc:
        raise error(f"{path} is not a NodeGround run store: {exc}") from None
    found = range_violation_sql(present)
    if found is None:
        return
    where, checked = found
    label = "trial_key" if "trial_key" in present else "rowid"
    row = db.execute(f"SELECT {label}, {', '.join(checked)} FROM trials WHERE {where} LIMIT 1").fetchone()
    if row is not None:
        values = dict(zip(checked, row[1:], strict=True))
        raise error(
            f"{path}: trial {str(row[0])[:120]!r} holds {out_of_range(values, checked)}, which no trial computes "
            f"({RANGES_TEXT}); the store is refused"
        )


def _read(path: Path, query: str, immutable: bool = False) -> pd.DataFrame:
    path = Path(path)
    db = open_existing(path, immutable=immutable)
    try:
        return pd.read_sql(query, db)
    except (pd.errors.DatabaseError, sqlite3.DatabaseError) as exc:
        raise ValueError(f"{path} is not a NodeGround run store: {exc}") from None
    finally:
        db.close()


def read_trials(path: Path, immutable: bool = False) -> pd.DataFrame:
    """The long table of trials from a store, refusing a path that is not one; a column added since an older store
    was written reads as missing values (readers never upgrade a store)."""
    frame = _read(path, f"SELECT * FROM trials {TRIAL_ORDER}", immutable)
    for name in COLUMNS:
        if name not in frame.columns:
            frame[name] = None
    return frame


def done_by_slot(db: sqlite3.Connection) -> dict[tuple[int, int], int]:
    """Planned trials with an outcome (any status but a retried one) per recorded shard: (shards, shard) -> count."""
    marks = ", ".join("?" for _ in RETRIED_STATUSES)
    rows = db.execute(
        "SELECT p.shards, p.shard, COUNT(*) FROM plan_trials p JOIN trials t ON t.trial_key = p.trial_key "
        f"WHERE t.status NOT IN ({marks}) GROUP BY p.shards, p.shard",
        RETRIED_STATUSES,
    )
    return {(shards, shard): count for shards, shard, count in rows}


def shard_progress(db: sqlite3.Connection, shard: int) -> tuple[int | None, int | None]:
    """(done, planned) trials of the shard this store recorded as its own; (None, None) before it recorded a plan."""
    try:
        row = db.execute("SELECT shards, trials FROM plan_slots WHERE shard = ? AND recorded = 1", (shard,)).fetchone()
    except sqlite3.OperationalError:  # a store from before plans were recorded
        return None, None
    if row is None:
        return None, None
    return done_by_slot(db).get((row[0], shard), 0), row[1]


def read_merge_state(path: Path) -> dict | None:
    """What the merge that wrote this store concluded (``state``: complete or partial; what is missing), or None.

    None for a store no merge of a recorded plan wrote, and for a file that is not a SQLite store (an export).
    """
    path = Path(path)
    if not path.is_file():
        return None
    try:
        db = connect_read_only(path)
        try:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (MERGE_META_KEY,)).fetchone()
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return None
    try:
        return json.loads(row[0]) if row else None
    except (TypeError, ValueError):
        return None


def partial_note(path: Path) -> str | None:
    """One line for ``report`` and ``show`` when the store is a partial merge, else None."""
    state = read_merge_state(path)
    if not state or state.get("state") != "partial":
        return None
    return (
        f"{path} is a partial merge: {state.get('missing_trials', '?')} of {state.get('planned', '?')} planned trials "
        f"are missing ({state.get('summary', 'see the merge log')}); results may change once the sweep completes"
    )


def read_trial_columns(path: Path, columns: Sequence[str], immutable: bool = False) -> pd.DataFrame:
    """Some columns of a store's trials (a store of two million rows read whole would not fit in memory)."""
    unknown = sorted(set(columns) - set(COLUMNS))
    if unknown:
        raise ValueError(f"unknown trial columns {', '.join(unknown)}")
    db = open_existing(Path(path), immutable=immutable)
    try:
        present = {row[1] for row in db.execute("PRAGMA table_info(trials)")}
    finally:
        db.close()
    selected = [c if c in present or not present else f"NULL AS {c}" for c in columns]  # a column added since
    return _read(path, f"SELECT {', '.join(selected)} FROM trials", immutable)


def read_services(path: Path) -> pd.DataFrame:
    """Service starts and warm-up of a store (empty for a store written before the table existed)."""
    _read(path, "SELECT 1 FROM trials LIMIT 1")  # the same refusals as read_trials, without reading every row
    try:
        return _read(path, "SELECT * FROM services ORDER BY id")
    except ValueError:
        return pd.DataFrame(columns=["id", *SERVICE_COLUMNS])
