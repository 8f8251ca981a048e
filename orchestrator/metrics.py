"""Selection loss and test metrics, computed by the orchestrator from returned probabilities.

Multiclass: cross-entropy (selection), accuracy (primary), macro-F1.
Binary: binary cross-entropy (selection), AUROC (primary), accuracy,
positive-class precision. Class 1 is the positive class.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import accuracy_score, f1_score, log_loss, precision_score, roc_auc_score

from orchestrator.records import TASK_BINARY

EPS = 1e-7


def cross_entropy(probs: np.ndarray, labels: np.ndarray, num_classes: int) -> float:
    """Mean negative log-likelihood of the true class (probabilities clipped away from 0)."""
    clipped = np.clip(probs.astype(np.float64), EPS, 1.0)
    clipped /= clipped.sum(axis=1, keepdims=True)
    return float(log_loss(labels, clipped, labels=list(range(num_classes))))


def evaluate(
    probs: np.ndarray, labels: np.ndarray, task_type: str, num_classes: int, full: bool = True
) -> dict[str, float]:
    """Metrics of one node set (labels are the true classes of those nodes).

    ``full=False`` computes only what the record keeps for validation nodes (cross-entropy,
    accuracy, and AUROC for binary tasks), skipping macro-F1 and precision.
    """
    predicted = probs.argmax(axis=1)
    metrics = {
        "cross_entropy": cross_entropy(probs, labels, num_classes),
        "accuracy": float(accuracy_score(labels, predicted)),
    }
    if task_type == TASK_BINARY:
        positive = probs[:, 1]
        metrics["auroc"] = float(roc_auc_score(labels, positive)) if np.unique(labels).size == 2 else float("nan")
        if full:
            metrics["precision"] = float(precision_score(labels, predicted, pos_label=1, zero_division=0))
    elif full:
        metrics["macro_f1"] = float(f1_score(labels, predicted, average="macro", zero_division=0))
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
