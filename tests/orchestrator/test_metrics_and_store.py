import math
import sqlite3

import numpy as np
import pytest

from orchestrator.metrics import evaluate, probabilities_ok
from orchestrator.store import Store, read_trials
from tests.orchestrator.conftest import trial_record


def test_multiclass_metrics_match_hand_computed_values():
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.5, 0.4, 0.1]])
    labels = np.array([0, 1, 2, 1])
    m = evaluate(probs, labels, "multiclass", 3)
    assert m["accuracy"] == pytest.approx(0.75)
    assert m["cross_entropy"] == pytest.approx(-(math.log(0.7) + math.log(0.8) + math.log(0.4) + math.log(0.4)) / 4)
    # per class F1: class0 p=1/2 r=1 -> 2/3; class1 p=1 r=1/2 -> 2/3; class2 1
    assert m["macro_f1"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)


def test_binary_metrics_match_hand_computed_values():
    p1 = np.array([0.9, 0.2, 0.6, 0.4])
    probs = np.stack([1 - p1, p1], axis=1)
    labels = np.array([1, 0, 0, 1])
    m = evaluate(probs, labels, "binary", 2)
    # positives scored 0.9 and 0.4, negatives 0.2 and 0.6: 3 of 4 pairs ordered right
    assert m["auroc"] == pytest.approx(0.75)
    assert m["accuracy"] == pytest.approx(0.5)
    assert m["precision"] == pytest.approx(0.5)  # predicted positive: nodes 0 and 2, one right
    assert m["cross_entropy"] == pytest.approx(-(math.log(0.9) + math.log(0.8) + math.log(0.4) + math.log(0.4)) / 4)


def test_malformed_probabilities_are_named():
    assert probabilities_ok(np.array([[0.5, 0.5]])) is None
    assert "NaN" in probabilities_ok(np.array([[np.nan, 1.0]]))
    assert "sum to one" in probabilities_ok(np.array([[0.5, 0.2]]))


def test_store_round_trip_and_resume_keys(tmp_path):
    path = tmp_path / "runs.sqlite"
    with Store(path) as store:
        store.write(trial_record("a"))
        store.write(trial_record("b", status="unavailable"))
        store.write(trial_record("c", status="timeout"))
        assert store.done_keys() == {"a", "c"}  # unavailable trials are retried
        store.write(trial_record("b"))  # the retry replaces the row
    frame = read_trials(path)
    assert sorted(frame["trial_key"]) == ["a", "b", "c"]
    assert frame.set_index("trial_key").loc["b", "status"] == "ok"
    assert bool(frame["is_default"].iloc[0]) is True


def test_read_trials_refuses_missing_or_foreign_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_trials(tmp_path / "nope.sqlite")
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE x (a)").connection.commit()
    with pytest.raises(ValueError, match="not a NodeGround run store"):
        read_trials(other)


def test_validation_metrics_skip_what_the_record_does_not_keep():
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.5, 0.4, 0.1]])
    labels = np.array([0, 1, 2, 1])
    short = evaluate(probs, labels, "multiclass", 3, full=False)
    assert set(short) == {"cross_entropy", "accuracy"}
    assert short == {k: v for k, v in evaluate(probs, labels, "multiclass", 3).items() if k in short}
    p1 = np.array([0.9, 0.2, 0.6, 0.4])
    assert set(evaluate(np.stack([1 - p1, p1], axis=1), np.array([1, 0, 0, 1]), "binary", 2, full=False)) == {
        "cross_entropy",
        "accuracy",
        "auroc",
    }


def test_services_table_round_trip_and_old_stores(tmp_path):
    from orchestrator.store import ServiceRecord, read_services

    path = tmp_path / "runs.sqlite"
    with Store(path) as store:
        store.write_service(
            ServiceRecord(
                "127.0.0.1:5",
                "gnn",
                "embedded",
                "gnn",
                "t0",
                start_seconds=2.5,
                warmup_seconds=0.5,
                warmup_methods="mlp",
                pid=42,
            )
        )
    services = read_services(path)
    assert (
        list(services["endpoint"]) == ["127.0.0.1:5"]
        and services["start_seconds"].iloc[0] == 2.5
        and services["pid"].iloc[0] == 42
    )
    old = tmp_path / "old.sqlite"  # a store from before the services table: empty, not an error
    with sqlite3.connect(old) as db:
        db.execute(
            "CREATE TABLE trials (trial_key TEXT PRIMARY KEY, method TEXT, dataset TEXT, regime TEXT, split INTEGER, "
            "trial_index INTEGER)"
        )
    assert read_services(old).empty
    with Store(old) as store:  # opening it for writing adds what is missing
        store.write(trial_record("x"))
    assert read_trials(old)["status"].tolist() == ["ok"]


def test_an_old_stores_keys_gain_the_dataset_hash_they_recorded(tmp_path):
    """A rerun over a store written before keys carried the content hash skips what is unchanged."""
    from orchestrator.records import trial_key

    path = tmp_path / "old.sqlite"
    with Store(path) as store:
        store.write(trial_record("gcn@v|d|10/10/80|0|c"))  # the old 5-part key; its row recorded dataset_hash "h"
        store.write(trial_record("gcn@v|d|10/10/80|1|c", status="unavailable"))
    with Store(path) as store:
        assert store.done_keys() == {trial_key("gcn", "v", "d", "10/10/80", 0, "c", "h")}
        assert trial_key("gcn", "v", "d", "10/10/80", 0, "c", "other") not in store.done_keys()


def test_rows_of_a_replaced_dataset_move_aside_when_its_new_content_is_first_stored(tmp_path):
    path = tmp_path / "runs.sqlite"
    with Store(path) as store:
        store.write(trial_record("k-old-1"))
        store.write(trial_record("k-old-2"))
        other = trial_record("k-other")
        other.dataset, other.dataset_hash = "e", "x"
        store.write(other)
        new = trial_record("k-new")
        new.dataset_hash, new.val_loss = "h2", 0.1
        store.write(new)
    assert sorted(read_trials(path)["trial_key"]) == ["k-new", "k-other"]
    with sqlite3.connect(path) as db:
        kept = sorted(key for (key,) in db.execute("SELECT trial_key FROM superseded_trials"))
    assert kept == ["k-old-1", "k-old-2"], "superseded rows are kept, not lost"


def test_store_is_wal_at_synchronous_normal(tmp_path):
    """WAL + NORMAL: a commit is not fsync'd but survives a killed process (see Store.__init__ for why it is safe)."""
    with Store(tmp_path / "runs.sqlite") as store:
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
