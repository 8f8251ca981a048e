"""Read the trial record table from a store (SQLite, Parquet or CSV) into typed columns.

Only the columns the analysis needs are read, in chunks, and the repeated strings become
categoricals as each chunk arrives, so a two-million-row store fits in well under a gigabyte.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from contract.errors import UserError
from orchestrator.metrics import RANGES_TEXT, TEST_METRICS, VAL_METRICS, VALUE_RANGES, out_of_range
from orchestrator.protocols import without_calibration
from orchestrator.records import COLUMNS
from orchestrator.store import TRIAL_ORDER, connect_read_only, open_existing, refuse_out_of_range

# Identity and selection columns every analysis needs.
REQUIRED_COLUMNS: tuple[str, ...] = (
    "method",
    "kind",
    "dataset",
    "task_type",
    "regime",
    "split",
    "trial_index",
    "status",
    "val_loss",
    "test_primary",
)
# Read when present; filled with a neutral value otherwise.
OPTIONAL_COLUMNS: tuple[str, ...] = (
    "method_version",
    "origin",
    "primary_metric",
    "fit_service_s",
    "predict_service_s",
    "fit_cpu_s",
    "predict_cpu_s",
    "fit_peak_rss_bytes",
    "fit_peak_gpu_bytes",
    "predict_peak_rss_bytes",
    "predict_peak_gpu_bytes",
    *VAL_METRICS[1:],  # val_loss is required
    *TEST_METRICS,
    "dataset_hash",
    "config_json",  # kept for GFM rows only (the overlap audit reads their checkpoint); others are blank
    "protocol",  # the named protocol of the trial; the cost probe's rows are dropped on reading
)
CATEGORICAL = (
    "method",
    "method_version",
    "kind",
    "dataset",
    "task_type",
    "regime",
    "status",
    "origin",
    "primary_metric",
    "dataset_hash",
    "config_json",
    "protocol",
)
INTEGER = ("split", "trial_index")
METRIC_COLUMNS = ("test_primary", *TEST_METRICS)

_CHUNK_ROWS = 250_000
GFM_CONFIG_SQL = "CASE WHEN kind = 'gfm' THEN config_json ELSE '' END AS config_json"


class AnalysisInputError(UserError):
    """A problem with the input the user can fix (missing store, empty table, unknown column)."""


def _typed(chunk: pd.DataFrame) -> pd.DataFrame:
    if "config_json" in chunk.columns and "kind" in chunk.columns:  # 2 M supervised configs would cost GBs
        chunk["config_json"] = chunk["config_json"].where(chunk["kind"].astype(str) == "gfm", "")
    for col in chunk.columns:
        if col in CATEGORICAL:
            chunk[col] = chunk[col].astype("string").astype("category")
        elif col in INTEGER:
            chunk[col] = pd.to_numeric(chunk[col]).astype("int32")
        else:
            chunk[col] = pd.to_numeric(chunk[col], errors="coerce").astype("float64")
    return chunk


def _concat_typed(chunks: list[pd.DataFrame]) -> pd.DataFrame:
    if not chunks:
        return pd.DataFrame()
    if len(chunks) == 1:
        return chunks[0]
    # Unify categories so concat keeps the categorical dtype instead of falling back to object.
    for col in chunks[0].columns:
        if isinstance(chunks[0][col].dtype, pd.CategoricalDtype):
            cats = pd.Index(sorted(set().union(*(c[col].cat.categories for c in chunks))))
            for c in chunks:
                c[col] = c[col].cat.set_categories(cats)
    return pd.concat(chunks, ignore_index=True)


def _typed_chunks(cursor: sqlite3.Cursor, names: list[str]) -> pd.DataFrame:
    """A query's rows, ``_CHUNK_ROWS`` at a time, each typed as it arrives: one chunk at most is Python objects."""
    chunks = []
    while rows := cursor.fetchmany(_CHUNK_ROWS):
        chunks.append(_typed(pd.DataFrame.from_records(rows, columns=names)))
    return _concat_typed(chunks) if chunks else pd.DataFrame(columns=names)


def read_store_columns(path: Path, columns: Sequence[str]) -> pd.DataFrame:
    """``columns`` of a run store's trials, in the store's order, typed as the analysis types them (``_typed``).

    For `show` on a store of millions of rows: the rest of each row (keys, configurations, JSON) never leaves
    the database, and the repeated strings become categoricals chunk by chunk. A column an older store lacks
    reads as NULL (as ``Store`` adds it). Refused as ``orchestrator.store.read_trials`` refuses:
    FileNotFoundError for no file, ValueError for a file that is not a store.
    """
    path = Path(path)
    db = open_existing(path)
    try:
        present = {row[1] for row in db.execute("PRAGMA table_info(trials)")}
        if not present:
            raise sqlite3.DatabaseError("no such table: trials")
        select = ", ".join(c if c in present else f"NULL AS {c}" for c in columns)
        return _typed_chunks(db.execute(f"SELECT {select} FROM trials {TRIAL_ORDER}"), list(columns))
    except sqlite3.DatabaseError as exc:
        raise ValueError(f"{path} is not a NodeGround run store: {exc}") from None
    finally:
        db.close()


def _read_sqlite(path: Path, immutable: bool = False) -> pd.DataFrame:
    try:
        con = connect_read_only(path, immutable)
    except sqlite3.Error as exc:  # pragma: no cover - depends on the file system
        raise AnalysisInputError(f"cannot open store {path}: {exc}") from None
    try:
        try:
            present = [row[1] for row in con.execute("PRAGMA table_info(trials)")]
        except sqlite3.DatabaseError as exc:
            raise AnalysisInputError(f"{path} is not a SQLite store: {exc}") from None
        if not present:
            raise AnalysisInputError(f"{path} has no table named 'trials'")
        _check_required(present, path)
        refuse_out_of_range(con, path, AnalysisInputError)
        wanted = [c for c in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS) if c in present]
        # config_json of GFM rows only, blanked in SQL so that 2 M supervised configs never leave the database
        select = [GFM_CONFIG_SQL if c == "config_json" and "kind" in present else c for c in wanted]
        return _typed_chunks(con.execute(f"SELECT {', '.join(select)} FROM trials"), wanted)
    finally:
        con.close()


def _check_required(present: list[str], path: Path) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in present]
    if missing:
        raise AnalysisInputError(f"{path}: the trials table lacks required column(s): {', '.join(missing)}")


def load_trials(path: str | Path, immutable: bool = False) -> pd.DataFrame:
    """The trial table at ``path`` (``.sqlite``/``.db``, ``.parquet`` or ``.csv``), typed and completed.

    Raises AnalysisInputError for a missing file, a missing table or column, or an empty table; ``immutable``
    reads a SQLite store's database file alone (a sealed bundle's private copy).
    """
    path = Path(path)
    if not path.exists():
        raise AnalysisInputError(f"store not found: {path}")
    if path.is_dir():
        raise AnalysisInputError(f"store is a directory, expected a file: {path}")
    if not path.is_file():
        raise AnalysisInputError(f"store is not a regular file (a FIFO or a device?): {path}")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            present = pq.read_schema(path).names
        except Exception as exc:  # any pyarrow failure means an unreadable file
            raise AnalysisInputError(f"cannot read Parquet store {path}: {exc}") from None
        _check_required(present, path)
        wanted = [c for c in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS) if c in present]
        df = _typed(pd.read_parquet(path, columns=wanted))
        refuse_out_of_range_frame(df, path)
    elif suffix == ".csv":
        try:
            head = pd.read_csv(path, nrows=0)
        except pd.errors.EmptyDataError:
            raise AnalysisInputError(f"the trials table in {path} is empty") from None
        _check_required(list(head.columns), path)
        wanted = [c for c in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS) if c in head.columns]
        df = _typed(pd.read_csv(path, usecols=wanted))
        refuse_out_of_range_frame(df, path)
    else:
        df = _read_sqlite(path, immutable)
    df = without_calibration(df)
    if len(df) == 0:
        raise AnalysisInputError(f"the trials table in {path} is empty (of trials other than the cost probe's)")
    return complete_columns(df)


def refuse_out_of_range_frame(df: pd.DataFrame, source: object) -> None:
    """Refuse (AnalysisInputError, one line naming the row) a table holding a metric or cost outside its range, as
    ``orchestrator.store.refuse_out_of_range`` refuses such a store: for exports and the shipped reference table."""
    checked = [c for c in VALUE_RANGES if c in df.columns]
    if not checked or df.empty:
        return
    bad = np.zeros(len(df), dtype=bool)
    for column in checked:
        values = pd.to_numeric(df[column], errors="coerce").to_numpy(dtype="float64")
        low, high = VALUE_RANGES[column]
        with np.errstate(invalid="ignore"):
            bad |= ~np.isnan(values) & ~(np.isfinite(values) & (values >= low) & (values <= high))
    if not bad.any():
        return
    row = df.iloc[int(np.flatnonzero(bad)[0])]
    key = (
        row["trial_key"]
        if "trial_key" in df.columns
        else " ".join(str(row[c]) for c in ("method", "dataset", "regime", "split", "trial_index") if c in df.columns)
    )
    raise AnalysisInputError(
        f"{source}: trial {str(key)[:120]!r} holds {out_of_range(row.to_dict(), checked)}, which no trial computes "
        f"({RANGES_TEXT}); refused"
    )


def complete_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Add optional columns that are absent (for tables built in memory) and normalise types."""
    df = df.copy(deep=False)
    unknown = [c for c in df.columns if c not in COLUMNS]
    if unknown:
        # Extra columns are harmless; they are dropped to keep memory predictable.
        df = df.drop(columns=unknown)
    for col in REQUIRED_COLUMNS:
        if col not in df.columns:
            raise AnalysisInputError(f"the trials table lacks required column: {col}")
    defaults = {
        "method_version": "",
        "origin": "builtin",
        "primary_metric": "",
        "dataset_hash": "",
        "config_json": "",
        "protocol": "",
    }
    for col in OPTIONAL_COLUMNS:
        if col not in df.columns:
            df[col] = defaults.get(col, np.nan)
    for col in CATEGORICAL:
        if not isinstance(df[col].dtype, pd.CategoricalDtype):
            df[col] = df[col].fillna(defaults.get(col, "")).astype("string").astype("category")
    for col in INTEGER:
        df[col] = pd.to_numeric(df[col]).astype("int32")
    for col in (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS):
        if col not in CATEGORICAL and col not in INTEGER:
            df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    return df


def competing(trials: pd.DataFrame, methods: Sequence[str]) -> pd.DataFrame:
    """The trials of exactly ``methods`` (registered names): the report then recomputes Elo, ranks, win rates and
    improvability over those entrants, since a rating depends on who competes (never rows of a larger table)."""
    if not methods:
        raise AnalysisInputError("--methods names no method")
    names = trials["method"].astype(str)
    unknown = sorted(set(methods) - set(names))
    if unknown:
        raise AnalysisInputError(
            f"--methods: no trials of {', '.join(unknown)} (the trials hold {', '.join(sorted(set(names)))})"
        )
    return trials[names.isin(set(methods))].reset_index(drop=True)
