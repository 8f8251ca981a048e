"""workflow_costs and budget selection: validation loss only, failed trials count their time."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.trial_table.selection import FULL, workflow_costs
from tests.synthetic_trials import trial_rows


def search(method="gcn", kind="supervised", gpu=False):
    rows = [
        # trial 0: default
        dict(
            trial_index=0,
            val_loss=0.50,
            test_primary=0.95,
            fit_service_s=1.0,
            predict_service_s=0.1,
            fit_peak_rss_bytes=100.0,
            predict_peak_rss_bytes=40.0,
        ),
        # trial 1 failed: no metrics, its time still counts
        dict(
            trial_index=1,
            status="oom",
            val_loss=np.nan,
            test_primary=np.nan,
            fit_service_s=2.0,
            predict_service_s=np.nan,
            fit_peak_rss_bytes=900.0,
        ),
        # trial 2: best validation loss, worse test score than the default
        dict(
            trial_index=2,
            val_loss=0.30,
            test_primary=0.80,
            fit_service_s=3.0,
            predict_service_s=0.3,
            fit_peak_rss_bytes=200.0,
            predict_peak_rss_bytes=950.0,
        ),
        # trial 3: ties trial 2 on validation loss (the earlier trial wins), best test score
        dict(
            trial_index=3,
            val_loss=0.30,
            test_primary=0.99,
            fit_service_s=1.0,
            predict_service_s=0.5,
            fit_peak_rss_bytes=50.0,
            predict_peak_rss_bytes=10.0,
        ),
    ]
    for r in rows:
        r.update(method=method, kind=kind, dataset="d0", split=0)
        if gpu:
            r.update(
                fit_peak_gpu_bytes=r.get("fit_peak_rss_bytes", 0) * 10,
                predict_peak_gpu_bytes=r.get("predict_peak_rss_bytes", 0) * 10,
            )
    return rows


def test_budgets_sum_fit_time_and_select_by_validation_loss():
    c = workflow_costs(trial_rows(search()), budgets=(1, 2, 3, 10)).set_index("budget")
    assert c.loc["1", "training_tuning_s"] == 1.0 and c.loc["1", "selected_trial_index"] == 0
    assert c.loc["1", "workflow_s"] == pytest.approx(1.1)
    assert c.loc["2", "training_tuning_s"] == 3.0  # the failed trial's 2 s count
    assert c.loc["2", "n_trials"] == 2 and c.loc["2", "n_ok"] == 1
    assert c.loc["2", "selected_trial_index"] == 0
    assert c.loc["3", "selected_trial_index"] == 2
    for b in ("10", FULL):
        assert c.loc[b, "selected_trial_index"] == 2  # tie on val_loss -> earlier trial, never the test score
        assert c.loc[b, "training_tuning_s"] == 7.0
        assert c.loc[b, "prediction_s"] == pytest.approx(0.3)
        assert c.loc[b, "workflow_s"] == pytest.approx(7.3)
    assert c.loc[FULL, "k"] == 4 and c.loc["10", "k"] == 10
    # peak memory: max(fit peak over executed trials, predict peak of the selected trial)
    assert c.loc["1", "workflow_peak_bytes"] == 100.0
    assert c.loc["2", "workflow_peak_bytes"] == 900.0  # the failed trial's fit peak counts
    assert c.loc[FULL, "workflow_peak_bytes"] == 950.0
    assert set(c["memory_kind"]) == {"cpu"}


def test_gpu_bytes_are_used_when_the_method_reports_any():
    rows = search(gpu=True) + search(method="mlp")
    c = workflow_costs(trial_rows(rows))
    full = c[c["budget"] == FULL].set_index("method")
    assert full.loc["gcn", "memory_kind"] == "gpu" and full.loc["gcn", "workflow_peak_bytes"] == 9500.0
    assert full.loc["mlp", "memory_kind"] == "cpu" and full.loc["mlp", "workflow_peak_bytes"] == 950.0
