"""The evaluator scores predictions as a trial's record scores them: the same metrics from the same code, and the
input it expects said in every refusal."""

from __future__ import annotations

import json

import numpy as np
import pytest

from nodeground.catalog import load_task
from nodeground.evaluation import Evaluator
from orchestrator.data.registry import load_dataset
from orchestrator.records import TrialRecord
from orchestrator.run_trial import TrialRunner
from tests.orchestrator.conftest import RECORD

#: A record's test metric columns, by the evaluator's names.
RECORDED = {"accuracy": "test_accuracy", "macro_f1": "test_macro_f1", "cross_entropy": "test_cross_entropy",
            "auroc": "test_auroc", "precision": "test_precision"}  # fmt: skip


def recorded(name: str, probs: np.ndarray, split) -> TrialRecord:
    """What a sweep's trial records for these probabilities (``TrialRunner``'s own scoring)."""
    record = TrialRecord(**{**RECORD.__dict__})
    TrialRunner._score(probs, load_dataset(name), split, record)
    return record


@pytest.mark.parametrize("name", ["synthetic-tiny", "synthetic-binary"])
def test_the_evaluators_metrics_are_the_records(name):
    task = load_task(name)
    evaluator = task.evaluator
    rng = np.random.default_rng(0)
    for split in task.splits:
        probs = rng.dirichlet(np.ones(task.num_classes), size=task.num_nodes).astype(np.float32)
        scores = evaluator.eval({"y_true": task.y[split.test], "y_prob": probs[split.test]})
        record = recorded(name, probs, split)
        assert record.status == "ok" and record.primary_metric == evaluator.primary_metric
        assert scores[evaluator.primary_metric] == record.test_primary
        assert {k: scores[k] for k in scores} == {k: getattr(record, RECORDED[k]) for k in scores}
        assert set(scores) == {k for k, column in RECORDED.items() if getattr(record, column) is not None}


def test_an_evaluator_by_name_knows_its_task_and_says_what_it_expects():
    evaluator = Evaluator("synthetic-binary")
    assert (evaluator.task_type, evaluator.num_classes, evaluator.primary_metric) == ("binary", 2, "auroc")
    assert "'y_prob': float array (n, 2)" in repr(evaluator)
    torch = pytest.importorskip("torch")
    task = load_task("synthetic-binary", split=0)
    test = task.splits[0].test
    probs = np.tile([0.3, 0.7], (test.size, 1))
    as_tensors = evaluator.eval({"y_true": torch.tensor(task.y[test]), "y_prob": torch.tensor(probs).requires_grad_()})
    assert as_tensors == evaluator.eval({"y_true": task.y[test], "y_prob": probs})


@pytest.mark.parametrize(
    "given",
    [
        {"y_true": [0, 1]},
        {"y_true": [0, 3], "y_prob": [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]]},
        {"y_true": [0.0, 1.0], "y_prob": [[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]]},
        {"y_true": [0, 1], "y_prob": [[0.5, 0.5], [0.5, 0.5]]},
        {"y_true": [0, 1], "y_prob": [[0.9, 0.5, 0.0], [0.5, 0.5, 0.0]]},
        {"y_true": [0, 1], "y_prob": [[np.nan, 0.5, 0.5], [0.5, 0.5, 0.0]]},
    ],
    ids=["no y_prob", "class out of range", "float labels", "too few columns", "rows not summing to one", "nan"],
)
def test_a_wrong_input_is_one_line_that_repeats_the_expected_input(given):
    evaluator = Evaluator("synthetic-tiny")
    with pytest.raises(ValueError) as caught:
        evaluator.eval(given)
    message = str(caught.value)
    assert evaluator.expected_input in message and "\n" not in message, json.dumps(message)
