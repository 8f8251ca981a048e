"""Metric sensitivity, task-type leaderboards, tuning requirements, the validation–test gap,
results below chance and the reference view, on hand-built tables with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from orchestrator.analysis import sensitivity as se
from orchestrator.analysis import tuning as tu
from orchestrator.analysis.views import below_chance, build_results, reference_view
from orchestrator.records import TASK_TYPES, primary_metric_name
from tests.synthetic_trials import trial_rows


def results(rows: list[tuple]) -> pd.DataFrame:
    """(view, dataset, task_type, split, score, precision, cross_entropy) rows as a results table."""
    df = pd.DataFrame(
        rows, columns=["view", "dataset", "task_type", "split", "score", "test_precision", "test_cross_entropy"]
    )
    df["test_auroc"] = np.where(df["task_type"] == "binary", df["score"], np.nan)
    df["test_accuracy"] = df["score"]
    df["test_macro_f1"] = np.where(df["task_type"] == "binary", np.nan, df["score"])
    return df.assign(regime="10/10/80", origin="builtin", imputed=False)


def two_tasks() -> pd.DataFrame:
    rows = []
    for d in range(3):
        for s in range(2):
            # binary: a wins AUROC but loses precision; c is worst on both
            rows += [
                ("a", f"b{d}", "binary", s, 0.9, 0.5, 0.3),
                ("b", f"b{d}", "binary", s, 0.8, 0.7, 0.4),
                ("c", f"b{d}", "binary", s, 0.7, 0.4, 0.5),
            ]
            # multiclass: b wins everything
            rows += [
                ("a", f"m{d}", "multiclass", s, 0.6, np.nan, 0.9),
                ("b", f"m{d}", "multiclass", s, 0.7, np.nan, 0.8),
                ("c", f"m{d}", "multiclass", s, 0.5, np.nan, 1.0),
            ]
    return results(rows)


def test_task_type_leaderboards_rank_each_task_type_on_its_primary_metric():
    tt = se.primary_boards(se.metric_sensitivity(two_tasks(), rounds=5)[0])
    lead = tt[tt["position"] == 1].set_index("task_type")
    assert lead.loc["binary", "view"] == "a" and lead.loc["binary", "metric"] == "auroc"
    assert lead.loc["multiclass", "view"] == "b" and lead.loc["multiclass", "metric"] == "accuracy"
    assert (tt.groupby("task_type")["datasets"].max() == 3).all()
    assert tt.set_index(["task_type", "view"]).loc[("binary", "c"), "mean_rank"] == 3.0


def test_metric_sensitivity_finds_the_precision_reordering():
    boards, summary = se.metric_sensitivity(two_tasks(), rounds=5)
    s = summary.set_index(["task_type", "metric"])
    assert s.loc[("binary", "precision"), "changed_positions"] == 2
    assert s.loc[("binary", "precision"), "spearman"] == pytest.approx(0.5)
    assert s.loc[("binary", "accuracy"), "changed_positions"] == 0 and s.loc[("binary", "accuracy"), "spearman"] == 1.0
    # cross-entropy is lower-is-better: the same order as the primary metric here
    assert (
        s.loc[("binary", "cross_entropy"), "spearman"] == 1.0
        and s.loc[("multiclass", "cross_entropy"), "spearman"] == 1.0
    )
    b = boards[(boards["task_type"] == "binary") & (boards["metric"] == "precision")].set_index("view")
    assert b.loc["b", "position"] == 1 and b.loc["b", "position_change"] == 1 and b.loc["a", "position_change"] == -1
    assert set(boards.loc[boards["primary"], "metric"]) == {"auroc", "accuracy"}


def searches() -> pd.DataFrame:
    """gcn with three trials per cell on two datasets; validation and test scores chosen by hand.

    Trial 0 (default): val 0.70, test 0.70. Trial 1: val 0.80, test 0.72. Trial 2 (best val loss):
    val 0.90, test 0.74 on d0 and 0.78 on d1.
    """
    rows = []
    for dataset, t2 in (("d0", 0.74), ("d1", 0.78)):
        for split in (0, 1):
            for i, (vl, va, te) in enumerate(((0.5, 0.70, 0.70), (0.4, 0.80, 0.72), (0.3, 0.90, t2))):
                rows.append(
                    dict(
                        method="gcn",
                        dataset=dataset,
                        split=split,
                        trial_index=i,
                        val_loss=vl,
                        val_accuracy=va,
                        test_primary=te,
                    )
                )
    return trial_rows(rows)


def test_tuning_requirements_and_validation_test_gap_have_known_answers():
    _, points = build_results(searches(), budgets=(1, 2, 50))
    table, curves = tu.tuning_requirements(points)
    row = table.iloc[0]
    assert row["search_trials"] == 3 and row["datasets"] == 2
    assert row["tuning_gain"] == pytest.approx((0.04 + 0.08) / 2 * 100)  # 6 points
    # k = 2 lies (0.02 + 0.06) / 2 = 4 points below the full search: only the full search is within one point
    assert curves.set_index("budget").loc["2", "gap_to_full"] == pytest.approx(4.0)
    assert row["k_within_1pt"] == 3
    assert np.isnan(row["gain_k50_to_full"])  # the search ran fewer than 50 trials
    gap = tu.validation_test_gap(points).set_index("budget")
    assert set(gap.index) == {"1", "2", "full"}
    assert gap.loc["full", "val_gain"] == pytest.approx(20.0) and gap.loc["full", "test_gain"] == pytest.approx(6.0)
    assert gap.loc["full", "overstatement"] == pytest.approx(14.0)
    assert gap.loc["2", "overstatement"] == pytest.approx(10.0 - 2.0)
    assert gap.loc["1", "overstatement"] == 0.0


def test_below_chance_flags_native_binary_results_under_half():
    res = pd.DataFrame(
        {
            "regime": "10/10/80",
            "view": ["gvt", "gvt", "gcn", "gcn", "mlp"],
            "dataset": ["b", "b", "b", "m", "b"],
            "split": [0, 1, 0, 0, 0],
            "selected_trial_index": 0,
            "val_loss": 0.6,
            "task_type": ["binary", "binary", "binary", "multiclass", "binary"],
            "test_auroc": [0.38, 0.51, 0.49, np.nan, 0.2],
            "imputed": [False, False, False, False, True],
        }
    )
    flagged = below_chance(res)
    assert list(zip(flagged["view"], flagged["split"], strict=True)) == [("gvt", 0), ("gcn", 0)]


def test_reference_view_is_found_by_identity_not_by_spelling():
    rows = []
    for version, splits in (("1", (0,)), ("2", (0, 1))):
        for split in splits:
            rows.append(
                dict(
                    method="gcn",
                    method_version=version,
                    dataset="d",
                    split=split,
                    trial_index=0,
                    val_loss=0.5,
                    test_primary=0.7,
                )
            )
    rows.append(
        dict(method="graphany", kind="gfm", dataset="d", split=0, trial_index=0, val_loss=0.5, test_primary=0.6)
    )
    res, _ = build_results(trial_rows(rows))
    assert reference_view(res) == "gcn@2-Default"  # the version with the most results
    assert reference_view(res, "graphany") == "graphany"
    assert reference_view(res, "GCN") is None and reference_view(res, "gat") is None


def test_each_task_types_first_sensitivity_metric_is_the_primary_metric_it_is_scored_on():
    assert set(se.METRICS) == set(TASK_TYPES)
    assert {task: next(iter(m)) for task, m in se.METRICS.items()} == {t: primary_metric_name(t) for t in TASK_TYPES}
