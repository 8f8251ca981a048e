"""The `report` command on a synthetic store, and its error handling."""

from __future__ import annotations

import sqlite3

import pandas as pd
import typer
from typer.testing import CliRunner

from orchestrator.cli.report import report


def run(args):
    app = typer.Typer()
    app.command()(report)
    return CliRunner().invoke(app, args)


def test_report_writes_site_and_data_beside_every_figure(built_report):
    res, out = built_report
    assert res.exit_code == 0, res.output
    assert (out / "index.html").is_file() and (out / "datasets.html").is_file()
    pngs = sorted((out / "figures").glob("*.png"))
    assert len(pngs) >= 20
    for p in pngs:
        assert p.with_suffix(".csv").is_file() and p.with_suffix(".parquet").is_file(), p
    lb = pd.read_csv(out / "tables" / "leaderboard.csv")
    assert set(lb["regime"]) == {"10/10/80", "50/25/25"}
    # 4 supervised x (default + tuned) + 2 GFMs + a user submission (default + tuned)
    assert lb.groupby("regime").size().tolist() == [12, 12]
    assert lb.loc[lb["view"] == "gcn-Default", "elo"].round(6).tolist() == [1000.0, 1000.0]
    user = lb[lb["view"] == "mynet"]
    assert (user["imputed_datasets"] == 0).all() and (user["missing_datasets"] == 1).all()
    assert (lb.loc[lb["kind"] == "gfm", "imputed_datasets"] > 0).all()  # GFMs skip > 10 classes
    html = (out / "index.html").read_text()
    assert "http://" not in html and "https://" not in html  # nothing to fetch
    assert "Subgroup views skipped" not in html
    for page in ("findings.html", "tables.html"):
        assert (out / page).is_file()
    for section in ('id="tuning"', 'id="metrics"', 'id="overlap"', 'id="below-chance"'):
        assert section in html
    for table in (
        "tuning_requirements",
        "validation_test_gap",
        "task_type_leaderboards",
        "metric_sensitivity",
        "metric_sensitivity_summary",
        "pretraining_overlap",
        "below_chance",
        "findings",
    ):
        assert (out / "tables" / f"{table}.csv").is_file() and (out / "tables" / f"{table}.parquet").is_file(), table


def test_anchor_names_a_method_and_an_unknown_one_is_a_one_line_error(small_store, tmp_path):
    store, stats = small_store
    res = run(
        [
            "--store",
            str(store),
            "--out",
            str(tmp_path / "r"),
            "--dataset-stats",
            str(stats),
            "--bootstrap-rounds",
            "5",
            "--anchor",
            "mlp",
        ]
    )
    assert res.exit_code == 0, res.output
    lb = pd.read_csv(tmp_path / "r" / "tables" / "leaderboard.csv")
    assert lb.loc[lb["view"] == "mlp-Default", "elo"].round(6).tolist() == [1000.0, 1000.0]
    line = one_line_error(run(["--store", str(store), "--out", str(tmp_path / "r2"), "--anchor", "GCN-Default"]))
    assert "no results for a method named 'GCN-Default'" in line and "gcn" in line


def test_subgroups_skipped_with_a_note_without_stats(small_store, tmp_path):
    store, _ = small_store
    res = run(["--store", str(store), "--out", str(tmp_path / "r"), "--bootstrap-rounds", "5"])
    assert res.exit_code == 0, res.output
    assert "Subgroup views skipped" in res.output
    assert "Subgroup views skipped" in (tmp_path / "r" / "index.html").read_text()


def one_line_error(res):
    assert res.exit_code != 0
    assert res.exception is None or isinstance(res.exception, SystemExit)
    lines = [ln for ln in res.output.strip().splitlines() if ln]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.output
    assert "Traceback" not in res.output
    return lines[0]


def test_missing_store(tmp_path):
    line = one_line_error(run(["--store", str(tmp_path / "nope.sqlite"), "--out", str(tmp_path / "o")]))
    assert "not found" in line


def test_empty_table(tmp_path):
    store = tmp_path / "empty.sqlite"
    from orchestrator.records import COLUMNS

    con = sqlite3.connect(store)
    con.execute(f"CREATE TABLE trials ({', '.join(COLUMNS)})")
    con.commit()
    con.close()
    assert "empty" in one_line_error(run(["--store", str(store), "--out", str(tmp_path / "o")]))


def test_missing_column_and_missing_table(tmp_path):
    csv = tmp_path / "t.csv"
    pd.DataFrame({"method": ["gcn"], "dataset": ["d"]}).to_csv(csv, index=False)
    assert "val_loss" in one_line_error(run(["--store", str(csv), "--out", str(tmp_path / "o")]))
    db = tmp_path / "other.sqlite"
    sqlite3.connect(db).execute("CREATE TABLE runs (x)").connection.commit()
    assert "no table named 'trials'" in one_line_error(run(["--store", str(db), "--out", str(tmp_path / "o")]))


def test_parquet_and_csv_exports_load_the_same(small_store, tmp_path):
    from orchestrator.trial_table.load import load_trials

    store, _ = small_store
    a = load_trials(store)
    raw = pd.read_sql("SELECT * FROM trials", sqlite3.connect(store))
    raw.to_parquet(tmp_path / "t.parquet")
    raw.to_csv(tmp_path / "t.csv", index=False)
    for p in (tmp_path / "t.parquet", tmp_path / "t.csv"):
        b = load_trials(p)
        assert len(b) == len(a)
        assert b["val_loss"].sum() == a["val_loss"].sum()


def test_a_submission_bundle_joins_the_leaderboard_never_imputed(small_store, tmp_path):
    from orchestrator.store import read_trials
    from orchestrator.submission.bundle import finalize_store, seal

    store, _ = small_store
    rows = read_trials(store)
    submitted = rows[rows["method"] == "mlp"].copy()
    submitted["method"] = "Submitted"
    submitted["origin"] = "user:sub"
    submitted["trial_key"] = "sub-" + submitted["trial_key"].astype(str)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    with sqlite3.connect(bundle / "trials.sqlite") as db:
        submitted.to_sql("trials", db, index=False)
    finalize_store(bundle / "trials.sqlite")
    (bundle / "submission.json").write_text('{"id": "sub"}\n')
    seal(bundle)
    res = run(["--store", str(store), "--bundle", str(bundle), "--out", str(tmp_path / "r"), "--bootstrap-rounds", "5"])
    assert res.exit_code == 0, res.output
    lb = pd.read_csv(tmp_path / "r" / "tables" / "leaderboard.csv")
    sub = lb[lb["view"] == "Submitted"]
    assert len(sub) == 2 and (sub["imputed_datasets"] == 0).all()
    (bundle / "submission.json").write_text('{"id": "tampered"}\n')
    res = run(["--store", str(store), "--bundle", str(bundle), "--out", str(tmp_path / "r2")])
    assert res.exit_code == 2 and "changed after the bundle was sealed" in res.output


def test_every_finding_links_a_written_figure(built_report):
    res, out = built_report
    assert res.exit_code == 0, res.output
    findings = pd.read_csv(out / "tables" / "findings.csv")
    figures = findings.loc[findings["figure"].str.startswith("figures/"), "figure"]
    assert len(figures) and all((out / f).is_file() for f in figures), sorted(set(figures))


def test_methods_recompute_the_leaderboard_over_exactly_those_entrants(small_store, built_report, tmp_path):
    """Elo depends on who competes: a subset is rated afresh, not read off the full table's rows."""
    from orchestrator.analysis import elo as elo_mod
    from orchestrator.analysis.cohorts import impute
    from orchestrator.analysis.views import build_results
    from orchestrator.trial_table.load import load_trials

    store, _ = small_store
    res = run(["--store", str(store), "--out", str(tmp_path / "r"), "--bootstrap-rounds", "30", "--methods", "gcn,gat"])
    assert res.exit_code == 0, res.output
    assert "recomputed over 2 method(s): gcn, gat" in res.output
    sub = pd.read_csv(tmp_path / "r" / "tables" / "leaderboard.csv")
    assert set(sub["view"]) == {"gcn", "gcn-Default", "gat", "gat-Default"}
    trials = load_trials(store)
    results = impute(build_results(trials[trials["method"].astype(str).isin({"gcn", "gat"})])[0])
    for regime, got in sub.groupby("regime"):
        want = elo_mod.elo_ratings(results[results["regime"] == regime], anchor="gcn-Default", rounds=30)
        assert got.set_index("view")["elo"].round(6).to_dict() == want.set_index("view")["elo"].round(6).to_dict()
    full = pd.read_csv(built_report[1] / "tables" / "leaderboard.csv").set_index(["regime", "view"])["elo"]
    moved = (sub.set_index(["regime", "view"])["elo"] - full.reindex(sub.set_index(["regime", "view"]).index)).abs()
    assert moved.max() > 1  # filtering the full table would have kept these ratings
    line = one_line_error(run(["--store", str(store), "--out", str(tmp_path / "r2"), "--methods", "gcn,nosuch"]))
    assert "no trials of nosuch" in line


def test_the_non_imputed_view_ranks_each_method_on_its_own_results(built_report):
    _, out = built_report
    native = pd.read_csv(out / "tables" / "leaderboard_native.csv")
    imputed = pd.read_csv(out / "tables" / "leaderboard.csv")
    assert set(native["view"]) == set(imputed["view"])
    gfm = imputed.loc[imputed["kind"] == "gfm", "view"].iloc[0]
    # a GFM with imputed datasets is rated on fewer datasets when only its own results count
    got = native.set_index(["regime", "view"]).loc[:, "datasets"].xs(gfm, level="view")
    assert (got < imputed.set_index(["regime", "view"]).loc[:, "datasets"].xs(gfm, level="view")).all()
    html = (out / "index.html").read_text()
    assert 'id="leaderboard-native-10-10-80"' in html and "Non-imputed view" in html


def test_the_overlap_page_shows_what_each_gfm_declares_and_on_what_authority(built_report):
    _, out = built_report
    dec = pd.read_csv(out / "tables" / "pretraining_declarations.csv").set_index("method")
    assert dec.loc["gvt", "pretraining_graphs"] == "ogbn-arxiv" and dec.loc["gvt", "basis"].startswith("paper")
    assert "synthetic" in dec.loc["graphpfn", "basis"]
    assert 'id="pretraining-declarations"' in (out / "index.html").read_text()
