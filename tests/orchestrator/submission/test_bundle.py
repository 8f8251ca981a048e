"""Submission bundles: sealed, verified, refused when altered or holding built-in rows, merged by origin."""

from __future__ import annotations

import pandas as pd
import pytest

from orchestrator.records import TrialRecord
from orchestrator.store import Store
from orchestrator.submission.bundle import BundleError, finalize_store, load_bundle, merge_trials, seal, verify_bundle
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
