"""Submission bundles: sealed, verified, refused when altered or holding built-in rows, merged by origin."""

from __future__ import annotations

import os
import shutil
import sqlite3

import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.records import TrialRecord
from orchestrator.store import Store
from orchestrator.submission.bundle import (
    BundleError,
    finalize_store,
    load_bundle,
    merge_trials,
    seal,
    sealed,
    verify_bundle,
)
from tests.orchestrator.conftest import trial_record


def _record(i: int, origin: str, method: str = "demo") -> TrialRecord:
    return trial_record(
        f"{method}@1|synthetic-tiny|10/10/80|0|{i}",
        method=method,
        method_version="2026-11-29",
        family=method,
        dataset="synthetic-tiny",
        trial_index=i,
        is_default=i == 0,
        config_hash=str(i),
        val_loss=1.0 - 0.1 * i,
        test_primary=0.5 + 0.1 * i,
        test_accuracy=0.5 + 0.1 * i,
        origin=origin,
    )


def _bundle(path, origin="user:abc"):
    path.mkdir()
    with Store(path / "trials.sqlite") as store:
        for i in range(2):
            store.write(_record(i, origin))
    finalize_store(path / "trials.sqlite")
    (path / "submission.json").write_text('{"id": "abc"}\n')
    return seal(path)


def test_bundle_seal_verify_and_tamper(tmp_path):
    checksum = _bundle(tmp_path / "b")
    assert verify_bundle(tmp_path / "b") == checksum
    assert not (tmp_path / "b" / "trials.sqlite-wal").exists()
    trials = load_bundle(tmp_path / "b")
    assert len(trials) == 2 and set(trials["origin"].astype(str)) == {"user:abc"}
    (tmp_path / "b" / "submission.json").write_text('{"id": "evil"}\n')
    with pytest.raises(BundleError, match="changed after the bundle was sealed"):
        verify_bundle(tmp_path / "b")


def test_bundle_refuses_builtin_rows_and_merges(tmp_path):
    _bundle(tmp_path / "fake", origin="builtin")
    with pytest.raises(BundleError, match="user rows only"):
        load_bundle(tmp_path / "fake")
    _bundle(tmp_path / "b")
    builtin = pd.DataFrame([_record(0, "builtin", method="gcn").as_row()])
    merged = merge_trials(builtin, [tmp_path / "b"])
    assert sorted(merged["method"].astype(str).unique()) == ["demo", "gcn"]
    assert dict(zip(merged["method"].astype(str), merged["origin"].astype(str), strict=True)) == {
        "gcn": "builtin",
        "demo": "user:abc",
    }
    clash = pd.DataFrame([_record(0, "builtin", method="demo").as_row()])
    with pytest.raises(BundleError, match="clashes"):
        merge_trials(clash, [tmp_path / "b"])


def _edited_wal(bundle, sql: str) -> bytes:
    """A write-ahead log that, beside the sealed store, makes SQLite read ``sql``'s edit: made on a copy."""
    work = bundle.parent / "work"
    work.mkdir()
    shutil.copy(bundle / "trials.sqlite", work / "trials.sqlite")
    db = sqlite3.connect(work / "trials.sqlite")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute(sql)
    db.commit()
    wal = (work / "trials.sqlite-wal").read_bytes()  # read before the close folds it back
    db.close()
    return wal


def test_a_file_beside_the_sealed_ones_refuses_the_bundle(tmp_path):
    """Finding 1: a crafted trials.sqlite-wal beside the sealed trials.sqlite was read by SQLite; the report showed
    the entry with its metrics edited, ranked first, without breaking the seal."""
    bundle = tmp_path / "b"
    _bundle(bundle)
    (bundle / "trials.sqlite-wal").write_bytes(_edited_wal(bundle, "UPDATE trials SET test_primary = 0.99"))
    with pytest.raises(BundleError, match=r"holds trials.sqlite-wal beside its sealed files"):
        load_bundle(bundle)
    result = CliRunner().invoke(app, ["report", "--bundle", str(bundle), "--out", str(tmp_path / "site")])
    assert result.exit_code == 2 and "trials.sqlite-wal beside its sealed files" in result.output
    assert result.output.count("\n") == 1
    for extra in ("trials.sqlite-wal", "trials.sqlite-shm"):
        (bundle / extra).unlink(missing_ok=True)
    assert set(load_bundle(bundle)["test_primary"]) == {0.5, 0.6}  # the sealed content, as it was sealed
    (bundle / "trials.sqlite-journal").write_bytes(b"\0" * 512)
    with pytest.raises(BundleError, match=r"holds trials.sqlite-journal beside"):
        verify_bundle(bundle)


def test_the_store_is_read_from_a_private_copy_of_exactly_the_sealed_bytes(tmp_path):
    bundle = tmp_path / "b"
    checksum = _bundle(bundle)
    with sealed(bundle) as content:
        assert content.checksum == checksum and content.trials.parent != bundle
        assert content.trials.read_bytes() == (bundle / "trials.sqlite").read_bytes()
        assert not os.access(content.trials, os.W_OK) or os.geteuid() == 0  # read-only (root writes anyway)
        copy = content.trials
    assert not copy.exists()  # gone with the context
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (bundle / "submission.json").unlink()
    (bundle / "submission.json").symlink_to(fifo)
    with pytest.raises(BundleError, match="is a FIFO, not a regular file"):
        load_bundle(bundle)
    (bundle / "submission.json").unlink()
    with open(bundle / "submission.json", "wb") as sparse:  # Finding 12: a 300 GiB sparse submission.json hung
        sparse.truncate(300 << 30)
    with pytest.raises(BundleError, match=r"holds 300.0 GiB, more than the 16.0 MiB it may hold"):
        load_bundle(bundle)
