"""The report on a store written by a real sweep: anchor, imputation, subgroups and the appendix views.

The synthetic tables of the other tests use the records' own method names; this test makes sure
the report works on what `orchestrator run` actually writes.
"""

from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

from .conftest import REMOVED

pytestmark = pytest.mark.slow


def test_real_store_anchors_gcn_default_at_1000_and_imputes_the_removed_cell(real_store, real_report):
    proc, out = real_report
    assert proc.returncode == 0, proc.stderr
    assert "absent" not in proc.stdout and "nothing could be imputed" not in proc.stdout
    lb = pd.read_csv(out / "tables" / "leaderboard.csv")
    anchor = lb[lb["view"] == "gcn-Default"]
    assert sorted(anchor["regime"]) == ["10/10/80", "50/25/25"]
    assert anchor["elo"].round(6).tolist() == [1000.0, 1000.0]
    res = pd.read_csv(out / "tables" / "results.csv")
    cell = (
        (res["dataset"] == REMOVED["dataset"])
        & (res["regime"] == REMOVED["regime"])
        & (res["split"] == REMOVED["split"])
    )
    ref = res[cell & (res["view"] == "gcn-Default")]
    filled = res[cell & res["method_name"].eq("mlp")]
    assert sorted(filled["view"]) == ["mlp", "mlp-Default"] and filled["imputed"].all()
    assert (filled["score"] == ref["score"].item()).all()
    # Elsewhere only what the store lacks is imputed: GraphAny on its pretraining graph, and any
    # default whose trial 0 ran out of the sweep's time limit on this machine.
    with sqlite3.connect(real_store) as db:
        ok = pd.read_sql("SELECT method, dataset, regime, split, trial_index FROM trials WHERE status = 'ok'", db)
    native = {(f"{m}-Default" if i == 0 else m, d, r, s) for m, d, r, s, i in ok.itertuples(index=False)}
    native |= {(m, d, r, s) for m, d, r, s, _ in ok.itertuples(index=False)}
    rest = res[~cell & res["imputed"] & ~res["overlap"]]
    assert (
        not {
            (v, d, r, s)
            for v, d, r, s in zip(rest["view"], rest["dataset"], rest["regime"], rest["split"], strict=True)
        }
        & native
    )
    with sqlite3.connect(real_store) as db:  # the store itself is untouched
        assert db.execute(
            "SELECT COUNT(*) FROM trials WHERE method = 'mlp' AND dataset = 'texas' AND split = 1 "
            "AND regime = '10/10/80'"
        ).fetchone() == (0,)


def test_real_store_report_computes_dataset_statistics_and_renders_subgroups(real_report):
    proc, out = real_report
    assert "Subgroup views skipped" not in proc.stdout
    members = pd.read_csv(out / "tables" / "subgroup_membership.csv")
    assert set(members["dataset"]) == {"synthetic-homophilous", "texas", "wisconsin"}
    texas = members[members["dataset"] == "texas"].set_index("property")["subgroup"]
    assert texas["num_nodes"] == "nodes<1k" and texas["num_classes"] == "3-10 classes"
    assert (out / "figures" / "subgroups_10-10-80.png").is_file()


def test_real_store_report_has_the_appendix_views_and_findings(real_report):
    _, out = real_report
    req = pd.read_csv(out / "tables" / "tuning_requirements.csv")
    assert set(req["method"]) == {"mlp", "gcn"} and set(req["regime"]) == {"10/10/80", "50/25/25"}
    assert (req["search_trials"] == 2).all() and req["gain_k50_to_full"].isna().all()
    gap = pd.read_csv(out / "tables" / "validation_test_gap.csv")
    assert set(gap["budget"].astype(str)) == {"1", "full"}
    assert (gap.loc[gap["budget"].astype(str) == "1", ["val_gain", "test_gain"]] == 0).all().all()
    tt = pd.read_csv(out / "tables" / "task_type_leaderboards.csv")
    assert set(tt["task_type"]) == {"multiclass"} and set(tt["metric"]) == {"accuracy"}
    summary = pd.read_csv(out / "tables" / "metric_sensitivity_summary.csv")
    assert set(summary["metric"]) == {"macro_f1", "cross_entropy"}
    findings = pd.read_csv(out / "tables" / "findings.csv")
    for regime in ("10/10/80", "50/25/25"):
        topics = set(findings.loc[findings["regime"] == regime, "topic"])
        assert {
            "elo",
            "gfm",
            "pareto_time",
            "pareto_memory",
            "tuning",
            "validation_test_gap",
            "task_types",
        } <= topics
    for fig in findings["figure"]:
        assert (out / fig).is_file(), fig
    page = (out / "findings.html").read_text()
    assert ("leads Elo" in page or "tie for the lead in Elo" in page) and 'href="figures/tuning_10-10-80.png"' in page
    assert "the strongest GFM is graphany" in page


def test_real_store_sweep_never_runs_a_graphany_checkpoint_on_its_own_pretraining_graph(real_store, real_report):
    with sqlite3.connect(real_store) as db:
        ga = pd.read_sql("SELECT dataset, status, config_json FROM trials WHERE method = 'graphany'", db)
    used = {(d, json.loads(c).get("checkpoint")) for d, c in zip(ga["dataset"], ga["config_json"], strict=True)}
    assert {d for d, _ in used} == {"synthetic-homophilous", "texas", "wisconsin"}
    assert ("wisconsin", "wisconsin") not in used
    _, out = real_report
    assert pd.read_csv(out / "tables" / "pretraining_overlap.csv").empty
    res = pd.read_csv(out / "tables" / "results.csv")
    assert not res.loc[res["view"] == "graphany", "overlap"].any()


def test_real_store_graphany_on_its_checkpoints_pretraining_graph_is_replaced_by_gcn_default(relabelled_report):
    proc, out = relabelled_report
    assert proc.returncode == 0, proc.stderr
    audit = pd.read_csv(out / "tables" / "pretraining_overlap.csv")
    assert set(zip(audit["view"], audit["dataset"], strict=True)) == {("graphany", "wisconsin")}
    assert len(audit) == 4 and audit["replaced"].all()  # 2 regimes x 2 splits
    res = pd.read_csv(out / "tables" / "results.csv")
    ga = res[(res["view"] == "graphany") & (res["dataset"] == "wisconsin")].set_index(["regime", "split"])
    ref = res[(res["view"] == "gcn-Default") & (res["dataset"] == "wisconsin")].set_index(["regime", "split"])
    assert ga["overlap"].all() and ga["imputed"].all()
    assert (ga["score"] == ref["score"].reindex(ga.index)).all()
    assert not res.loc[(res["view"] == "graphany") & (res["dataset"] != "wisconsin"), "overlap"].any()
    findings = pd.read_csv(out / "tables" / "findings.csv")
    for regime in ("10/10/80", "50/25/25"):
        assert "pretraining_overlap" in set(findings.loc[findings["regime"] == regime, "topic"])
