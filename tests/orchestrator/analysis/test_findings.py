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
    "native_datasets": [4, 4, 2, 4],
    "imputed_datasets": [0, 0, 2, 0],
}
FRONT = {"regime": R, "view": ["gcn", "graphany"], "kind": ["supervised", "gfm"], "on_front": True}
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
    s = sentences(tables())
    assert s["elo"].startswith("In 10/10/80, gat and gcn tie for the lead in Elo at 1249 among 4 compared methods")
    assert "gat 393–3041, gcn 599–3069" in s["elo"]
    one = tables()["leaderboard"].assign(elo=[1300.0, 1248.6, 1167.6, 1000.0])
    assert sentences(tables(leaderboard=one))["elo"] == (
        "In 10/10/80, gat leads Elo at 1300 (95% interval 393–3041) among 4 compared methods."
    )


def test_the_strongest_gfm_says_how_many_of_its_results_are_imputed():
    assert sentences(tables())["gfm"] == (
        "In 10/10/80, the strongest GFM is graphany: Elo 1168, rank 3 of 4 (mean rank across datasets 2.50; on 2 of "
        "its 4 datasets its result is the imputed gcn-Default one)."
    )


def test_tuning_gains_are_ordered_and_sized_by_their_search():
    assert sentences(tables())["tuning"] == (
        "In 10/10/80, the test gain of a full search over the default configuration, largest first: gcn +8.8 points "
        "(within 1 point of the full search from k = 5 of 5 trials); mlp -0.1 points (within 1 point of the full "
        "search from k = 1 of 5 trials)."
    )


def test_a_negative_validation_test_gap_is_called_an_understatement():
    s = sentences(tables())["validation_test_gap"]
    assert "improves validation by 1.5 points and test by 2.3 points over the default, averaged over 2 methods" in s
    assert "validation understates the gain by 0.8 points (largest overstatement: mlp, -0.1)" in s
    over = tables()["validation_test_gap"].assign(overstatement=[3.0, 1.0])
    assert (
        "validation overstates the gain by 2.0 points (largest overstatement: gcn, +3.0)"
        in sentences(tables(validation_test_gap=over))["validation_test_gap"]
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
