"""Build the static report: tables (CSV + Parquet), figures (PNG + their data), and HTML pages.

``build_report`` is the whole pipeline; ``compute_analysis`` is the part without any drawing.
The pages use relative links, inline CSS and a few lines of inline JavaScript (table sorting),
so the site opens from disk with no server and no network.
"""

from __future__ import annotations

import html
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from orchestrator.analysis import cohorts as co
from orchestrator.analysis import elo as elo_mod
from orchestrator.analysis import findings as fi
from orchestrator.analysis import overlap as ov
from orchestrator.analysis import pareto as pa
from orchestrator.analysis import ranking as rk
from orchestrator.analysis import sensitivity as se
from orchestrator.analysis import subgroups as sg
from orchestrator.analysis import tuning as tu
from orchestrator.analysis.load import AnalysisInputError
from orchestrator.analysis.views import REFERENCE_METHOD, below_chance, build_results, reference_view
from orchestrator.analysis.workflow import BUDGETS, FULL, workflow_costs


def slug(regime: str) -> str:
    return regime.replace("/", "-")


def figure_path(stem: str, regime: str) -> str:
    """Where a per-regime figure lives in the site (relative to its pages)."""
    return f"figures/{stem}_{slug(regime)}.png"


@dataclass
class Analysis:
    """Every table of the report, keyed by name; ``regimes`` in display order; ``notes`` for the page."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    regimes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    anchor: str | None = None  # the view fixed at 1000 Elo
    reference: str | None = None  # the view whose results fill missing built-in ones (GCN-Default)


def _leaderboard(regime_res: pd.DataFrame, anchor: str | None, rounds: int,
                 best_err: pd.Series, ref_time: pd.Series, ref_mem: pd.Series, cov: pd.DataFrame) -> dict[str, pd.DataFrame]:
    elo = elo_mod.elo_ratings(regime_res, anchor=anchor, rounds=rounds)
    mr = rk.mean_rank(regime_res)
    wm = rk.winrate_matrix(regime_res)
    tests = rk.pairwise_tests(regime_res)
    sig = rk.significant_record(tests)
    t_time = pa.tradeoff(regime_res, pa.TIME, best_err, ref_time)
    t_mem = pa.tradeoff(regime_res, pa.MEMORY, best_err, ref_mem)
    ident = regime_res.drop_duplicates("view").set_index("view")[["kind", "variant", "origin"]]
    lb = elo.merge(mr.drop(columns=["datasets"]), on="view", how="left")
    lb = lb.merge(rk.mean_winrate(wm).rename_axis("view").reset_index(), on="view", how="left")
    lb = lb.merge(sig, on="view", how="left")
    lb = lb.merge(t_time[["view", "mean_improvability", "mean_overhead"]].rename(columns={"mean_overhead": "overhead_time"}), on="view", how="left")
    lb = lb.merge(t_mem[["view", "mean_overhead"]].rename(columns={"mean_overhead": "overhead_memory"}), on="view", how="left")
    lb = lb.merge(cov[["view", "native_datasets", "imputed_datasets", "missing_datasets"]], on="view", how="left")
    lb = lb.join(ident, on="view")
    lb.insert(0, "rank", np.arange(1, len(lb) + 1))
    return {"leaderboard": lb, "elo": elo, "mean_rank": mr, "winrate": wm, "pairwise_tests": tests}


def compute_analysis(
    trials: pd.DataFrame,
    dataset_stats: pd.DataFrame | None = None,
    anchor: str | None = None,
    rounds: int = elo_mod.BOOTSTRAP_ROUNDS,
    near_complete_min: float = 0.9,
    compute_stats: bool = True,
) -> Analysis:
    """Every table of the report. BLAS runs single-threaded here: the fits are tiny (tens of
    parameters, thousands of times) and a multi-threaded BLAS spins far longer than it computes.

    ``anchor`` names the method whose default configuration is fixed at 1000 Elo (default: the
    reference method, GCN); a named method without results is an AnalysisInputError.
    ``dataset_stats`` overrides the statistics the report computes itself for the datasets it can
    load offline (``compute_stats``).
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _compute_analysis(trials, dataset_stats, anchor, rounds, near_complete_min, compute_stats)


def _compute_analysis(
    trials: pd.DataFrame,
    dataset_stats: pd.DataFrame | None,
    anchor_method: str | None,
    rounds: int,
    near_complete_min: float,
    compute_stats: bool,
) -> Analysis:
    an = Analysis()
    tick = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal tick
        now = time.perf_counter()
        an.timings[name] = round(now - tick, 3)
        tick = now

    costs = workflow_costs(trials)
    lap("workflow_costs")
    results, budget_points = build_results(trials, costs=costs)
    lap("selection")
    if compute_stats:
        dataset_stats, no_stats = sg.store_dataset_stats(sorted(results["dataset"].unique()), dataset_stats)
        if no_stats:
            an.notes.append(f"No statistics for {len(no_stats)} dataset(s) ({', '.join(no_stats[:8])}"
                            f"{', ...' if len(no_stats) > 8 else ''}): not loadable offline; they sit in no subgroup "
                            "(give their statistics with --dataset-stats).")
        lap("dataset_stats")
    an.tables["workflow_costs"] = costs
    # Pretraining overlaps leave the common universe before cohorts, so imputation replaces them.
    held_out, omitted = ov.audit(results)
    cohorts = co.cohorts(held_out, near_complete_min=near_complete_min)
    main, an.tables["pretraining_overlap"] = ov.mark_replacements(cohorts["all"], omitted)
    cohorts["all"] = main
    if len(omitted):
        an.notes.append(f"{len(omitted)} GFM result(s) on a graph its pretraining used are omitted and replaced by "
                        "the matched gcn-Default result: see 'Pretraining overlap'.")
    an.tables["results"] = main
    an.tables["budget_points"] = budget_points
    cov = co.coverage(main)
    an.tables["coverage"] = cov
    an.regimes = sorted(main["regime"].unique())
    anchor = reference_view(results, anchor_method or REFERENCE_METHOD)
    if anchor is None and anchor_method is not None:
        known = ", ".join(sorted(results["method_name"].unique()))
        raise AnalysisInputError(f"--anchor: no results for a method named {anchor_method!r} (methods: {known})")
    an.anchor, an.reference = anchor, reference_view(results)
    if anchor is None:
        an.notes.append(f"The reference method {REFERENCE_METHOD!r} has no default-configuration results: Elo "
                        "ratings are centred on 1000.")
    if an.reference is None:
        an.notes.append(f"The reference method {REFERENCE_METHOD!r} has no default-configuration results, so "
                        "nothing could be imputed.")
    an.tables["below_chance"] = below_chance(results)
    if len(an.tables["below_chance"]):
        an.notes.append(f"{len(an.tables['below_chance'])} selected binary result(s) score a test AUROC below 0.5 "
                        "(worse than chance): see 'Results below chance'.")
    lap("cohorts")

    per_regime: dict[str, list[pd.DataFrame]] = {}

    def add(name: str, df: pd.DataFrame, regime: str) -> None:
        per_regime.setdefault(name, []).append(df.assign(regime=regime))

    for regime in an.regimes:
        r_res = main[main["regime"] == regime]
        r_pts = budget_points[budget_points["regime"] == regime]
        # Both Pareto views share one reference: the best error / cheapest cost of any evaluated point.
        best_err = pa.best_error_by_dataset(r_res, r_pts)
        ref_time = pa.cheapest_by_dataset(pa.TIME, r_res, r_pts)
        ref_mem = pa.cheapest_by_dataset(pa.MEMORY, r_res, r_pts)
        parts = _leaderboard(r_res, anchor, rounds, best_err, ref_time, ref_mem, cov[cov["regime"] == regime])
        lap(f"leaderboard {regime}")
        add("leaderboard", parts["leaderboard"], regime)
        add("pairwise_tests", parts["pairwise_tests"], regime)
        an.tables[f"winrate_{slug(regime)}"] = parts["winrate"]
        stat, nem = rk.friedman_nemenyi(r_res)
        add("friedman", pd.DataFrame([stat]), regime)
        if not nem.empty:
            an.tables[f"nemenyi_{slug(regime)}"] = nem

        # Cohort sensitivity (Elo per cohort) and aggregation-rule sensitivity.
        for cname, cres in cohorts.items():
            cr = cres[cres["regime"] == regime]
            if cr["view"].nunique() >= 2:
                e = parts["elo"].copy() if cname == "all" else elo_mod.elo_ratings(cr, anchor=anchor, rounds=rounds)
                e["cohort"] = cname
                e["cohort_datasets"] = cr["dataset"].nunique()
                add("cohort_elo", e, regime)
        lb = parts["leaderboard"].set_index("view")
        rules = {"elo": lb["elo"], "mean_rank": -lb["mean_rank"], "mean_winrate": lb["mean_winrate"],
                 "mean_improvability": -lb["mean_improvability"]}
        add("rule_sensitivity", rk.rule_sensitivity(rules).reset_index(), regime)
        lap(f"sensitivity {regime}")

        # Pareto: endpoints, then with intermediate budgets.
        for cost, name in ((pa.TIME, "time"), (pa.MEMORY, "memory")):
            t = pa.tradeoff(r_res, cost, best_err, ref_time if cost == pa.TIME else ref_mem)
            t = t.merge(r_res.drop_duplicates("view")[["view", "variant", "kind", "method"]], on="view")
            t["on_front"] = pa.pareto_front(t)
            add(f"pareto_{name}", t, regime)
            inter = r_pts[~r_pts["view"].str.endswith("@" + FULL) & (r_pts["k"] > 1)]
            tb = pa.tradeoff(inter, cost, best_err, ref_time if cost == pa.TIME else ref_mem)
            tb = tb.merge(inter.drop_duplicates("view")[["view", "variant", "kind", "method", "k"]], on="view")
            both = pd.concat([t.drop(columns=["on_front"]), tb], ignore_index=True)
            both["on_front"] = pa.pareto_front(both)
            add(f"pareto_{name}_budgets", both, regime)
        # Trajectories: k = 1 (default) ... 200, then the full search.
        traj = pa.tradeoff(r_pts, pa.TIME, best_err, ref_time)
        traj = traj.merge(r_pts.drop_duplicates("view")[["view", "method", "k"]], on="view")
        measured = pa.tradeoff(r_pts.assign(workflow_s=r_pts["workflow_s_measured"]), pa.TIME, best_err, ref_time)
        traj = traj.merge(measured[["view", "mean_overhead"]].rename(columns={"mean_overhead": "mean_overhead_measured"}), on="view")
        score = r_pts.groupby("view")["score"].mean().rename("mean_score")
        traj = traj.join(score, on="view")
        traj["budget"] = np.where(traj["view"].str.endswith("@" + FULL), FULL, traj["k"].astype(str))
        add("budget_trajectories", traj.sort_values(["method", "k"]), regime)
        lap(f"pareto {regime}")

        # Dataset-level leaders (tuned or canonical configurations) and per-dataset scores.
        wide = rk.dataset_scores(r_res)
        cand = wide[[v for v in wide.columns if not v.endswith("-Default")]]
        leaders = pd.DataFrame({"dataset": cand.index, "leader": cand.idxmax(axis=1).to_numpy(),
                                "score": cand.max(axis=1).to_numpy()})
        kinds = r_res.drop_duplicates("view").set_index("view")["kind"]
        leaders["leader_kind"] = leaders["leader"].map(kinds)
        add("dataset_leaders", leaders, regime)
        per_ds = r_res.groupby(["dataset", "view"]).agg(
            score_mean=("score", "mean"), score_std=("score", "std"), partitions=("split", "nunique"),
            imputed=("imputed", "any"), workflow_s=("workflow_s", "mean"), task_type=("task_type", "first")).reset_index()
        add("per_dataset", per_ds, regime)

        if dataset_stats is not None:
            add("subgroup_ranks", sg.subgroup_ranks(r_res, dataset_stats), regime)
        lap(f"datasets {regime}")

    # The paper's appendix views, over the common universe (``main``) and the budget points.
    an.tables["metric_sensitivity"], an.tables["metric_sensitivity_summary"] = se.metric_sensitivity(
        main, anchor=anchor, rounds=rounds)
    an.tables["task_type_leaderboards"] = se.primary_boards(an.tables["metric_sensitivity"])
    lap("metric and task-type views")
    an.tables["tuning_requirements"], an.tables["tuning_curves"] = tu.tuning_requirements(budget_points)
    an.tables["validation_test_gap"] = tu.validation_test_gap(budget_points)
    lap("tuning")

    for name, frames in per_regime.items():
        df = pd.concat(frames, ignore_index=True)
        cols = ["regime"] + [c for c in df.columns if c != "regime"]
        an.tables[name] = df[cols]
    an.tables["findings"] = fi.findings(an.tables, an.regimes, figure_path)
    if dataset_stats is not None:
        an.tables["subgroup_boundaries"] = sg.subgroup_table()
        an.tables["subgroup_membership"] = sg.assign_subgroups(dataset_stats)
    else:
        an.notes.append("Subgroup views skipped: no dataset has statistics (--dataset-stats CSV).")
    return an


# ---------------------------------------------------------------------------------------------
# Writing

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1b1f24;background:#fafbfc}
header{background:#0d1b2a;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c9d4e0;font-size:13px}nav{padding:6px 24px;background:#e8eef5;font-size:13px}
nav a{margin-right:14px;color:#0b4f9c;text-decoration:none}main{padding:8px 24px 40px}
h2{border-bottom:2px solid #d0d7de;padding-bottom:4px;margin-top:34px}h3{margin-top:22px}
table{border-collapse:collapse;font-size:12px;background:#fff;margin:8px 0}
th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#f0f3f6;cursor:pointer;position:sticky;top:0}td.l,th.l{text-align:left}
tr.gfm td.l{color:#b3203a;font-weight:600}tr.default td.l{color:#57606a}
.imp{color:#b35900}.note{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;font-size:13px}
figure{display:inline-block;margin:10px 12px 10px 0;vertical-align:top;background:#fff;border:1px solid #d0d7de;padding:6px}
figcaption{font-size:12px;color:#57606a;max-width:760px}figure img{max-width:760px;height:auto;display:block}
.small{font-size:12px;color:#57606a}.wrap{overflow-x:auto}
"""

_JS = """
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
    var b=t.tBodies[0],rows=Array.from(b.rows),asc=th.dataset.asc!=='1';th.dataset.asc=asc?'1':'0';
    rows.sort(function(x,y){var a=x.cells[i].dataset.v||x.cells[i].textContent,c=y.cells[i].dataset.v||y.cells[i].textContent;
      var na=parseFloat(a),nc=parseFloat(c);if(!isNaN(na)&&!isNaN(nc))return asc?na-nc:nc-na;return asc?a.localeCompare(c):c.localeCompare(a)});
    rows.forEach(function(r){b.appendChild(r)})})})});
document.querySelectorAll('img').forEach(function(img){
  function mark(){img.setAttribute('data-loaded', img.naturalWidth>0?'1':'0')}
  if(img.complete){mark()}else{img.addEventListener('load',mark);img.addEventListener('error',mark)}});
"""


def _write_table(df: pd.DataFrame, base: Path, index: bool = False) -> None:
    base.parent.mkdir(parents=True, exist_ok=True)
    d = df.reset_index() if index else df
    d.to_csv(base.with_suffix(".csv"), index=False)
    d2 = d.copy()
    for c in d2.columns:
        if d2[c].dtype == object:
            d2[c] = d2[c].astype(str)
    d2.columns = [str(c) for c in d2.columns]
    d2.to_parquet(base.with_suffix(".parquet"), index=False)


def _fmt(v, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else ""
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{v:.{digits}f}"
    return html.escape(str(v))


def _html_table(df: pd.DataFrame, cols: list[tuple[str, str, int]], row_class=None, table_id: str = "") -> str:
    head = "".join(f'<th class="{"l" if d < 0 else ""}">{html.escape(h)}</th>' for _, h, d in cols)
    body = []
    for _, r in df.iterrows():
        cls = row_class(r) if row_class else ""
        cells = []
        for c, _h, d in cols:
            v = r[c]
            sv = "" if v is None or (isinstance(v, float) and not np.isfinite(v)) else str(v)
            cells.append(f'<td class="{"l" if d < 0 else ""}" data-v="{html.escape(sv)}">{_fmt(v, max(d, 0))}</td>')
        body.append(f'<tr class="{cls}">{"".join(cells)}</tr>')
    tid = f' id="{table_id}"' if table_id else ""
    return f'<div class="wrap"><table class="sortable"{tid}><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


def _figure(rel: str, caption: str) -> str:
    stem = rel.rsplit(".", 1)[0]
    return (f'<figure><img src="{rel}" alt="{html.escape(caption)}" loading="eager"><figcaption>{html.escape(caption)} '
            f'Data: <a href="{stem}.csv">CSV</a> · <a href="{stem}.parquet">Parquet</a></figcaption></figure>')


def _page(title: str, body: str, subtitle: str) -> str:
    nav = ('<nav><a href="index.html">Leaderboard</a><a href="findings.html">Findings</a><a href="index.html#pareto">Pareto</a>'
           '<a href="index.html#budgets">Tuning budgets</a><a href="index.html#tuning">Tuning requirements</a>'
           '<a href="index.html#metrics">Task types and metrics</a><a href="index.html#subgroups">Subgroups</a>'
           '<a href="index.html#robustness">Robustness</a><a href="index.html#overlap">Pretraining overlap</a>'
           '<a href="datasets.html">Per dataset</a><a href="tables.html">Data files</a></nav>')
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<style>{_CSS}</style></head><body><header><h1>{html.escape(title)}</h1><p>{html.escape(subtitle)}</p>'
            f'</header>{nav}<main>{body}</main><script>{_JS}</script></body></html>')


LEADERBOARD_COLUMNS = [
    ("rank", "#", 0), ("view", "Method", -1), ("kind", "Kind", -1), ("elo", "Elo", 0), ("lower", "Elo 2.5%", 0),
    ("upper", "Elo 97.5%", 0), ("mean_rank", "Mean rank", 2), ("rank_iqr", "Rank IQR", 1),
    ("mean_winrate", "Win rate", 3), ("sig_wins", "Sig. wins", 0), ("sig_losses", "Sig. losses", 0),
    ("mean_improvability", "Mean Improvability", 3), ("overhead_time", "Overhead (time)", 2),
    ("overhead_memory", "Overhead (memory)", 2), ("native_datasets", "Native datasets", 0),
    ("imputed_datasets", "Imputed datasets", 0), ("missing_datasets", "Missing", 0),
]


def _findings_body(findings: pd.DataFrame) -> str:
    """The findings page: each computed sentence, linked to the figure it comes from."""
    parts = ['<p class="small">Every sentence below is computed from this store\'s tables; the link opens the '
             'figure it comes from. Data: <a href="tables/findings.csv">findings.csv</a>.</p>']
    for regime, g in findings.groupby("regime", sort=True):
        parts.append(f"<h2>{html.escape(regime or 'All regimes')}</h2><ul id=\"findings-{slug(regime or 'all')}\">")
        for r in g.itertuples():
            parts.append(f'<li data-topic="{html.escape(r.topic)}">{html.escape(r.sentence)} '
                         f'<a href="{html.escape(r.figure)}">[figure]</a></li>')
        parts.append("</ul>")
    return "\n".join(parts)


def _appendix_sections(an: Analysis, fig_dir: Path, figures: list[Path]) -> list[str]:
    """Tuning requirements, task-type and metric views, pretraining overlap: figure, table and data each."""
    from orchestrator.analysis import plots

    T = an.tables

    def emit(stem: str, regime: str, data: pd.DataFrame, draw, caption: str, index: bool = False) -> str:
        rel = figure_path(stem, regime)
        draw(fig_dir.parent / rel)
        _write_table(data, (fig_dir.parent / rel).with_suffix(""), index=index)
        figures.append(fig_dir.parent / rel)
        return _figure(rel, caption)

    tuning, metrics, overlap = [], [], []
    for regime in an.regimes:
        at = lambda name: T[name][T[name]["regime"] == regime]  # noqa: E731
        curves, req, gap = at("tuning_curves"), at("tuning_requirements"), at("validation_test_gap")
        if len(curves):
            tuning.append(f"<h3>{html.escape(regime)}</h3>")
            tuning.append(emit("tuning", regime, curves, lambda p: plots.lines(
                curves, p, f"Test gap to the full search against budget k — {regime}", "k", "gap_to_full", "method",
                "tuning budget k (last point: the full search)", "full search minus budget k (points)", hline=1.0),
                "Mean test-score gap (points) between budget k and the full search; dashed: one point."))
            tuning.append(emit("validation_test_gap", regime, gap, lambda p: plots.lines(
                gap, p, f"Validation gain minus test gain of tuning — {regime}", "k", "overstatement", "method",
                "tuning budget k (last point: the full search)", "validation gain - test gain (points)", hline=0.0),
                "How much of tuning's validation improvement over the default fails to show up on test (points)."))
            tuning.append(_html_table(req, [("method", "method", -1), ("datasets", "datasets", 0),
                                            ("search_trials", "trials", 0), ("default_score", "default", 4),
                                            ("tuned_score", "tuned", 4), ("tuning_gain", "gain (points)", 2),
                                            ("k_within_1pt", "k within 1 point", 0),
                                            ("gain_k50_to_full", "gain k=50 to full", 2)], table_id=f"tuning-{slug(regime)}"))
        tt, ms, summ = at("task_type_leaderboards"), at("metric_sensitivity"), at("metric_sensitivity_summary")
        if len(tt):
            metrics.append(f"<h3>{html.escape(regime)}</h3>")
            kinds = T["leaderboard"].drop_duplicates("view").set_index("view")["variant"]
            tt = tt.assign(variant=tt["view"].map(kinds), panel=tt["task_type"] + " (" + tt["metric"] + ")")
            metrics.append(emit("task_types", regime, tt, lambda p: plots.elo_panels(
                tt, p, f"Elo by task type — {regime}", "panel"), "Elo on binary tasks (AUROC) and multiclass tasks (accuracy) separately."))
        if len(ms):
            mat = ms.assign(col=ms["task_type"] + ": " + ms["metric"]).pivot_table(index="view", columns="col", values="position")
            order = T["leaderboard"].loc[T["leaderboard"]["regime"] == regime, "view"]
            mat = mat.loc[[v for v in order if v in mat.index]]
            metrics.append(emit("metric_sensitivity", regime, mat, lambda p: plots.heatmap(
                mat, p, f"Elo position on each metric — {regime}", "position (1 = best)", fmt="{:.0f}", reverse=True),
                "Each method's Elo position per task type and metric (the first metric of a task type is its primary).", index=True))
            metrics.append(_html_table(summ, [("task_type", "task type", -1), ("metric", "metric", -1), ("views", "methods", 0),
                                              ("datasets", "datasets", 0), ("spearman", "Spearman vs primary", 3),
                                              ("kendall", "Kendall vs primary", 3), ("changed_positions", "positions changed", 0),
                                              ("largest_move_view", "largest move", -1), ("largest_move", "by", 0)],
                                       table_id=f"metric-sensitivity-{slug(regime)}"))
        ov = at("pretraining_overlap")
        if len(ov):
            d = ov.groupby(["view", "dataset"], as_index=False)[["omitted_score", "replacement_score"]].mean()
            d["label"] = d["view"] + " on " + d["dataset"]
            overlap.append(f"<h3>{html.escape(regime)}</h3>")
            overlap.append(emit("pretraining_overlap", regime, ov, lambda p: plots.paired_bars(
                d, p, f"Omitted for pretraining overlap — {regime}", "label", "omitted_score", "replacement_score",
                "omitted GFM result", "gcn-Default replacement"), "Each omitted GFM result beside the gcn-Default result that replaced it (mean over partitions)."))
            overlap.append(_html_table(ov, [("view", "method", -1), ("dataset", "dataset", -1), ("split", "split", 0),
                                            ("omitted_score", "omitted score", 4), ("replacement_score", "replacement", 4)],
                                       table_id=f"overlap-{slug(regime)}"))
    out = ['<h2 id="tuning">Tuning requirements</h2><p class="small">Per supervised method: the test gain of the full '
           'search over the default configuration, the smallest budget k whose selection comes within one point of '
           'the full search on average, the gain from k = 50 to the full search (blank: searches of 50 trials or '
           'fewer), and how much of the validation improvement shows up on test. Points = x100 on the primary metric.</p>']
    out += tuning or ['<p class="small">No supervised method has a search to analyse.</p>']
    out.append('<h2 id="metrics">Task types and metric sensitivity</h2><p class="small">The leaderboard on binary '
               'tasks (AUROC) and multiclass tasks (accuracy) separately, and recomputed on each secondary metric '
               '(multiclass: accuracy, macro-F1, cross-entropy; binary: accuracy, positive-class precision, binary '
               'cross-entropy) with its agreement with the primary ordering.</p>')
    out += metrics
    out.append('<h2 id="overlap">Pretraining overlap</h2><p class="small">A GFM result on a graph its pretraining used '
               '(declared in its family manifest, matched by canonical graph identity) is omitted from the '
               'common-universe analyses and replaced by the matched gcn-Default result.</p>')
    out += overlap or ['<p class="small">No GFM result overlaps its pretraining graphs.</p>']
    return out


def write_report(an: Analysis, out: Path, title: str = "NodeGround leaderboard") -> list[Path]:
    """Write tables, figures and pages under ``out``; returns the figure paths."""
    from orchestrator.analysis import plots

    out.mkdir(parents=True, exist_ok=True)
    fig_dir, tab_dir = out / "figures", out / "tables"
    fig_dir.mkdir(exist_ok=True)
    tab_dir.mkdir(exist_ok=True)
    for name, df in an.tables.items():
        index = name.startswith(("winrate_", "nemenyi_"))
        _write_table(df, tab_dir / name, index=index)
    figures: list[Path] = []

    T = an.tables
    n_trials = int(T["workflow_costs"].loc[T["workflow_costs"]["budget"] == FULL, "n_trials"].sum())
    sub = (f"{n_trials:,} trials · {T['results']['dataset'].nunique()} datasets · "
           f"{T['results']['view'].nunique()} compared methods · regimes {', '.join(an.regimes)}")
    body = []
    for note in an.notes:
        body.append(f'<p class="note">{html.escape(note)}</p>')
    anchored = f"anchored at {html.escape(an.anchor)} = 1000" if an.anchor else "centred on 1000 (no reference result)"
    body.append('<p class="small">Elo: partition-level battles on the primary metric (accuracy, or AUROC for binary '
                f'tasks), ties half, each partition weighted 1/5, 200 dataset-bootstrap resamples, {anchored}. '
                f'Missing built-in results are imputed with the matched {html.escape(str(an.reference))} result and counted '
                'under "Imputed datasets"; user submissions are never imputed. '
                'Mean Overhead: mean over datasets of log2(cost / cheapest method on that dataset).</p>')
    pareto_html, budget_html, sub_html, rob_html = [], [], [], []
    for regime in an.regimes:
        s = slug(regime)
        lb = T["leaderboard"][T["leaderboard"]["regime"] == regime]
        body.append(f'<h2 id="lb-{s}">Leaderboard — {html.escape(regime)}</h2>')
        body.append(_html_table(lb, LEADERBOARD_COLUMNS, row_class=lambda r: str(r["variant"]), table_id=f"leaderboard-{s}"))
        p = fig_dir / f"elo_{s}.png"
        plots.elo_bars(lb, p, f"Elo with 95% intervals — {regime}")
        _write_table(lb, fig_dir / f"elo_{s}")
        figures.append(p)
        mr = lb[["view", "mean_rank", "rank_q25", "rank_q75"]]
        p = fig_dir / f"mean_rank_{s}.png"
        plots.rank_iqr(mr, p, f"Mean rank and IQR across datasets — {regime}")
        _write_table(mr, fig_dir / f"mean_rank_{s}")
        figures.append(p)
        body.append(_figure(f"figures/elo_{s}.png", f"Elo ratings, {regime}.") + _figure(f"figures/mean_rank_{s}.png", f"Mean rank, {regime}."))

        pareto_html.append(f"<h3>{html.escape(regime)}</h3>")
        for name, label in (("time", "workflow time"), ("memory", "workflow peak memory")):
            for suffix, extra in (("", "default, tuned and GFM endpoints"), ("_budgets", "with intermediate tuning budgets k")):
                d = T[f"pareto_{name}{suffix}"]
                d = d[d["regime"] == regime]
                stem = f"pareto_{name}{suffix}_{s}"
                traj = None
                if suffix:
                    traj = d[d["variant"].isin(["budget", "default", "tuned"])].copy()
                    traj["k"] = traj["k"].fillna(traj["variant"].map({"default": 1, "tuned": 10**6}))
                plots.pareto(d, fig_dir / f"{stem}.png", f"{label.capitalize()} Pareto frontier — {regime} ({extra})",
                             f"Mean Overhead, {label} (log2 of cost over cheapest; lower is better)", trajectories=traj)
                _write_table(d, fig_dir / stem)
                figures.append(fig_dir / f"{stem}.png")
                front = ", ".join(d.loc[d["on_front"], "view"].astype(str))
                pareto_html.append(_figure(f"figures/{stem}.png", f"{label.capitalize()}, {extra}. Frontier: {front}."))
        traj = T["budget_trajectories"]
        traj = traj[traj["regime"] == regime]
        stem = f"budget_trajectories_{s}"
        plots.budget_curves(traj.assign(k=traj["k"].where(traj["budget"] != FULL, traj["k"] * 1.3)),
                            fig_dir / f"{stem}.png", f"Tuning-budget trajectories — {regime}")
        _write_table(traj, fig_dir / stem)
        figures.append(fig_dir / f"{stem}.png")
        budget_html.append(_figure(f"figures/{stem}.png", f"Improvability and interpolated overhead against budget, {regime}."))

        wm = T[f"winrate_{s}"]
        stem = f"winrate_{s}"
        plots.heatmap(wm, fig_dir / f"{stem}.png", f"Pairwise win rate (row beats column) — {regime}", "win rate", cmap="RdBu")
        _write_table(wm, fig_dir / stem, index=True)
        figures.append(fig_dir / f"{stem}.png")
        ce = T["cohort_elo"]
        ce = ce[ce["regime"] == regime]
        stem = f"cohort_elo_{s}"
        plots.cohort_elo(ce, fig_dir / f"{stem}.png", f"Elo by analysis cohort — {regime}")
        _write_table(ce, fig_dir / stem)
        figures.append(fig_dir / f"{stem}.png")
        rs = T["rule_sensitivity"]
        rs = rs[rs["regime"] == regime].drop(columns=["regime"])
        ncoh = ce.groupby("cohort")["cohort_datasets"].first().to_dict()
        rob_html.append(f"<h3>{html.escape(regime)}</h3>")
        rob_html.append(_figure(f"figures/winrate_{s}.png", f"Win rates, {regime}.")
                        + _figure(f"figures/{stem}.png", "Cohorts: " + "; ".join(
                            f"{k} ({co.COHORT_TITLES.get(k, k)}, {v} datasets)" for k, v in ncoh.items()) + "."))
        rob_html.append("<p>Aggregation-rule sensitivity (Spearman correlation between rankings):</p>")
        rob_html.append(_html_table(rs, [("rule", "rule", -1)] + [(c, c, 3) for c in rs.columns if c != "rule"]))
        pt = T["pairwise_tests"]
        pt = pt[(pt["regime"] == regime) & pt["significant"]]
        rob_html.append(f'<p class="small">{len(pt)} significant pairs after Holm correction (Wilcoxon signed-rank on '
                        f'per-dataset means); full table: <a href="tables/pairwise_tests.csv">pairwise_tests.csv</a>.</p>')

        if "subgroup_ranks" in T:
            sr = T["subgroup_ranks"]
            sr = sr[sr["regime"] == regime]
            mat = sr.pivot_table(index="view", columns="subgroup", values="mean_rank")
            order = [x.name for x in sg.SUBGROUPS if x.name in mat.columns]
            mat = mat[order]
            ndat = sr.groupby("subgroup")["datasets"].max()
            mat.columns = [f"{c} (n={ndat.get(c, 0)})" for c in mat.columns]
            mat = mat.loc[lb["view"][lb["view"].isin(mat.index)]]
            stem = f"subgroups_{s}"
            plots.heatmap(mat, fig_dir / f"{stem}.png", f"Mean rank within each dataset subgroup — {regime}",
                          "mean rank (lower is better)", fmt="{:.1f}", reverse=True)
            _write_table(mat, fig_dir / stem, index=True)
            figures.append(fig_dir / f"{stem}.png")
            sub_html.append(_figure(f"figures/{stem}.png", f"Subgroups, {regime}: rows ordered by Elo."))

    body.append('<h2 id="pareto">Performance–cost Pareto frontiers</h2>')
    body.extend(pareto_html)
    body.append('<h2 id="budgets">Tuning budgets</h2><p class="small">Budget k selects among the first k trials by '
                'validation loss only; its cost is interpolated linearly between the measured default (k=1) and '
                'full-search costs (measured cumulative costs are in the CSV as mean_overhead_measured).</p>')
    body.extend(budget_html)
    body.append('<h2 id="subgroups">Dataset subgroups</h2>')
    if sub_html:
        bt = T["subgroup_boundaries"]
        body.extend(sub_html)
        body.append(_html_table(bt, [("property", "property", -1), ("name", "subgroup", -1), ("low", "from", 3), ("high", "below", 3)]))
    else:
        body.append('<p class="note">Subgroup views skipped: no dataset has statistics (--dataset-stats CSV).</p>')
    body.extend(_appendix_sections(an, fig_dir, figures))
    body.append('<h2 id="robustness">Robustness: cohorts, win rates, significance</h2>')
    body.extend(rob_html)
    cov = T["coverage"]
    body.append('<h2 id="coverage">Coverage</h2>')
    body.append(_html_table(cov, [("regime", "regime", -1), ("view", "method", -1), ("origin", "origin", -1),
                                  ("native_datasets", "native", 0), ("imputed_datasets", "imputed", 0),
                                  ("missing_datasets", "missing", 0), ("native_fraction", "native share", 2)]))
    bc = T["below_chance"]
    body.append('<h2 id="below-chance">Results below chance</h2>')
    if bc.empty:
        body.append('<p class="small">No selected binary result scores a test AUROC below 0.5.</p>')
    else:
        body.append(f'<p class="note">{len(bc)} selected binary result(s) score a test AUROC below 0.5, worse than '
                    'a constant predictor: an untrained or inverted head was probably kept. Data: '
                    '<a href="tables/below_chance.csv">below_chance.csv</a>.</p>')
        body.append(_html_table(bc, [("regime", "regime", -1), ("view", "method", -1), ("dataset", "dataset", -1),
                                     ("split", "split", 0), ("selected_trial_index", "selected trial", 0),
                                     ("val_loss", "val loss", 4), ("test_auroc", "test AUROC", 4)],
                                table_id="below-chance"))
    (out / "index.html").write_text(_page(title, "\n".join(body), sub), encoding="utf-8")

    # Per-dataset page.
    dbody = []
    for regime in an.regimes:
        pdf = T["per_dataset"]
        pdf = pdf[pdf["regime"] == regime]
        leaders = T["dataset_leaders"]
        leaders = leaders[leaders["regime"] == regime]
        dbody.append(f"<h2>{html.escape(regime)}</h2><h3>Dataset leaders (tuned or canonical configurations)</h3>")
        counts = leaders["leader"].value_counts()
        dbody.append("<p>" + ", ".join(f"{html.escape(k)}: {v}" for k, v in counts.items()) + "</p>")
        dbody.append(_html_table(leaders, [("dataset", "dataset", -1), ("leader", "leader", -1), ("leader_kind", "kind", -1), ("score", "score", 4)]))
        wide = pdf.pivot_table(index="dataset", columns="view", values="score_mean")
        imp = pdf.pivot_table(index="dataset", columns="view", values="imputed", aggfunc="any")
        order = [v for v in T["leaderboard"].loc[T["leaderboard"]["regime"] == regime, "view"] if v in wide.columns]
        wide, imp = wide[order], imp.reindex(columns=order)
        dbody.append(f"<h3>Mean primary metric over partitions (* imputed with {html.escape(str(an.reference))})</h3>")
        head = '<th class="l">dataset</th>' + "".join(f"<th>{html.escape(v)}</th>" for v in order)
        rows = []
        for ds, r in wide.iterrows():
            best = r.max()
            cells = []
            for v in order:
                x = r[v]
                if not np.isfinite(x):
                    cells.append("<td></td>")
                    continue
                star = '<span class="imp">*</span>' if bool(imp.loc[ds, v]) else ""
                txt = f"<b>{x:.4f}</b>" if x == best else f"{x:.4f}"
                cells.append(f'<td data-v="{x}">{txt}{star}</td>')
            rows.append(f'<tr><td class="l">{html.escape(str(ds))}</td>{"".join(cells)}</tr>')
        dbody.append(f'<div class="wrap"><table class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')
    (out / "datasets.html").write_text(_page(title + " — per dataset", "\n".join(dbody), sub), encoding="utf-8")
    (out / "findings.html").write_text(_page(title + " — findings", _findings_body(T["findings"]), sub), encoding="utf-8")

    # Data file index.
    items = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.suffix in (".csv", ".parquet"))
    lis = "".join(f'<li><a href="{html.escape(i)}">{html.escape(i)}</a></li>' for i in items)
    (out / "tables.html").write_text(_page(title + " — data files", f"<ul>{lis}</ul>", sub), encoding="utf-8")
    (out / "manifest.json").write_text(json.dumps({"figures": [p.relative_to(out).as_posix() for p in figures],
                                                   "timings_s": an.timings, "notes": an.notes}, indent=1))
    return figures


def build_report(trials: pd.DataFrame, out: Path, dataset_stats: pd.DataFrame | None = None,
                 anchor: str | None = None, rounds: int = elo_mod.BOOTSTRAP_ROUNDS,
                 near_complete_min: float = 0.9, title: str = "NodeGround leaderboard",
                 compute_stats: bool = True) -> Analysis:
    an = compute_analysis(trials, dataset_stats, anchor=anchor, rounds=rounds, near_complete_min=near_complete_min,
                          compute_stats=compute_stats)
    t = time.perf_counter()
    write_report(an, Path(out), title=title)
    an.timings["write_report"] = round(time.perf_counter() - t, 3)
    return an
