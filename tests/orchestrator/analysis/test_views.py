"""The views a leaderboard compares: selected by validation loss only, budget points below the search size, and a
one-trial search compared once, as the method's default."""

from __future__ import annotations

import pytest

from orchestrator.analysis.views import build_results
from tests.orchestrator.trial_table.test_selection import search
from tests.synthetic_trials import synthetic_trials, trial_rows


def test_budget_one_shows_each_supervised_method_once_as_its_default():
    results, points = build_results(synthetic_trials(("mlp", "gcn"), ("graphany",), n_datasets=3, n_trials=1))
    assert sorted(results["view"].unique()) == ["gcn-Default", "graphany", "mlp-Default"]
    assert "gcn@full" in set(points["view"])  # the tuning views still see the (one-trial) search


def test_a_regime_with_a_longer_search_keeps_the_tuned_view():
    t = synthetic_trials(("gcn",), (), n_datasets=3, n_trials=3)
    one = t[(t["regime"] == "50/25/25") & (t["trial_index"] > 0)].index
    results, _ = build_results(t.drop(index=one))
    views = results.groupby("regime")["view"].unique().map(sorted).to_dict()
    assert views == {"10/10/80": ["gcn", "gcn-Default"], "50/25/25": ["gcn-Default"]}


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
