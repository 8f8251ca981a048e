"""Selection loss and test metrics, computed by the orchestrator from returned probabilities.

Multiclass: cross-entropy (selection), accuracy (primary), macro-F1.
Binary: binary cross-entropy (selection), AUROC (primary), accuracy,
positive-class precision. Class 1 is the positive class.

Computed in numpy: the same numbers as scikit-learn's ``log_loss``, ``accuracy_score``,
``f1_score(average="macro", zero_division=0)``, ``precision_score(pos_label=1, zero_division=0)``
and ``roc_auc_score`` (``tests/orchestrator/test_metrics.py`` compares them to 1e-9), without the
milliseconds of argument validation and one-hot encoding scikit-learn spends on every call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from orchestrator.records import TASK_BINARY

#: What a trial records of its validation (selection reads ``val_loss``) and of its test predictions, in the order
#: every table that carries them lists them (store, export, merge, the shipped reference): the one list, so a metric
#: added here reaches all of them. ``primary_metric``/``test_primary`` name and copy one of the test metrics.
VAL_METRICS: tuple[str, ...] = ("val_loss", "val_accuracy", "val_auroc")
TEST_METRICS: tuple[str, ...] = ("test_accuracy", "test_macro_f1", "test_cross_entropy", "test_auroc", "test_precision")
LOSSES: tuple[str, ...] = ("val_loss", "test_cross_entropy")  # finite and >= 0; every other metric lies in [0, 1]

EPS = 1e-7
_FLOAT_EPS = float(np.finfo(np.float64).eps)  # log_loss's own clip, applied after ours

# What a stored number can be when this code computed or measured it: an accuracy, AUROC, F1 or precision lies in
# [0, 1]; a loss, seconds or bytes is finite and >= 0 (empty: not computed, as for a failed trial). A row outside
# came from no trial (a hand-edited store, a forged bundle): every load refuses it (``out_of_range``), naming its key.
UNIT = (0.0, 1.0)
NON_NEGATIVE = (0.0, math.inf)
VALUE_RANGES: dict[str, tuple[float, float]] = {
    **{m: NON_NEGATIVE if m in LOSSES else UNIT for m in (*VAL_METRICS, *TEST_METRICS, "test_primary")},
    **dict.fromkeys(
        (
            "time_limit_s",
            "fit_service_s",
            "predict_service_s",
            "fit_cpu_s",
            "predict_cpu_s",
            "upload_e2e_s",
            "fit_e2e_s",
            "predict_e2e_s",
        ),
        NON_NEGATIVE,
    ),
    **dict.fromkeys(
        ("fit_peak_rss_bytes", "fit_peak_gpu_bytes", "predict_peak_rss_bytes", "predict_peak_gpu_bytes"),
        NON_NEGATIVE,
    ),
}
RANGES_TEXT = "accuracies, AUROC, F1 and precision lie in [0, 1]; losses, seconds and bytes are finite and >= 0"


def range_condition(column: str) -> str:
    """SQL that holds for a stored value of ``column`` inside its range, or empty (NULL)."""
    low, high = VALUE_RANGES[column]
    top = f"{column} <= {high!r}" if math.isfinite(high) else f"{column} < 9e999"  # 9e999 reads as +infinity
    return f"({column} IS NULL OR (typeof({column}) IN ('real', 'integer') AND {column} >= {low!r} AND {top}))"


def range_violation_sql(present: Sequence[str]) -> tuple[str, list[str]] | None:
    """(a WHERE clause true for rows with a value out of range, the columns checked), over the ``present`` columns
    that have a range; None when none has."""
    checked = [c for c in present if c in VALUE_RANGES]
    if not checked:
        return None
    return " OR ".join(f"NOT {range_condition(c)}" for c in checked), checked


def out_of_range(row: Mapping[str, object], checked: Sequence[str]) -> str:
    """What is out of range in a row (``column value``), for the one line that refuses it."""
    bad = []
    for column in checked:
        value = row.get(column)
        low, high = VALUE_RANGES[column]
        number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        if value is not None and not (number is not None and math.isfinite(number) and low <= number <= high):
            if not (number is not None and math.isnan(number)):  # NaN is how a frame holds an empty value
                bad.append(f"{column} {str(value)[:24]}")
    return ", ".join(bad)


def cross_entropy(probs: np.ndarray, labels: np.ndarray, num_classes: int) -> float:
    """Mean negative log-likelihood of the true class (probabilities clipped away from 0).

    Each row is clipped to [EPS, 1] and renormalised; only the true class's entry is needed,
    so the row sum is the only full pass (``num_classes`` is the width ``probs`` already has).
    """
    # in place: one n x C temporary (a fresh large array per step costs more in page faults than the arithmetic)
    clipped = probs.astype(np.float64)
    np.clip(clipped, EPS, 1.0, out=clipped)
    row_sums = np.einsum("ij->i", clipped)  # 3x less CPU than sum(axis=1) for narrow rows, no BLAS threads
    true = clipped[np.arange(labels.shape[0]), labels] / row_sums
    np.clip(true, _FLOAT_EPS, 1.0 - _FLOAT_EPS, out=true)
    return float(-np.log(true, out=true).mean())


def _macro_f1(labels: np.ndarray, predicted: np.ndarray, num_classes: int) -> float:
    """Mean per-class F1 over the classes present in ``labels`` or ``predicted``."""
    width = max(num_classes, int(labels.max()) + 1, int(predicted.max()) + 1)
    true_count = np.bincount(labels, minlength=width)
    pred_count = np.bincount(predicted, minlength=width)
    hits = np.bincount(labels[labels == predicted], minlength=width)
    present = (true_count + pred_count) > 0
    return float((2.0 * hits[present] / (true_count[present] + pred_count[present])).mean())


def _precision(labels: np.ndarray, predicted: np.ndarray) -> float:
    """Positive-class (1) precision; 0 when nothing is predicted positive."""
    called = predicted == 1
    n_called = int(called.sum())
    return float((labels[called] == 1).sum() / n_called) if n_called else 0.0


def _auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve of class 1, ties counted half (the Mann-Whitney statistic); NaN
    unless both classes are present."""
    positive = labels == 1
    n_pos = int(positive.sum())
    n_neg = labels.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    ordered = scores[order]
    # 1-based average rank of each tie group: (first + last) / 2 over the group's positions
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], ordered.shape[0]]
    group_rank = (starts + ends + 1) / 2.0
    ranks = np.repeat(group_rank, ends - starts)
    pos_rank_sum = float(ranks[positive[order]].sum())
    return (pos_rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def evaluate(
    probs: np.ndarray, labels: np.ndarray, task_type: str, num_classes: int, full: bool = True
) -> dict[str, float]:
    """Metrics of one node set (labels are the true classes of those nodes).

    ``full=False`` computes only what the record keeps for validation nodes (cross-entropy,
    accuracy, and AUROC for binary tasks), skipping macro-F1 and precision.
    """
    labels = np.asarray(labels, dtype=np.int64)
    if labels.shape[0] == 0 or probs.shape[0] != labels.shape[0]:
        raise ValueError(f"cannot score {probs.shape[0]} probability rows against {labels.shape[0]} labels")
    predicted = probs.argmax(axis=1)
    metrics = {
        "cross_entropy": cross_entropy(probs, labels, num_classes),
        "accuracy": float((labels == predicted).mean()),
    }
    if task_type == TASK_BINARY:
        metrics["auroc"] = _auroc(labels, probs[:, 1])
        if full:
            metrics["precision"] = _precision(labels, predicted)
    elif full:
        metrics["macro_f1"] = _macro_f1(labels, predicted, num_classes)
    return metrics


def probabilities_ok(probs: np.ndarray, tolerance: float = 1e-3) -> str | None:
    """None when ``probs`` is a finite row-stochastic matrix; otherwise what is wrong."""
    if not np.isfinite(probs).all():
        return "probabilities contain NaN or infinite values"
    if (probs < -tolerance).any():
        return "probabilities contain negative values"
    worst = float(np.abs(probs.sum(axis=1) - 1.0).max()) if probs.size else 0.0
    if worst > tolerance:
        return f"probability rows do not sum to one (off by up to {worst:.3g})"
    return None
