"""What the leaderboard rests on: cells planned vs present, the few-datasets rule, and reports from any store."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from orchestrator.analysis import elo
from orchestrator.analysis.cohorts import cell_coverage
from orchestrator.analysis.site import _coverage, _few_datasets_warning, build_report
from orchestrator.analysis.tables import compute_analysis
from orchestrator.analysis.views import prepare
from tests.synthetic_trials import ONLY_STATUS, mixed_status_trials, synthetic_trials, trial_rows


def test_the_bootstrap_rule_counts_distinct_resamples():
    # A resample is a multiset of d of the d datasets: C(2d - 1, d) of them, whatever the rounds drawn.
    rng = np.random.default_rng(0)
    for d in range(1, 6):
        drawn = {tuple(np.bincount(rng.choice(d, size=d), minlength=d)) for _ in range(3_000)}
        assert len(drawn) <= math.comb(2 * d - 1, d)
    assert [elo.bootstrap_supported(d) for d in range(1, 7)] == [False, False, False, False, True, True]
    assert elo.MIN_BOOTSTRAP_DATASETS == 5  # C(7, 4) = 35 < 40 = 1 / 2.5% <= C(9, 5) = 126


def test_a_two_dataset_interval_is_spanned_by_single_resamples():
    scores = {"a": [0.9, 0.5], "b": [0.6, 0.7], "c": [0.55, 0.65]}
    res = pd.DataFrame(
        [
            {"view": v, "dataset": f"d{i}", "split": 0, "score": s}
            for v, per in scores.items()
            for i, s in enumerate(per)
        ]
    )
    board = elo.elo_ratings(res, rounds=200).set_index("view")
    totals = elo.pair_totals(elo.partition_errors(res))
    # the only three resamples: {d0, d0}, {d0, d1}, {d1, d1}
    fits = [
        elo.bradley_terry(totals.first, totals.second, c @ totals.won_first, c @ totals.won_second, len(totals.views))
        for c in (np.array([2.0, 0.0]), np.array([1.0, 1.0]), np.array([0.0, 2.0]))
    ]
    a = list(totals.views).index("a")
    assert board.loc["a", "lower"] == pytest.approx(min(f[a] for f in fits))
    assert board.loc["a", "upper"] == pytest.approx(max(f[a] for f in fits))


def test_cell_coverage_counts_the_grid_and_names_each_status():
    cc = cell_coverage(prepare(mixed_status_trials())).set_index("method")
    assert cc["planned_cells"].tolist() == [8, 8, 8]  # 4 datasets x 2 splits, per method
    assert cc.loc["gcn", "unselectable_cells"] == 5 and cc.loc["gcn", "selected_cells"] == 3
    assert cc.loc["gcn", "unselectable_statuses"] == "6 timeout, 2 oom, 2 unavailable"
    assert cc.loc["mlp", "unselectable_statuses"] == "4 timeout, 2 failed, 2 nonfinite"
    assert cc.loc["graphany", "selected_cells"] == 8 and cc.loc["graphany", "unselectable_statuses"] == ""


def test_the_report_builds_when_each_status_is_the_only_one_of_a_cell(tmp_path):
    an = build_report(mixed_status_trials(), tmp_path, rounds=5, compute_stats=False)
    html = (tmp_path / "index.html").read_text()
    cells = html[html.index('id="cells"') :]
    cells = cells[: cells.index("</ul>")]
    assert "3 method(s) × 8 partition(s) = 24 planned cells" in cells
    for status in ONLY_STATUS:
        assert status in cells, status
    lb = an.tables["leaderboard"]
    assert {"gcn", "gcn-Default", "mlp", "mlp-Default", "graphany"} <= set(lb["view"])
    # on d2 only the GFM has results: the supervised views have no reference result there to impute
    res = an.tables["results"]
    assert set(res.loc[res["dataset"] == "d2", "view"]) == {"graphany"}


def test_a_store_whose_only_supervised_method_never_succeeds_still_reports(tmp_path):
    # The report used to stop at "'workflow_peak_bytes__1'": no default anywhere had a cost. (On texas: GraphAny
    # pretrained on wisconsin, where its result is omitted and, with no gcn-Default to replace it, nothing is left.)
    rows = []
    for split in (0, 1):
        rows.append(dict(method="graphany", kind="gfm", dataset="texas", split=split, trial_index=0,
                         val_loss=0.5, test_primary=0.6))  # fmt: skip
        rows.append(dict(method="gcn", dataset="texas", split=split, trial_index=0, status="timeout",
                         val_loss=np.nan, test_primary=np.nan, fit_peak_rss_bytes=np.nan,
                         predict_peak_rss_bytes=np.nan, predict_service_s=np.nan))  # fmt: skip
    an = compute_analysis(trial_rows(rows), rounds=5, compute_stats=False)  # the crash was in the tables
    assert list(an.tables["leaderboard"]["view"]) == ["graphany"]
    assert an.tables["cell_coverage"].set_index("method").loc["gcn", "unselectable_statuses"] == "2 timeout"


def test_a_store_with_nothing_selectable_says_so():
    rows = [
        dict(method="gcn", dataset="d", split=s, trial_index=0, status="oom", val_loss=np.nan, test_primary=np.nan)
        for s in (0, 1)
    ]
    an = compute_analysis(trial_rows(rows), rounds=5, compute_stats=False)
    assert any("No cell holds a selectable result" in n and "2 oom" in n for n in an.notes)
    assert "2 hold trials but none selectable (gcn 2: 2 oom)" in "".join(_coverage(an))


def test_a_two_dataset_report_states_its_coverage_and_warns_about_its_intervals(tmp_path):
    trials = synthetic_trials(
        supervised=("mlp", "gcn"),
        gfms=("graphany",),
        n_datasets=2,
        n_trials=3,
        gfm_trials=2,
        failure_rate=0,
        gfm_max_classes=None,
        regimes=("10/10/80",),  # one regime: the page is the same per regime, and each costs a set of figures
    )
    cut = (trials["method"] == "mlp") & (trials["dataset"] == "ds01") & (trials["split"] == 4)
    build_report(trials[~cut], tmp_path, rounds=20, compute_stats=False)
    html = (tmp_path / "index.html").read_text()
    assert html.index('id="coverage"') < html.index('id="lb-10-10-80"')  # at the top, above the leaderboards
    assert "3 method(s) × 10 partition(s) = 30 planned cells; 29 hold a selectable result" in html
    assert "1 hold no trial (mlp 1)" in html  # the deleted cell
    warning = html[html.index('id="few-datasets-warning"') :]
    warning = warning[: warning.index("</p>")]  # one line on the first screen, linked to the reason
    assert "10/10/80 (2 datasets)" in warning and '<a href="#few-datasets">' in warning
    why = html[html.index('id="few-datasets"') :]
    why = why[: why.index("</p>")]
    assert html.index('id="few-datasets-warning"') < html.index('id="coverage"') < html.index('id="few-datasets"')
    assert "10/10/80 compares methods on 2 dataset(s) (3 distinct resamples)" in why and "5 datasets or more" in why
    # the imputed mlp cell is counted, and every interval rests on too few datasets
    for table_id in ("leaderboard-10-10-80", "leaderboard-native-10-10-80"):  # the designated and non-imputed views
        table = html[html.index(f'id="{table_id}"') :]
        table = table[: table.index("</table>")]
        assert table.count("] \u2020</td>") == 5, table_id  # 5 views: mlp, mlp-Default, gcn, gcn-Default, graphany
    cov = pd.read_csv(tmp_path / "tables" / "coverage.csv")
    mlp = cov[(cov["regime"] == "10/10/80") & cov["view"].isin(["mlp", "mlp-Default"])]
    assert mlp["imputed_datasets"].tolist() == [1, 1]


def test_a_report_on_enough_datasets_has_no_warning(tmp_path):
    an = compute_analysis(
        synthetic_trials(supervised=("gcn",), gfms=(), n_datasets=5, n_trials=1, regimes=("10/10/80",)),
        rounds=5,
        compute_stats=False,
    )
    assert _few_datasets_warning(an) == []
