"""orchestrator.metrics computes in numpy; scikit-learn is the reference it must match to 1e-9."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score, log_loss, precision_score, roc_auc_score

from orchestrator.metrics import EPS, LOSSES, TEST_METRICS, VAL_METRICS, VALUE_RANGES, evaluate
from orchestrator.records import COLUMNS

TOL = 1e-9


def reference(probs: np.ndarray, labels: np.ndarray, task_type: str, num_classes: int) -> dict[str, float]:
    """The metrics as scikit-learn computes them (what orchestrator.metrics used to call)."""
    clipped = np.clip(probs.astype(np.float64), EPS, 1.0)
    clipped /= clipped.sum(axis=1, keepdims=True)
    predicted = probs.argmax(axis=1)
    out = {
        "cross_entropy": float(log_loss(labels, clipped, labels=list(range(num_classes)))),
        "accuracy": float(accuracy_score(labels, predicted)),
    }
    if task_type == "binary":
        both = np.unique(labels).size == 2
        out["auroc"] = float(roc_auc_score(labels, probs[:, 1])) if both else float("nan")
        out["precision"] = float(precision_score(labels, predicted, pos_label=1, zero_division=0))
    else:
        out["macro_f1"] = float(f1_score(labels, predicted, average="macro", zero_division=0))
    return out


def assert_same(probs: np.ndarray, labels: np.ndarray, task_type: str, num_classes: int) -> None:
    ours = evaluate(probs, labels, task_type, num_classes)
    ref = reference(probs, labels, task_type, num_classes)
    assert ours.keys() == ref.keys()
    for name, expected in ref.items():
        got = ours[name]
        assert isinstance(got, float), name
        if math.isnan(expected):
            assert math.isnan(got), name
        else:
            assert abs(got - expected) <= TOL, (name, got, expected)


def random_probs(rng: np.random.Generator, n: int, c: int, dtype: type = np.float64) -> np.ndarray:
    logits = rng.normal(scale=rng.uniform(0.1, 5.0), size=(n, c))
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(dtype)


CASES = [
    (n, c, task)
    for n in (1, 2, 7, 50, 300, 2000)
    for c, task in ((2, "binary"), (2, "multiclass"), (3, "multiclass"), (10, "multiclass"))
]


@pytest.mark.parametrize(("n", "c", "task"), CASES)
def test_random_inputs_match_sklearn(n, c, task):
    rng = np.random.default_rng(1000 * n + 10 * c + (task == "binary"))
    for dtype in (np.float64, np.float32):
        probs = random_probs(rng, n, c, dtype)
        assert_same(probs, rng.integers(0, c, size=n), task, c)


@pytest.mark.parametrize(("c", "task"), [(2, "binary"), (3, "multiclass"), (7, "multiclass")])
def test_edge_cases_match_sklearn(c, task):
    rng = np.random.default_rng(c)
    n = 200
    labels = rng.integers(0, c, size=n)
    # ties: probabilities rounded to one decimal, many equal scores and argmax ties
    tied = np.round(random_probs(rng, n, c), 1)
    tied[:, 0] += 1.0 - tied.sum(axis=1)
    tied = np.clip(tied, 0.0, 1.0)
    tied /= tied.sum(axis=1, keepdims=True)
    assert_same(tied, labels, task, c)
    # constant probabilities: every score tied, argmax always class 0
    assert_same(np.full((n, c), 1.0 / c), labels, task, c)
    # exact zeros and ones (the clip at EPS and at float eps both matter)
    hard = np.eye(c)[rng.integers(0, c, size=n)]
    assert_same(hard, labels, task, c)
    assert_same(hard, hard.argmax(axis=1), task, c)
    # one class present, for each class (AUROC undefined, precision and F1 on a single class)
    for only in range(c):
        assert_same(random_probs(rng, n, c), np.full(n, only), task, c)
    # a class never predicted and never present
    probs = random_probs(rng, n, c)
    probs[:, -1] = 0.0
    probs /= probs.sum(axis=1, keepdims=True)
    assert_same(probs, np.minimum(labels, c - 2) if c > 2 else labels, task, c)
    # rows off one by less than probabilities_ok's tolerance (renormalised)
    assert_same(random_probs(rng, n, c) * 1.0005, labels, task, c)
    # a single node
    assert_same(random_probs(rng, 1, c), labels[:1], task, c)


def test_validation_subset_matches_the_full_set():
    rng = np.random.default_rng(5)
    probs, labels = random_probs(rng, 100, 2), rng.integers(0, 2, size=100)
    full = evaluate(probs, labels, "binary", 2)
    part = evaluate(probs, labels, "binary", 2, full=False)
    assert part == {k: full[k] for k in ("cross_entropy", "accuracy", "auroc")}
    assert set(evaluate(probs, labels, "multiclass", 2, full=False)) == {"cross_entropy", "accuracy"}


def test_empty_or_mismatched_inputs_raise():
    with pytest.raises(ValueError, match="cannot score"):
        evaluate(np.zeros((0, 3)), np.zeros(0, dtype=np.int64), "multiclass", 3)
    with pytest.raises(ValueError, match="cannot score"):
        evaluate(np.full((3, 3), 1 / 3), np.zeros(2, dtype=np.int64), "multiclass", 3)


def test_the_metric_lists_are_the_stores_columns_with_a_range_each():
    """The one list of recorded metrics: each is a store column and has the range every load checks."""
    for metric in (*VAL_METRICS, *TEST_METRICS):
        assert metric in COLUMNS
        assert VALUE_RANGES[metric] == ((0.0, math.inf) if metric in LOSSES else (0.0, 1.0))
    assert set(LOSSES) <= {*VAL_METRICS, *TEST_METRICS}
