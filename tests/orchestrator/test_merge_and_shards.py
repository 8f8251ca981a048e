"""Merging stores by trial key, and the shard partition of a plan (no services involved)."""

from __future__ import annotations

import dataclasses
import os
import re
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
from collections import Counter

import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.merge import MergeConflict, MergeIncomplete, merge_stores
from orchestrator.plan import Plan, PlannedTrial, SweepPlan, described_specs, make_plan
from orchestrator.records import TrialRecord
from orchestrator.services.directory import Directory, resolve_methods
from orchestrator.store import (
    ServiceRecord,
    ShardPlan,
    Store,
    StoreBusy,
    claim_lock,
    partial_note,
    read_merge_state,
    read_services,
    read_trials,
)
from orchestrator.sweep import Sweep
from tests.conftest import HANG_S, REPO
from tests.orchestrator.conftest import trial_record
from tests.orchestrator.whole_plan import shard_of, whole_plan_record


def record(key: str, status: str = "ok", test_primary: float | None = 0.8, fit_s: float = 1.0) -> TrialRecord:
    return trial_record(key, status=status, test_primary=test_primary, fit_service_s=fit_s, endpoint="127.0.0.1:1")


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
    assert not [p.name for p in tmp_path.iterdir() if "all.sqlite" in p.name]  # no file at all, not an empty store
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


# ---- the store's rules hold in a merge --------------------------------------------------


def test_merge_takes_the_targets_claim_and_a_held_target_is_refused_unchanged(tmp_path):
    target = store(tmp_path / "all.sqlite", record("k1"))
    source = store(tmp_path / "a.sqlite", record("k2"))
    holder = claim_lock(target)  # as a sweep writing the target holds it
    try:
        with pytest.raises(StoreBusy, match="being written by another orchestrator"):
            merge_stores(target, [source])
        result = CliRunner().invoke(app, ["merge", "--into", str(target), str(source)])
        assert result.exit_code == 2 and result.output.startswith("error: ") and "another orchestrator" in result.output
    finally:
        holder.close()
    assert keys(target) == ["k1"]
    merge_stores(target, [source])  # once released, the merge goes ahead
    assert keys(target) == ["k1", "k2"]


def content(key: str, digest: str, finished: str) -> TrialRecord:
    return dataclasses.replace(record(key), dataset_hash=digest, finished_at=finished)


def test_a_datasets_new_content_supersedes_the_old_one_in_the_merged_store(tmp_path):
    """Two contents of one dataset name: trials keeps only the current one, the rest is kept in superseded_trials."""
    old = store(tmp_path / "old.sqlite", content("k1|h1", "h1", "2026-01-01"), content("k2|h1", "h1", "2026-01-02"))
    new = store(tmp_path / "new.sqlite", content("k1|h2", "h2", "2026-02-01"))
    for order in ([old, new], [new, old]):  # the content with the latest trial is current, whatever the order
        into = tmp_path / f"all-{order[0].stem}.sqlite"
        report = merge_stores(into, order)
        assert keys(into) == ["k1|h2"] and report.superseded == {"d": 2 if order[0] is old else 2}
        with sqlite3.connect(into) as db:
            assert db.execute("SELECT COUNT(*), MIN(dataset_hash) FROM superseded_trials").fetchone() == (2, "h1")
        assert set(read_trials(into)["dataset_hash"]) == {"h2"}  # what show, export and report read
    # A content that a store has superseded stays superseded, even when a stale shard ran it later.
    replaced = tmp_path / "replaced.sqlite"
    store(replaced, content("k1|h1", "h1", "2026-01-01"))
    with Store(replaced) as s:
        s.write(content("k1|h2", "h2", "2026-02-01"))  # `datasets add --replace`: h1 moves to superseded_trials
    stale = store(tmp_path / "stale.sqlite", content("k3|h1", "h1", "2026-03-01"))
    merge_stores(tmp_path / "after.sqlite", [replaced, stale])
    assert keys(tmp_path / "after.sqlite") == ["k1|h2"]
    result = CliRunner().invoke(app, ["merge", "--into", str(tmp_path / "cli.sqlite"), str(old), str(new)])
    assert result.exit_code == 0 and "2 row(s) of an earlier content of d moved to superseded_trials" in result.output


@pytest.mark.parametrize(
    "corrupt, message",
    [
        ("UPDATE trials SET test_primary = 'junk'", "trials.test_primary must be a number"),
        ("UPDATE trials SET split = 1.5", "trials.split must be an integer"),
        ("UPDATE trials SET status = 'great'", "trials.status must be one of ok, failed"),
        ("UPDATE trials SET method = NULL", "trials.method must be text, never empty"),
        ("UPDATE trials SET config_json = '{not json'", "trials.config_json must be text, never empty (JSON)"),
        ("ALTER TABLE trials DROP COLUMN trial_index", "table trials lacks column(s) trial_index"),
        ("UPDATE services SET start_seconds = x'00'", "services.start_seconds must be a number"),
    ],
)
def test_a_source_with_the_right_columns_but_wrong_values_is_refused_and_nothing_is_written(tmp_path, corrupt, message):
    good = store(tmp_path / "good.sqlite", record("k1"))
    bad = store(tmp_path / "bad.sqlite", record("k2"), services=1)
    with sqlite3.connect(bad) as db:
        db.execute(corrupt)
    with pytest.raises(ValueError, match=re.escape(message)):
        merge_stores(tmp_path / "all.sqlite", [good, bad])
    assert not [p.name for p in tmp_path.iterdir() if "all.sqlite" in p.name]
    existing = store(tmp_path / "existing.sqlite", record("k0"))
    result = CliRunner().invoke(app, ["merge", "--into", str(existing), str(good), str(bad)])
    assert result.exit_code == 2 and result.output.count("\n") == 1 and message in result.output, result.output
    assert keys(existing) == ["k0"]


def test_unknown_columns_are_dropped_and_named(tmp_path):
    source = store(tmp_path / "a.sqlite", record("k1"))
    with sqlite3.connect(source) as db:
        db.execute("ALTER TABLE trials ADD COLUMN gpu_watts REAL")
        db.execute("ALTER TABLE trials ADD COLUMN note TEXT")
    report = merge_stores(tmp_path / "all.sqlite", [source])
    assert report.dropped == {f"{source}: trials": ("gpu_watts", "note")} and keys(tmp_path / "all.sqlite") == ["k1"]
    result = CliRunner().invoke(app, ["merge", "--into", str(tmp_path / "cli.sqlite"), str(source)])
    assert result.exit_code == 0 and f"dropped unknown column(s) gpu_watts, note of {source}: trials" in result.output


# ---- only complete results are published -------------------------------------------------


def shard_store(path, index: int, count: int, stored: int | None = None, status: str = "ok", plan=None):
    """A shard's store as `run --shard I/N` leaves it: its plan recorded, its first ``stored`` trials (all: None)."""
    sweep = _sweep(path, index, count, plan=plan or TINY)
    sweep.store.write_plan(sweep.shard_record())
    sweep.store.write_many([dataclasses.replace(r, status=status) for r in _ran(sweep)[:stored]])
    sweep.store.close()
    return path


def planned_keys() -> list[str]:
    return sorted(t.key for t in make_plan(TINY, described_specs(TINY.methods, resolve_methods(["mlp"]))).trials())


def test_an_incomplete_merge_is_refused_naming_the_missing_shards_and_a_partial_one_is_marked(tmp_path):
    # TINY's 4 cells of 2 trials in 3 shards: 4, 2 and 2 trials
    s0 = shard_store(tmp_path / "s0.sqlite", 0, 3)
    s1 = shard_store(tmp_path / "s1.sqlite", 1, 3, stored=1)  # still running
    s1u = shard_store(tmp_path / "s1u.sqlite", 1, 3, status="unavailable")  # never ran
    into = tmp_path / "all.sqlite"
    with pytest.raises(MergeIncomplete) as refused:
        merge_stores(into, [s0, s1])
    assert (
        "3 of 8 planned trials missing: shard 1/3 (1 of 2 missing), shard 2/3 (2 of 2 missing, never started)"
        in str(refused.value)
    )
    assert not into.exists()
    with pytest.raises(MergeIncomplete, match=r"shard 1/3 \(2 of 2 missing\)"):
        merge_stores(into, [s0, s1u])  # an unavailable row is no outcome
    result = CliRunner().invoke(app, ["merge", "--into", str(into), str(s0), str(s1)])
    assert result.exit_code == 2 and "shard 2/3 (2 of 2 missing, never started)" in result.output
    assert not into.exists() and read_merge_state(into) is None and partial_note(into) is None

    result = CliRunner().invoke(app, ["merge", "--partial", "--into", str(into), str(s0), str(s1)])
    assert result.exit_code == 0 and f"{into} is marked partial" in result.output, result.output
    state = read_merge_state(into)
    assert state["state"] == "partial" and state["missing_trials"] == 3 and state["planned"] == 8
    assert "partial merge: 3 of 8 planned trials are missing" in partial_note(into)
    shown = CliRunner().invoke(app, ["show", "--store", str(into)])
    assert "is a partial merge: 3 of 8 planned trials" in " ".join(shown.output.split()), shown.output

    s1 = shard_store(tmp_path / "s1.sqlite", 1, 3)
    s2 = shard_store(tmp_path / "s2.sqlite", 2, 3)
    report = merge_stores(into, [s1, s2])  # the rest, into the partial store
    assert report.completeness.complete and read_merge_state(into)["state"] == "complete"
    assert keys(into) == planned_keys() and partial_note(into) is None


def test_shards_of_different_plans_do_not_make_a_complete_merge(tmp_path):
    s0 = shard_store(tmp_path / "s0.sqlite", 0, 2)
    other = shard_store(tmp_path / "s1.sqlite", 1, 2, plan=dataclasses.replace(TINY, budget=3))  # other flags
    with pytest.raises(MergeIncomplete, match="2 different plans"):
        merge_stores(tmp_path / "all.sqlite", [s0, other])


@pytest.mark.parametrize("forged", [0, -100])
def test_the_counts_a_shard_store_records_are_never_believed(tmp_path, forged):
    """Every shard's trials come from its plan recomputed: a count set to 0 or -100 once made a merge "complete"
    ("all -96 planned trials stored")."""
    s0 = shard_store(tmp_path / "s0.sqlite", 0, 2)
    s1 = shard_store(tmp_path / "s1.sqlite", 1, 2, stored=1)
    for path in (s0, s1):
        with sqlite3.connect(path) as db:
            db.execute("UPDATE plan_slots SET trials = ?", (forged,))
    with pytest.raises(MergeIncomplete, match=r"3 of 8 planned trials missing: shard 1/2 \(3 of 4 missing\)"):
        merge_stores(tmp_path / "all.sqlite", [s0, s1])
    s1 = shard_store(tmp_path / "s1.sqlite", 1, 2)
    with sqlite3.connect(s1) as db:
        db.execute("UPDATE plan_slots SET trials = ?", (forged,))
    result = CliRunner().invoke(app, ["merge", "--into", str(tmp_path / "all.sqlite"), str(s0), str(s1)])
    assert result.exit_code == 0 and "complete: all 8 planned trials stored (2 shard(s))" in result.output


def test_a_plan_whose_definition_does_not_give_its_id_cannot_make_a_merge_complete(tmp_path):
    stores = [shard_store(tmp_path / f"s{i}.sqlite", i, 2) for i in range(2)]
    for path in stores:
        with sqlite3.connect(path) as db:
            db.execute("UPDATE plan_definitions SET definition = replace(definition, '\"budget\": 2', '\"budget\": 1')")
    with pytest.raises(MergeIncomplete, match=r"its recorded definition gives plan id .*cannot be recomputed here"):
        merge_stores(tmp_path / "all.sqlite", stores)
    for path in stores:
        with sqlite3.connect(path) as db:
            db.execute('UPDATE plan_definitions SET definition = \'{"format": 1, "budget": 1e9}\'')
    with pytest.raises(MergeIncomplete, match=r"not a plan definition"):
        merge_stores(tmp_path / "all.sqlite", stores)


def test_stores_without_a_recorded_plan_merge_unchecked(tmp_path):
    a, b = store(tmp_path / "a.sqlite", record("k1")), store(tmp_path / "b.sqlite", record("k2"))
    assert merge_stores(tmp_path / "all.sqlite", [a, b]).completeness is None
    assert read_merge_state(tmp_path / "all.sqlite") is None


# ---- a shard records its plan from its own cells ------------------------------------------

SMALL = SweepPlan(("mlp", "graphany"), ("cora", "texas"), ("10/10/80",), (0, 1), budget=6)
TINY = SweepPlan(("mlp",), ("cora", "texas"), ("10/10/80",), (0, 1), budget=2)  # 4 cells of 2 trials


def _sweep(path, index: int, count: int, record_plan: bool = False, plan: SweepPlan = SMALL) -> Sweep:
    """A shard's sweep planned from the committed descriptions, with a directory that no test here asks."""
    specs = described_specs(plan.methods, resolve_methods(list(plan.methods)))
    plan = dataclasses.replace(plan, shard=(index, count))
    return Sweep(plan, Store(path), Directory(), record_plan=record_plan, described=specs)


def _ran(sweep: Sweep) -> list[TrialRecord]:
    """Records of every trial of the sweep's shard, as its run stores them."""
    return [
        trial_record(t.key, method=t.method, dataset=t.dataset, regime=t.regime, split=t.split, trial_index=t.index)
        for t in sweep.planned_trials()
    ]


def test_a_shard_records_its_plan_spelling_out_only_its_own_cells(tmp_path, monkeypatch):
    """The record equals the one made from every trial of the plan, and no other shard's cell is spelled out."""
    spelled: list[set] = []
    whole_trials = Plan.trials

    def trials(self, cells=None):
        spelled.append({(c.dataset, c.split, c.method) for c in (self.cells if cells is None else cells)})
        return whole_trials(self, cells)

    ids = set()
    for index in range(3):
        sweep = _sweep(tmp_path / f"s{index}.sqlite", index, 3)
        whole = whole_plan_record(sweep.planned(), index, 3)
        spelled.clear()
        monkeypatch.setattr(Plan, "trials", trials)
        record = sweep.shard_record()
        assert sweep.shard_record() == record and sweep.planned_trials() == sweep.planned_trials()
        monkeypatch.setattr(Plan, "trials", whole_trials)
        own = {(c.dataset, c.split, c.method) for c in sweep.planned().shard_cells(index, 3)}
        assert spelled == [own]  # once, and only this shard's cells
        assert (record.counts, record.keys) == (whole.counts, whole.keys) and record.keys
        ids.add(record.plan_id)
        sweep.store.close()
    assert len(ids) == 1


def test_a_shard_rerun_on_a_store_an_older_orchestrator_wrote_records_todays_plan(tmp_path):
    """A requeued or resubmitted task on such a store skips what it holds and records the plan anew; until it has,
    a merge with shards recorded today is refused naming it (its old plan id matches no plan id of today)."""
    stores = []
    for index in range(2):
        sweep = _sweep(tmp_path / f"s{index}.sqlite", index, 2)
        record = sweep.shard_record()
        if index == 1:  # as an older orchestrator recorded it: a digest of every key, no prefix
            record = dataclasses.replace(record, plan_id=whole_plan_record(sweep.planned(), 1, 2).plan_id)
        sweep.store.write_plan(record)
        sweep.store.write_many(_ran(sweep))
        sweep.store.close()
        stores.append(tmp_path / f"s{index}.sqlite")
    with pytest.raises(MergeIncomplete, match=r"shard\(s\) 1/2 recorded their plan with an older orchestrator"):
        merge_stores(tmp_path / "all.sqlite", stores)
    result = CliRunner().invoke(app, ["merge", "--into", str(tmp_path / "all.sqlite"), *map(str, stores)])
    assert result.exit_code == 2 and "slurm resubmit --only" in result.output and result.output.count("\n") == 1
    rerun = _sweep(stores[1], 1, 2, record_plan=True)
    assert rerun.run() == []  # every trial was stored: nothing runs, no service is asked for
    rerun.store.close()
    report = merge_stores(tmp_path / "all.sqlite", stores)
    assert report.completeness.complete and report.completeness.legacy == ()


def test_shards_recorded_by_an_older_orchestrator_merge_only_as_partial(tmp_path):
    """Their plan ids digest every key, which no recorded definition recomputes: their counts cannot be believed."""
    plan = [["a1"], ["b1"]]
    old_id = "0123456789abcdef"
    for index in range(2):
        with Store(tmp_path / f"s{index}.sqlite") as s:
            s.write_plan(ShardPlan(old_id, 2, index, (1, 1), tuple(plan[index])))
        store(tmp_path / f"s{index}.sqlite", record(plan[index][0]))
    stores = [tmp_path / "s0.sqlite", tmp_path / "s1.sqlite"]
    with pytest.raises(MergeIncomplete, match=r"shard\(s\) 0/2, 1/2 recorded their plan with an older orchestrator"):
        merge_stores(tmp_path / "all.sqlite", stores)
    report = merge_stores(tmp_path / "all.sqlite", stores, partial=True)
    assert not report.completeness.complete and read_merge_state(tmp_path / "all.sqlite")["state"] == "partial"


# ---- a full disk, a killed merge --------------------------------------------------------


def _no_room_past(size: int):
    """A child's limit on the size of any file it writes (a write past it fails, as on a full disk)."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails (EFBIG) instead of the process dying
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    return limit


def test_a_merge_that_cannot_write_says_why_and_writes_nothing(tmp_path):
    """Finding 16: SQLite rolls a transaction back itself when a write fails for room (a full disk, a file-size
    limit), and the merge's own ROLLBACK then failed with "cannot rollback - no transaction is active", hiding why.
    Here a file-size limit (what a test can impose without a full disk) stands for the full disk."""
    target = store(tmp_path / "all.sqlite", record("k0"))
    padded = '{"x": "%s"}' % ("y" * 200)
    source = store(
        tmp_path / "a.sqlite", *(dataclasses.replace(record(f"k{i}"), config_json=padded) for i in range(1, 3000))
    )
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "merge", "--into", str(target), str(source)],
        cwd=REPO, capture_output=True, text=True, timeout=HANG_S,
        preexec_fn=_no_room_past(target.stat().st_size + (64 << 10)),
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"error: {target}: disk I/O error; nothing was merged"), done.stderr
    assert keys(target) == ["k0"]


def test_a_killed_merges_scratch_store_is_removed_by_the_next_merge(tmp_path):
    """Finding 16: a killed merge into a new store left its hidden scratch file (30 MB) that no later merge removed."""
    source = store(tmp_path / "a.sqlite", record("k1"))
    into = tmp_path / "all.sqlite"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid no process of this host has now
    left = [
        tmp_path / f".all.sqlite.merging-{socket.gethostname()}-{dead.pid}",
        tmp_path / f".all.sqlite.merging-{dead.pid}",
    ]
    for scratch in left:
        scratch.write_bytes(b"x" * 1000)
        scratch.with_name(scratch.name + "-wal").write_bytes(b"x")
    running = tmp_path / f".all.sqlite.merging-{socket.gethostname()}-{os.getppid()}"  # a merge still running
    other_host = tmp_path / f".all.sqlite.merging-elsewhere.example-{dead.pid}"
    for kept in (running, other_host):
        kept.write_bytes(b"x")
    merge_stores(into, [source])
    assert keys(into) == ["k1"]
    assert sorted(p.name for p in tmp_path.iterdir() if ".merging-" in p.name) == sorted(
        [running.name, other_host.name]
    )
