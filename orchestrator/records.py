"""The trial record: one row per executed trial, the long table every analysis reads.

Why one flat row: aggregation (ranks, Elo, Pareto, budgets) is a group-by over
this table, and a failed trial is a row too (status + error), never a gap.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Trial outcome labels. Only "ok" rows carry metrics and take part in selection.
STATUS_OK = "ok"
STATUS_FAILED = "failed"  # the method raised, or the service answered with an error
STATUS_TIMEOUT = "timeout"  # the per-trial time limit ran out
STATUS_OOM = "oom"  # the service ran out of memory (or refused a config that cannot fit)
STATUS_NONFINITE = "nonfinite"  # probabilities or validation loss not finite
STATUS_UNAVAILABLE = "unavailable"  # the service died or could not be reached
STATUSES = (STATUS_OK, STATUS_FAILED, STATUS_TIMEOUT, STATUS_OOM, STATUS_NONFINITE, STATUS_UNAVAILABLE)
# Environment failures (the service was down, hung or not ready) are not outcomes of the
# method: a rerun retries them. Every other status is the trial's outcome and stays.
RETRIED_STATUSES = (STATUS_UNAVAILABLE,)
# Outcomes a sweep may end with and still exit 0: limits a configuration ran into.
ACCEPTED_STATUSES = (STATUS_OK, STATUS_OOM, STATUS_TIMEOUT)

TASK_BINARY = "binary"
TASK_MULTICLASS = "multiclass"
TASK_TYPES = (TASK_BINARY, TASK_MULTICLASS)  # the one list: registry checks, analysis tables


def primary_metric_name(task_type: str) -> str:
    """The metric a task is scored on (test_primary, val_primary, the leaderboards): AUROC for binary tasks."""
    return "auroc" if task_type == TASK_BINARY else "accuracy"


def call_seconds(wall_s: Any, cpu_s: Any, gpu_bytes: Any) -> np.ndarray:
    """A call's time as NodeGround counts it (every cost in the report and the price), per record.

    On a CPU it is the service process's CPU seconds: what the call took from the machine, which other work on a
    shared machine does not lengthen; for a one-thread service (the default) it is the call's wall time on an idle
    machine. On a GPU (a peak of GPU bytes above 0) it is the service's wall seconds, and so it is for a record that
    has no CPU seconds (written before they were measured, or by a service that does not report them).
    """
    wall = np.asarray(wall_s, dtype=float)
    cpu = np.asarray(cpu_s, dtype=float)
    gpu = np.nan_to_num(np.asarray(gpu_bytes, dtype=float))
    return np.where(np.isnan(cpu) | (gpu > 0), wall, cpu)


def config_hash(config: dict[str, Any]) -> str:
    """Stable short hash of a configuration (key order and float repr independent of dict order)."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def trial_key(
    method: str, method_version: str, dataset: str, regime: str, split: int, cfg_hash: str, dataset_hash: str
) -> str:
    """The identity of a trial: rerunning a sweep skips every key already stored.

    The dataset's content hash is part of it, so a dataset registered again under
    the same name with other content is run again rather than served stale.
    """
    return f"{method}@{method_version}|{dataset}|{regime}|{split}|{cfg_hash}|{dataset_hash}"


def current_key(key: str, dataset_hash: str | None) -> str:
    """A stored key in today's form.

    One written before keys carried the content hash gains the hash its row recorded.
    """
    return f"{key}|{dataset_hash}" if dataset_hash and key.count("|") == 4 else key


@dataclass
class TrialRecord:
    """One trial. Column meanings: docs/records.md#the-record-schema."""

    trial_key: str
    method: str
    method_version: str
    family: str
    kind: str  # supervised | gfm
    dataset: str
    dataset_hash: str  # content hash of the canonical graph (features, edges, labels)
    task_type: str  # binary | multiclass
    num_classes: int
    regime: str  # e.g. "10/10/80"
    split: int
    trial_index: int  # 0 is the default configuration; i > 0 the i-th sampled one
    is_default: bool
    config_json: str
    config_hash: str
    seed: int
    status: str
    error: str | None = None
    endpoint: str | None = None
    time_limit_s: float | None = None  # the limit per fit and per predict this trial ran under
    # service-side measurements (the method's own compute)
    fit_service_s: float | None = None
    fit_cpu_s: float | None = None  # the service process's CPU seconds during the fit (None: not reported)
    fit_peak_rss_bytes: int | None = None
    fit_peak_gpu_bytes: int | None = None
    predict_service_s: float | None = None
    predict_cpu_s: float | None = None
    predict_peak_rss_bytes: int | None = None
    predict_peak_gpu_bytes: int | None = None
    # orchestrator-side end-to-end wall time per call (includes transfer)
    upload_e2e_s: float | None = None  # 0 when the service already held the graph
    fit_e2e_s: float | None = None
    predict_e2e_s: float | None = None
    # what the method reports about its own fit (epochs run, best epoch, ...)
    fit_info_json: str | None = None
    # selection signal and metrics, all computed by the orchestrator
    val_loss: float | None = None
    val_accuracy: float | None = None
    val_auroc: float | None = None
    test_accuracy: float | None = None
    test_macro_f1: float | None = None
    test_cross_entropy: float | None = None
    test_auroc: float | None = None
    test_precision: float | None = None
    primary_metric: str | None = None  # "accuracy" (multiclass) or "auroc" (binary)
    test_primary: float | None = None
    host_json: str | None = None
    started_at: str = ""
    finished_at: str = ""
    extra_json: str | None = field(default=None)  # method-specific provenance (e.g. weights sha256)
    origin: str = "builtin"  # "builtin", or "user:<bundle id>" for a submitted image (never imputed)
    # the named protocol the trial was run under (orchestrator.protocols: "paper", "lite", "calibration"), or None
    protocol: str | None = None

    def as_row(self) -> dict[str, Any]:
        """Column -> value. Every field is a scalar, so no deep copy (``dataclasses.asdict``'s) is needed."""
        return {name: getattr(self, name) for name in COLUMNS}


COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(TrialRecord))
