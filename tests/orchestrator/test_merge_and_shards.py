"""Merging stores by trial key, and the shard partition of a plan (no services involved)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.merge import MergeConflict, merge_stores
from orchestrator.plan import PlannedTrial, shard_of
from orchestrator.records import TrialRecord
from orchestrator.store import ServiceRecord, Store, read_services, read_trials


def record(key: str, status: str = "ok", test_primary: float = 0.8, fit_s: float = 1.0) -> TrialRecord:
    return TrialRecord(
        trial_key=key, method="gcn", method_version="v", family="gnn", kind="supervised", dataset="d",
        dataset_hash="h", task_type="multiclass", num_classes=3, regime="10/10/80", split=0, trial_index=0,
        is_default=True, config_json="{}", config_hash="c", seed=0, status=status, val_loss=0.5,
        test_primary=test_primary, fit_service_s=fit_s, endpoint="127.0.0.1:1",
    )  # fmt: skip


def store(path, *records: TrialRecord, services: int = 0):
    with Store(path) as s:
        for r in records:
            s.write(r)
        for i in range(services):
            s.write_service(
                ServiceRecord(
                    endpoint=f"e{i}", family="gnn", source="embedded", pool="gnn", started_at=f"t{path.name}{i}"
                )
            )
    return path


def keys(path) -> list[str]:
    return sorted(read_trials(path)["trial_key"])


def test_merge_unions_by_key_and_skips_identical_duplicates(tmp_path):
    a = store(tmp_path / "a.sqlite", record("k1"), record("k2"), services=1)
    b = store(
        tmp_path / "b.sqlite", record("k2", fit_s=9.0), record("k3"), services=1
    )  # k2 re-ran elsewhere: other timing, same result
    report = merge_stores(tmp_path / "all.sqlite", [a, b])
    assert (report.added, report.identical, report.conflicts) == (3, 1, [])
    assert keys(tmp_path / "all.sqlite") == ["k1", "k2", "k3"]
    assert (
        read_trials(tmp_path / "all.sqlite").set_index("trial_key").loc["k2", "fit_service_s"] == 1.0
    )  # the first kept
    assert len(read_services(tmp_path / "all.sqlite")) == 2


def test_merge_is_idempotent(tmp_path):
    a = store(tmp_path / "a.sqlite", record("k1"), services=2)
    b = store(tmp_path / "b.sqlite", record("k2"))
    merge_stores(tmp_path / "all.sqlite", [a, b])
    before = read_trials(tmp_path / "all.sqlite")
    again = merge_stores(tmp_path / "all.sqlite", [a, b])
    assert (again.added, again.replaced, again.services_added) == (0, 0, 0)
    assert again.identical == 2
    assert read_trials(tmp_path / "all.sqlite").equals(before)
    assert len(read_services(tmp_path / "all.sqlite")) == 2


def test_a_conflicting_duplicate_is_refused_naming_the_key_and_nothing_is_written(tmp_path):
    a = store(tmp_path / "a.sqlite", record("k1"), record("k2"))
    b = store(tmp_path / "b.sqlite", record("k2", test_primary=0.3), record("k3"))
    with pytest.raises(MergeConflict, match=r"k2 \(test_primary differ"):
        merge_stores(tmp_path / "all.sqlite", [a, b])
    assert keys(tmp_path / "all.sqlite") == []
    result = CliRunner().invoke(app, ["merge", "--into", str(tmp_path / "all.sqlite"), str(a), str(b)])
    assert result.exit_code == 2 and "k2" in result.output and "Traceback" not in result.output
    first = merge_stores(tmp_path / "first.sqlite", [a, b], on_conflict="keep-first")
    assert len(first.conflicts) == 1
    assert read_trials(tmp_path / "first.sqlite").set_index("trial_key").loc["k2", "test_primary"] == 0.8
    merge_stores(tmp_path / "last.sqlite", [a, b], on_conflict="keep-last")
    assert read_trials(tmp_path / "last.sqlite").set_index("trial_key").loc["k2", "test_primary"] == 0.3


def test_a_trial_that_never_ran_gives_way_to_one_that_did(tmp_path):
    a = store(tmp_path / "a.sqlite", record("k1", status="unavailable", test_primary=None))
    b = store(tmp_path / "b.sqlite", record("k1"))
    report = merge_stores(tmp_path / "all.sqlite", [a, b])
    assert report.replaced == 1 and not report.conflicts
    assert read_trials(tmp_path / "all.sqlite")["status"].tolist() == ["ok"]
    report = merge_stores(tmp_path / "all.sqlite", [a])  # and an unavailable row never replaces a finished one
    assert read_trials(tmp_path / "all.sqlite")["status"].tolist() == ["ok"] and report.replaced == 0


def test_merge_refuses_what_is_not_a_store_in_one_line(tmp_path):
    (tmp_path / "junk.sqlite").write_text("not a database")
    result = CliRunner().invoke(app, ["merge", "--into", str(tmp_path / "all.sqlite"), str(tmp_path / "junk.sqlite")])
    assert result.exit_code == 2 and "not a NodeGround run store" in result.output
    result = CliRunner().invoke(
        app, ["merge", "--into", str(tmp_path / "all.sqlite"), str(tmp_path / "missing.sqlite")]
    )
    assert result.exit_code == 2 and "no run store" in result.output


def _plan(datasets=3, splits=2, methods=3, budget=4) -> list[PlannedTrial]:
    return [
        PlannedTrial(m, d, "10/10/80", s, i, {}, f"{m}|{d}|{s}|{i}")
        for d in map(str, range(datasets)) for s in range(splits) for m in "abc"[:methods] for i in range(budget)
    ]  # fmt: skip


@pytest.mark.parametrize("count", [1, 2, 3, 5, 18, 40])
def test_shards_partition_the_plan_into_whole_contiguous_cells(count):
    trials = _plan()
    shards = shard_of(trials, count)
    assert len(shards) == len(trials) and set(shards) <= set(range(count))
    cell_shards: dict[tuple, set[int]] = {}
    for trial, shard in zip(trials, shards, strict=True):
        cell_shards.setdefault((trial.dataset, trial.regime, trial.split, trial.method), set()).add(shard)
    assert all(len(s) == 1 for s in cell_shards.values())  # cells stay whole
    assert shards == sorted(shards)  # contiguous runs of the plan order
    sizes = Counter(shards)
    if count <= len(cell_shards):  # about equal work: sizes differ by at most one cell
        assert max(sizes.values()) - min(sizes.values()) <= 4 and len(sizes) == count


def test_shards_do_not_depend_on_anything_but_the_plan():
    trials = _plan()
    assert shard_of(trials, 3) == shard_of([dataclasses.replace(t) for t in trials], 3)


def test_a_store_from_before_keys_carried_the_dataset_hash_merges_under_todays_keys(tmp_path):
    old = store(tmp_path / "old.sqlite", record("m@v|d|10/10/80|0|c"))  # the key as an older version wrote it
    assert keys(old) == ["m@v|d|10/10/80|0|c"]
    new = store(tmp_path / "new.sqlite", record("m@v|d|10/10/80|0|c|h"))
    merge_stores(tmp_path / "all.sqlite", [old, new])
    assert keys(tmp_path / "all.sqlite") == ["m@v|d|10/10/80|0|c|h"]
