"""workflow_costs and budget selection: validation loss only, failed trials count their time."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.analysis.views import build_results
from orchestrator.trials.selection import FULL, workflow_costs

from .conftest import trial_rows


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


def test_views_and_intermediate_budget_use_validation_loss_only():
    t = trial_rows(search())
    res, bud = build_results(t, budgets=(1, 2, 3))
    r = res.set_index("view")
    assert r.loc["gcn-Default", "score"] == 0.95
    assert r.loc["gcn", "score"] == 0.80  # lowest validation loss, although trial 3 tests better
    assert r.loc["gcn", "selected_trial_index"] == 2
    b = bud.set_index("view")
    assert b.loc["gcn@2", "score"] == 0.95 and b.loc["gcn@3", "score"] == 0.80
    # interpolated cost: default 1.1 s, full 7.3 s over 4 trial slots -> k=3 at 2/3 of the way
    assert b.loc["gcn@3", "workflow_s"] == pytest.approx(1.1 + (2 / 3) * (7.3 - 1.1))
    assert b.loc["gcn@3", "workflow_s_measured"] == pytest.approx(6.3)
    assert b.loc["gcn@full", "workflow_s"] == pytest.approx(7.3)


def test_gfm_view_and_missing_default():
    rows = search(method="graphpfn", kind="gfm")
    rows[0]["status"] = "failed"
    res, bud = build_results(trial_rows(rows + search()))
    assert set(res["view"]) == {"graphpfn", "gcn", "gcn-Default"}
    assert set(bud["method"]) == {"gcn"}


def test_budget_points_stop_below_the_search_size():
    """A budget at or beyond a search's size is that search: no gcn@10 or gcn@200 point for a 4-trial search."""
    t = trial_rows(search() + [{**r, "dataset": "d1"} for r in search()[:2]])  # d0: 4 trial slots, d1: 2
    _, bud = build_results(t, budgets=(1, 2, 3, 4, 10, 200))
    views = bud.groupby("dataset")["view"].apply(set)
    assert views["d0"] == {"gcn@1", "gcn@2", "gcn@3", "gcn@full"}
    assert views["d1"] == {"gcn@1", "gcn@full"}
    # The interpolated cost of the last intermediate budget stays below the full search's.
    d0 = bud[bud["dataset"] == "d0"].set_index("view")
    assert d0.loc["gcn@3", "workflow_s"] < d0.loc["gcn@full", "workflow_s"]
