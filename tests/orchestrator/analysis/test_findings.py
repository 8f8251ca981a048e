"""The findings page's sentences on hand-built report tables: each one true of its table."""

from __future__ import annotations

import numpy as np
import pandas as pd

from orchestrator.analysis.findings import findings

R = "10/10/80"


#: The columns of each table ``tables`` builds (one regime, ``R``).
LEADERBOARD = {
    "regime": R,
    "rank": [1, 2, 3, 4],
    "view": ["gat", "gcn", "graphany", "gcn-Default"],
    "elo": [1248.6, 1248.6, 1167.6, 1000.0],
    "lower": [393.0, 599.0, 485.0, 900.0],
    "upper": [3041.0, 3069.0, 2761.0, 1100.0],
    "mean_rank": [2.0, 2.0, 2.5, 3.5],
    "kind": ["supervised", "supervised", "gfm", "supervised"],
    "native_datasets": [6, 6, 4, 6],
    "imputed_datasets": [0, 0, 2, 0],
    "missing_datasets": [0, 0, 0, 0],
    "origin": "builtin",
}
COVERAGE = {"regime": [R], "view": ["gat"], "datasets": [6]}
FRONT = {
    "regime": R,
    "view": ["graphany", "gcn"],
    "kind": ["gfm", "supervised"],
    "on_front": True,
    "mean_overhead": [2.0, 0.5],
}
TUNING = {
    "regime": R,
    "method": ["mlp", "gcn"],
    "tuning_gain": [-0.1, 8.8],
    "k_within_1pt": [1, 5],
    "search_trials": [5, 5],
}
GAP = {
    "regime": R,
    "method": ["gcn", "mlp"],
    "budget": "full",
    "val_gain": [2.0, 1.0],
    "test_gain": [3.5, 1.1],
    "overstatement": [-1.5, -0.1],
}
TASK_TYPES = {
    "regime": R,
    "task_type": ["binary", "binary", "multiclass", "multiclass"],
    "metric": ["auroc", "auroc", "accuracy", "accuracy"],
    "view": ["gcn", "gat", "mlp", "gcn"],
    "position": [1, 1, 1, 2],
    "datasets": [1, 1, 3, 3],
}
SENSITIVITY = {
    "regime": R,
    "task_type": ["multiclass"],
    "metric": ["macro_f1"],
    "views": [4],
    "spearman": [0.4],
    "changed_positions": [3],
    "largest_move_view": ["graphany"],
    "largest_move": [-2],
}
OVERLAP = {
    "regime": R,
    "view": "graphany",
    "dataset": ["cora", "wisconsin"],
    "split": 0,
    "omitted_score": [0.75, 0.56],
    "replacement_score": [0.8, np.nan],
    "replaced": [True, False],
}


def tables(**over: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The report tables findings() reads, for one regime, built afresh; ``over`` replaces any of them."""
    front = pd.DataFrame(FRONT)
    t = {
        "leaderboard": pd.DataFrame(LEADERBOARD),
        "coverage": pd.DataFrame(COVERAGE),
        "pareto_time": front,
        "pareto_time_budgets": front,
        "pareto_memory": front,
        "pareto_memory_budgets": front,
        "tuning_requirements": pd.DataFrame(TUNING),
        "validation_test_gap": pd.DataFrame(GAP),
        "task_type_leaderboards": pd.DataFrame(TASK_TYPES),
        "metric_sensitivity_summary": pd.DataFrame(SENSITIVITY),
        "pretraining_overlap": pd.DataFrame(OVERLAP),
        "below_chance": pd.DataFrame(columns=["view", "dataset"]),
    }
    return {**t, **over}


def sentences(t: dict[str, pd.DataFrame]) -> dict[str, str]:
    f = findings(t, [R], lambda fig, regime: f"figures/{fig}.png")
    return dict(zip(f["topic"], f["sentence"], strict=True))


def test_a_tie_for_the_lead_names_every_leader():
    assert sentences(tables())["elo"] == (
        "In 10/10/80, gat and gcn tie for the lead in Elo at 1249 among 4 compared methods on 6 datasets "
        "(95% intervals: gat 393–3041, gcn 599–3069)."
    )


def test_the_lead_says_whether_the_runner_ups_interval_overlaps_the_leaders():
    one = tables()["leaderboard"].assign(elo=[1300.0, 1248.6, 1167.6, 1000.0])
    assert sentences(tables(leaderboard=one))["elo"] == (
        "In 10/10/80, gat leads Elo at 1300 (95% interval 393–3041) among 4 compared methods on 6 datasets; the "
        "runner-up is gcn at 1249 (95% interval 599–3069): the intervals overlap, so the lead is not settled."
    )
    clear = one.assign(lower=[1280.0, 1200.0, 1100.0, 950.0], upper=[1320.0, 1270.0, 1200.0, 1050.0])
    assert sentences(tables(leaderboard=clear))["elo"].endswith(
        "the runner-up is gcn at 1249 (95% interval 1200–1270): the intervals do not overlap."
    )
    second = clear.assign(elo=[1300.0, 1248.6, 1248.6, 1000.0], native_datasets=6)  # graphany ties gcn for second
    assert sentences(tables(leaderboard=second))["elo"].endswith(
        "the runners-up are gcn and graphany at 1249 (95% intervals 1200–1270, 1100–1200): the intervals do not "
        "overlap."
    )


def test_on_too_few_datasets_the_lead_says_its_sureness_is_unknown():
    one = tables()["leaderboard"].assign(elo=[1300.0, 1248.6, 1167.6, 1000.0])
    few = pd.DataFrame({**COVERAGE, "datasets": [2]})
    assert sentences(tables(leaderboard=one, coverage=few))["elo"] == (
        "In 10/10/80, gat leads Elo at 1300 among 4 compared methods on 2 datasets; the runner-up is gcn at 1249, "
        "but 2 datasets are too few for confidence intervals, so how sure the lead is cannot be said."
    )
    thin = one.assign(elo=[1300.0, 1100.0, 1200.0, 1000.0])  # the runner-up, graphany, has 4 datasets of its own
    thin = thin.sort_values("elo", ascending=False).assign(rank=[1, 2, 3, 4])
    assert sentences(tables(leaderboard=thin))["elo"].endswith(
        "but graphany has its own results on only 4 datasets, too few for a confidence interval, so how sure the "
        "lead is cannot be said."
    )
    assert sentences(tables(coverage=few))["elo"].endswith(
        "among 4 compared methods on 2 datasets; 2 datasets are too few for confidence intervals."
    )


def test_a_user_submission_is_named_with_its_rank_and_coverage():
    mynet = {"rank": 5, "view": "mynet", "elo": 950.0, "lower": 900.0, "upper": 990.0, "native_datasets": 5}
    mynet |= {"missing_datasets": 1, "origin": "user:mynet", "imputed_datasets": 0, "kind": "supervised"}
    lb = pd.concat([pd.DataFrame(LEADERBOARD), pd.DataFrame([{"regime": R, "mean_rank": 4.0, **mynet}])])
    assert sentences(tables(leaderboard=lb))["submitted"] == (
        "In 10/10/80, the user submission mynet ranks 5 of 5 (Elo 950, results on 5 of 6 datasets, 95% interval "
        "900–990)."
    )
    two = lb.assign(origin=["builtin", "builtin", "builtin", "user:mynet", "user:mynet"])
    assert sentences(tables(leaderboard=two))["submitted"] == (
        "In 10/10/80, of the user submissions, gcn-Default ranks 4 of 5 (Elo 1000, 95% interval 900–1100) and mynet "
        "ranks 5 of 5 (Elo 950, results on 5 of 6 datasets, 95% interval 900–990)."
    )
    assert "submitted" not in sentences(tables())  # no submission, no sentence


def test_the_strongest_gfm_says_how_many_of_its_results_are_imputed():
    assert sentences(tables())["gfm"] == (
        "In 10/10/80, the strongest GFM is graphany: Elo 1168, rank 3 of 4 (mean rank across datasets 2.50; on 2 of "
        "its 6 datasets its result is the imputed gcn-Default one)."
    )


def test_each_cost_has_one_frontier_sentence_that_says_what_budgets_change():
    s = sentences(tables())
    assert s["pareto_time"] == (
        "In 10/10/80, the workflow-time Pareto frontier, cheapest first, is gcn and graphany (GFMs on it: graphany); "
        "intermediate tuning budgets do not change it."
    )
    assert "pareto_time_budgets" not in s and "pareto_memory_budgets" not in s
    budgets = pd.DataFrame({**FRONT, "view": ["gcn@5", "gcn"], "kind": "supervised", "mean_overhead": [1.0, 0.5]})
    assert sentences(tables(pareto_memory_budgets=budgets))["pareto_memory"] == (
        "In 10/10/80, the peak-memory Pareto frontier, cheapest first, is gcn and graphany (GFMs on it: graphany); "
        "intermediate tuning budgets add gcn@5 and push graphany off it (then no GFM on it)."
    )


def test_tuning_gains_are_ordered_and_sized_by_their_search():
    assert sentences(tables())["tuning"] == (
        "In 10/10/80, a full search improves on the default configuration on test most for gcn (+8.8 points; "
        "within 1 point of it from k = 5 of 5 trials); it does not improve mlp (-0.1 points)."
    )
    worse = tables()["tuning_requirements"].assign(tuning_gain=[-0.1, -1.5])
    assert sentences(tables(tuning_requirements=worse))["tuning"] == (
        "In 10/10/80, a full search does not improve on the default configuration on test for any method: gcn "
        "(-1.5 points) and mlp (-0.1 points)."
    )
    flat = tables()["tuning_requirements"].assign(tuning_gain=[0.01, -1.5])
    assert sentences(tables(tuning_requirements=flat))["tuning"].endswith("gcn (-1.5 points) and mlp (no change).")


def test_the_validation_test_gap_says_which_way_each_score_moves():
    s = sentences(tables())["validation_test_gap"]
    assert s == (
        "In 10/10/80, a full search instead of the default configuration raises validation by 1.5 points and test "
        "by 2.3 points (mean over 2 methods): test comes out 0.8 points better than validation suggests."
    )
    over = tables()["validation_test_gap"].assign(overstatement=[3.0, 1.0], val_gain=[-1.3, 0.0])
    assert sentences(tables(validation_test_gap=over))["validation_test_gap"] == (
        "In 10/10/80, a full search instead of the default configuration lowers validation by 0.7 points and raises "
        "test by 2.3 points (mean over 2 methods): validation overstates what tuning does on test by 2.0 points "
        "(most overstated: gcn, by 3.0 points)."
    )


def test_task_type_leaders_name_ties_and_dataset_counts():
    assert sentences(tables())["task_types"] == (
        "In 10/10/80, Elo is led on binary tasks (auroc, 1 dataset) by gcn and gat; on multiclass tasks "
        "(accuracy, 3 datasets) by mlp."
    )


def test_metric_sensitivity_says_which_way_a_method_moves():
    assert sentences(tables())["metric_sensitivity"].endswith("graphany moves down 2 places).")


def test_an_overlap_without_a_replacement_is_called_omitted():
    s = sentences(tables())["pretraining_overlap"]
    assert s == (
        "In 10/10/80, 2 GFM result(s) are omitted (1 replaced by gcn-Default, the rest without a matched "
        "gcn-Default result) for pretraining overlap: graphany on cora, graphany on wisconsin."
    )
