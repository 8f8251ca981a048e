"""The views a leaderboard compares: a one-trial search is compared once, as the method's default."""

from __future__ import annotations

from orchestrator.analysis.synthetic import synthetic_trials
from orchestrator.analysis.views import build_results


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
