"""The run store: a SQLite file with one row per trial (table ``trials``).

Each record is written in its own transaction in WAL mode with full fsync, so
that a ``kill -9`` at any moment leaves a readable file in which every trial
is either wholly stored or absent. Rows of status ``unavailable`` (the service
was down) are retried by a rerun; every other row counts as done.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from orchestrator.records import COLUMNS, STATUS_UNAVAILABLE, TrialRecord



def _schema() -> str:
    cols = []
    for name, annotation in TrialRecord.__annotations__.items():
        text = str(annotation)
        sql = "REAL" if "float" in text else "INTEGER" if ("int" in text or "bool" in text) else "TEXT"
        cols.append(f"{name} {sql}{' PRIMARY KEY' if name == 'trial_key' else ''}")
    return f"CREATE TABLE IF NOT EXISTS trials ({', '.join(cols)})"


class Store:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(_schema())
        self._db.execute("CREATE INDEX IF NOT EXISTS trials_cell ON trials (method, dataset, regime, split)")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def done_keys(self) -> set[str]:
        rows = self._db.execute("SELECT trial_key FROM trials WHERE status != ?", (STATUS_UNAVAILABLE,))
        return {key for (key,) in rows}

    def write(self, record: TrialRecord) -> None:
        row = record.as_row()
        placeholders = ", ".join("?" for _ in COLUMNS)
        self._db.execute(
            f"INSERT OR REPLACE INTO trials ({', '.join(COLUMNS)}) VALUES ({placeholders})",
            [row[c] for c in COLUMNS],
        )

    def write_many(self, records: Iterable[TrialRecord]) -> None:
        for record in records:
            self.write(record)

    def frame(self) -> pd.DataFrame:
        return pd.read_sql("SELECT * FROM trials ORDER BY method, dataset, regime, split, trial_index", self._db)


def read_trials(path: Path) -> pd.DataFrame:
    """The long table of trials from a store, refusing a path that is not one."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no run store at {path}")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        try:
            return pd.read_sql("SELECT * FROM trials ORDER BY method, dataset, regime, split, trial_index", db)
        except (pd.errors.DatabaseError, sqlite3.DatabaseError) as exc:
            raise ValueError(f"{path} is not a NodeGround run store: {exc}") from None
