"""A task's evaluator: the metrics of a record, computed by the code that computes them in every trial.

A trial's record holds what ``orchestrator.metrics.evaluate`` returns for the test nodes' probabilities, after
``probabilities_ok`` accepted them (otherwise the trial is ``nonfinite``); the evaluator runs those two functions and
nothing else, so a score computed in a researcher's loop is the score the leaderboard would hold for the same
predictions. Multiclass tasks: accuracy (primary), macro-F1, cross-entropy. Binary tasks: AUROC of class 1
(primary), accuracy, positive-class precision, binary cross-entropy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from orchestrator.metrics import evaluate, probabilities_ok
from orchestrator.records import primary_metric_name

if TYPE_CHECKING:
    from nodeground.catalog import Task


def as_array(value: Any) -> np.ndarray:
    """A numpy array of ``value``: an array, a list, or a torch tensor (detached and moved to the CPU)."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


class Evaluator:
    """``Evaluator("texas").eval({"y_true": labels, "y_prob": probabilities})``: the harness's metrics of those nodes.

    ``print(evaluator)`` shows the input it expects; a wrong input is a one-line ValueError that repeats it.
    """

    def __init__(self, task: str | Task) -> None:
        """``task``: a task's name (its graph is loaded for its classes) or a loaded ``Task``."""
        if isinstance(task, str):
            from nodeground.catalog import load_task

            task = load_task(task, split=0)
        self.task = task.name
        self.task_type = task.task_type
        self.num_classes = task.num_classes
        self.primary_metric = primary_metric_name(self.task_type)

    @property
    def expected_input(self) -> str:
        return (
            f"{{'y_true': int array (n,) of classes 0..{self.num_classes - 1}, 'y_prob': float array "
            f"(n, {self.num_classes}) of class probabilities, each row summing to one}} (numpy arrays, lists or torch "
            "tensors; n nodes, e.g. a split's test nodes)"
        )

    def eval(self, input: Mapping[str, Any]) -> dict[str, float]:
        """The metrics of the nodes given, keyed as ``orchestrator.metrics.evaluate`` keys them (``accuracy``,
        ``macro_f1``, ``cross_entropy``; binary: ``auroc``, ``accuracy``, ``precision``, ``cross_entropy``)."""
        if not isinstance(input, Mapping) or not {"y_true", "y_prob"} <= set(input):
            raise ValueError(f"{self.task}'s evaluator expects {self.expected_input}")
        y_true, y_prob = as_array(input["y_true"]), as_array(input["y_prob"])
        if (
            y_true.ndim != 1
            or y_true.shape[0] == 0
            or not np.issubdtype(y_true.dtype, np.integer)
            or y_true.min() < 0
            or y_true.max() >= self.num_classes
        ):
            raise ValueError(
                f"y_true: got {y_true.dtype} {y_true.shape}{_range(y_true)}; {self.task}'s evaluator expects "
                f"{self.expected_input}"
            )
        if y_prob.shape != (y_true.shape[0], self.num_classes):
            raise ValueError(f"y_prob: got shape {y_prob.shape}; {self.task}'s evaluator expects {self.expected_input}")
        problem = probabilities_ok(y_prob)
        if problem is not None:  # the trial would be recorded nonfinite, with no metric
            raise ValueError(f"y_prob: {problem}; {self.task}'s evaluator expects {self.expected_input}")
        return evaluate(y_prob, y_true, self.task_type, self.num_classes)

    def __repr__(self) -> str:
        return (
            f"Evaluator({self.task!r}: {self.task_type}, {self.num_classes} classes, primary metric "
            f"{self.primary_metric}; input {self.expected_input})"
        )


def _range(labels: np.ndarray) -> str:
    return f" in [{labels.min()}, {labels.max()}]" if labels.size and np.issubdtype(labels.dtype, np.number) else ""
