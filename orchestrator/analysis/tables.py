"""Every table of the report, computed from the one long trials table: no drawing, no HTML.

``compute_analysis`` returns the report's tables keyed by name (the site writes each under
``tables/``). The figure-data functions below derive, for one regime, the table a figure plots
(the site writes it beside the figure). Selection is ``workflow.workflow_costs``'s, nothing else's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

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
from orchestrator.analysis.views import (
    AUDIT_COLUMNS,
    REFERENCE_METHOD,
    below_chance,
    build_results,
    prepare,
    reference_view,
)
from orchestrator.trial_table.load import AnalysisInputError
from orchestrator.trial_table.selection import FULL, workflow_costs

Tables = dict[str, pd.DataFrame]


def slug(regime: str) -> str:
    """A regime as it appears in file names and page anchors (``10/10/80`` -> ``10-10-80``)."""
    return regime.replace("/", "-")


def figure_path(stem: str, regime: str) -> str:
    """Where a per-regime figure lives in the site (relative to its pages); the findings link to it."""
    return f"figures/{stem}_{slug(regime)}.png"


@dataclass
class Analysis:
    """Every table of the report, keyed by name; ``regimes`` in display order; ``notes`` for the page."""

    tables: Tables = field(default_factory=dict)
    regimes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    anchor: str | None = None  # the view fixed at 1000 Elo
    reference: str | None = None  # the view whose results fill missing built-in ones (GCN-Default)

    def __post_init__(self) -> None:
        self._tick: float = time.perf_counter()

    def lap(self, name: str) -> None:
        """Record the seconds since the previous lap under ``name``."""
        now = time.perf_counter()
        self.timings[name] = round(now - self._tick, 3)
        self._tick = now


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
        an = Analysis()
        main, cohorts, budget_points, dataset_stats = _common_universe(
            an, trials, dataset_stats, anchor, near_complete_min, compute_stats
        )
        per_regime: dict[str, list[pd.DataFrame]] = {}
        for regime in an.regimes:
            long, matrices = _regime_tables(an, regime, main, cohorts, budget_points, dataset_stats, rounds)
            for name, df in long.items():
                per_regime.setdefault(name, []).append(df.assign(regime=regime))
            an.tables.update(matrices)
        _appendix_tables(an, main, budget_points, rounds)
        for name, frames in per_regime.items():
            df = pd.concat(frames, ignore_index=True)
            an.tables[name] = df[["regime"] + [c for c in df.columns if c != "regime"]]
        an.tables["findings"] = fi.findings(an.tables, an.regimes, figure_path)
        if dataset_stats is not None:
            an.tables["subgroup_boundaries"] = sg.subgroup_table()
            an.tables["subgroup_membership"] = sg.assign_subgroups(dataset_stats)
        else:
            an.notes.append("Subgroup views skipped: no dataset has statistics (--dataset-stats CSV).")
        return an


def _common_universe(
    an: Analysis,
    trials: pd.DataFrame,
    dataset_stats: pd.DataFrame | None,
    anchor_method: str | None,
    near_complete_min: float,
    compute_stats: bool,
) -> tuple[pd.DataFrame, dict[str, pd.DataFrame], pd.DataFrame, pd.DataFrame | None]:
    """Selection, dataset statistics, the overlap audit and the cohorts; sets regimes, anchor and notes.

    Returns (the imputed common universe, the cohorts, the budget points, the dataset statistics).
    """
    costs = workflow_costs(trials)
    an.lap("workflow_costs")
    results, budget_points = build_results(trials, costs=costs)
    an.lap("selection")
    if compute_stats:
        dataset_stats, no_stats = sg.store_dataset_stats(sorted(results["dataset"].unique()), dataset_stats)
        if no_stats:
            an.notes.append(
                f"No statistics for {len(no_stats)} dataset(s) ({', '.join(no_stats[:8])}"
                f"{', ...' if len(no_stats) > 8 else ''}): not loadable offline; they sit in no subgroup "
                "(give their statistics with --dataset-stats)."
            )
        an.lap("dataset_stats")
    an.tables["workflow_costs"] = costs
    # Pretraining overlaps leave the common universe before cohorts, so imputation replaces them.
    held_out, omitted = ov.audit(results)
    results, held_out, omitted = (
        df.drop(columns=AUDIT_COLUMNS, errors="ignore") for df in (results, held_out, omitted)
    )
    cohorts = co.cohorts(held_out, near_complete_min=near_complete_min)
    main, an.tables["pretraining_overlap"] = ov.mark_replacements(cohorts["all"], omitted)
    an.tables["pretraining_declarations"] = ov.declarations(list(results["method_name"].astype(str).unique()))
    cohorts["all"] = main
    if len(omitted):
        an.notes.append(
            f"{len(omitted)} GFM result(s) on a graph its pretraining used are omitted and replaced by "
            "the matched gcn-Default result: see 'Pretraining overlap'."
        )
    an.tables["cell_coverage"] = co.cell_coverage(prepare(trials))
    an.tables["results"] = main
    cc = an.tables["cell_coverage"]
    if not cc["selected_cells"].any():
        why = "; ".join(f"{m} in {r}: {w}" for r, m, w in cc[["regime", "method", "unselectable_statuses"]].values)
        an.notes.append(f"No cell holds a selectable result, so every table is empty ({why}).")
    elif main.empty:
        an.notes.append(
            "Every selectable result was omitted for pretraining overlap and no reference result could replace "
            "it, so every table is empty: see 'Pretraining overlap'."
        )
    an.tables["budget_points"] = budget_points
    an.tables["coverage"] = co.coverage(main)
    an.regimes = sorted(main["regime"].unique())
    an.anchor = reference_view(results, anchor_method or REFERENCE_METHOD)
    if an.anchor is None and anchor_method is not None:
        known = ", ".join(sorted(results["method_name"].unique()))
        raise AnalysisInputError(f"--anchor: no results for a method named {anchor_method!r} (methods: {known})")
    an.reference = reference_view(results)
    if an.anchor is None:
        an.notes.append(
            f"The reference method {REFERENCE_METHOD!r} has no default-configuration results: Elo "
            "ratings are centred on 1000."
        )
    if an.reference is None:
        an.notes.append(
            f"The reference method {REFERENCE_METHOD!r} has no default-configuration results, so "
            "nothing could be imputed."
        )
    an.tables["below_chance"] = below_chance(results)
    if len(an.tables["below_chance"]):
        an.notes.append(
            f"{len(an.tables['below_chance'])} selected binary result(s) score a test AUROC below 0.5 "
            "(worse than chance): see 'Results below chance'."
        )
    an.lap("cohorts")
    return main, cohorts, budget_points, dataset_stats


def _regime_tables(
    an: Analysis,
    regime: str,
    main: pd.DataFrame,
    cohorts: dict[str, pd.DataFrame],
    budget_points: pd.DataFrame,
    dataset_stats: pd.DataFrame | None,
    rounds: int,
) -> tuple[Tables, Tables]:
    """One regime's tables: (rows of the long tables, which gain a regime column; per-regime matrices)."""
    r_res = main[main["regime"] == regime]
    r_pts = budget_points[budget_points["regime"] == regime]
    cov = an.tables["coverage"]
    # Both Pareto views share one reference: the best error / cheapest cost of any evaluated point.
    best_err = pa.best_error_by_dataset(r_res, r_pts)
    refs = {cost: pa.cheapest_by_dataset(cost, r_res, r_pts) for cost in (pa.TIME, pa.MEMORY)}
    long, matrices, elo = _rankings(r_res, an.anchor, rounds, best_err, refs, cov[cov["regime"] == regime])
    native = r_res[~r_res["imputed"].astype(bool)]
    long["leaderboard_native"] = (
        _rankings(native, an.anchor, rounds, best_err, refs, cov[cov["regime"] == regime])[0]["leaderboard"]
        if len(native) < len(r_res)
        else long["leaderboard"]
    )
    an.lap(f"leaderboard {regime}")
    matrices = {f"{name}_{slug(regime)}": m for name, m in matrices.items()}
    cohort_elo = _cohort_elo(regime, cohorts, elo, an.anchor, rounds)
    if cohort_elo is not None:
        long["cohort_elo"] = cohort_elo
    long["rule_sensitivity"] = _rule_sensitivity(long["leaderboard"])
    an.lap(f"sensitivity {regime}")
    long.update(_pareto_tables(r_res, r_pts, best_err, refs))
    an.lap(f"pareto {regime}")
    long.update(_dataset_tables(r_res, dataset_stats))
    an.lap(f"datasets {regime}")
    return long, matrices


def _rankings(
    regime_res: pd.DataFrame,
    anchor: str | None,
    rounds: int,
    best_err: pd.Series,
    refs: dict[str, pd.Series],
    cov: pd.DataFrame,
) -> tuple[Tables, Tables, pd.DataFrame]:
    """(long tables, matrices, Elo): the leaderboard (Elo, ranks, win rates, significance, overheads,
    coverage) with the tests behind it, the win-rate and Nemenyi matrices, and the Elo table alone."""
    elo = elo_mod.elo_ratings(regime_res, anchor=anchor, rounds=rounds)
    mr = rk.mean_rank(regime_res)
    wm = rk.winrate_matrix(regime_res)
    tests = rk.pairwise_tests(regime_res)
    sig = rk.significant_record(tests)
    t_time = pa.tradeoff(regime_res, pa.TIME, best_err, refs[pa.TIME])
    t_mem = pa.tradeoff(regime_res, pa.MEMORY, best_err, refs[pa.MEMORY])
    ident = regime_res.drop_duplicates("view").set_index("view")[["kind", "variant", "origin"]]
    lb = elo.merge(mr.drop(columns=["datasets"]), on="view", how="left")
    lb = lb.merge(rk.mean_winrate(wm).rename_axis("view").reset_index(), on="view", how="left")
    lb = lb.merge(sig, on="view", how="left")
    lb = lb.merge(
        t_time[["view", "mean_improvability", "mean_overhead"]].rename(columns={"mean_overhead": "overhead_time"}),
        on="view",
        how="left",
    )
    lb = lb.merge(
        t_mem[["view", "mean_overhead"]].rename(columns={"mean_overhead": "overhead_memory"}), on="view", how="left"
    )
    lb = lb.merge(cov[["view", "native_datasets", "imputed_datasets", "missing_datasets"]], on="view", how="left")
    lb = lb.join(ident, on="view")
    lb.insert(0, "rank", np.arange(1, len(lb) + 1))
    stat, nem = rk.friedman_nemenyi(regime_res)
    long = {"leaderboard": lb, "pairwise_tests": tests, "friedman": pd.DataFrame([stat])}
    matrices = {"winrate": wm, **({"nemenyi": nem} if not nem.empty else {})}
    return long, matrices, elo


def _cohort_elo(
    regime: str, cohorts: dict[str, pd.DataFrame], elo_all: pd.DataFrame, anchor: str | None, rounds: int
) -> pd.DataFrame | None:
    """Elo within each analysis cohort that compares at least two views (cohort sensitivity); None if none does."""
    frames = []
    for cname, cres in cohorts.items():
        cr = cres[cres["regime"] == regime]
        if cr["view"].nunique() >= 2:
            e = elo_all.copy() if cname == "all" else elo_mod.elo_ratings(cr, anchor=anchor, rounds=rounds)
            e["cohort"] = cname
            e["cohort_datasets"] = cr["dataset"].nunique()
            frames.append(e)
    return pd.concat(frames, ignore_index=True) if frames else None


def _rule_sensitivity(leaderboard: pd.DataFrame) -> pd.DataFrame:
    """How the ranking moves with the aggregation rule (Spearman correlation between the rules' orders)."""
    lb = leaderboard.set_index("view")
    rules = {
        "elo": lb["elo"],
        "mean_rank": -lb["mean_rank"],
        "mean_winrate": lb["mean_winrate"],
        "mean_improvability": -lb["mean_improvability"],
    }
    return rk.rule_sensitivity(rules).reset_index()


def _pareto_tables(r_res: pd.DataFrame, r_pts: pd.DataFrame, best_err: pd.Series, refs: dict[str, pd.Series]) -> Tables:
    """Pareto endpoints, the same with intermediate budgets, and the budget trajectories."""
    out: Tables = {}
    inter = r_pts[~r_pts["view"].str.endswith("@" + FULL) & (r_pts["k"] > 1)]
    for cost, name in ((pa.TIME, "time"), (pa.MEMORY, "memory")):
        t = pa.tradeoff(r_res, cost, best_err, refs[cost])
        t = t.merge(r_res.drop_duplicates("view")[["view", "variant", "kind", "method"]], on="view")
        t["on_front"] = pa.pareto_front(t)
        out[f"pareto_{name}"] = t
        both = t.drop(columns=["on_front"]).assign(k=np.nan)  # k: the budget, on budget points only
        if len(inter):  # searches of one or two trials have no budget between the default and the full search
            tb = pa.tradeoff(inter, cost, best_err, refs[cost])
            tb = tb.merge(inter.drop_duplicates("view")[["view", "variant", "kind", "method", "k"]], on="view")
            both = pd.concat([both, tb], ignore_index=True)
        both["on_front"] = pa.pareto_front(both)
        out[f"pareto_{name}_budgets"] = both
    # Trajectories: k = 1 (default) ... 200, then the full search.
    if r_pts.empty:  # no supervised method has a result in this regime
        cols = ["view", "mean_improvability", "mean_overhead", "datasets", "method", "k", "mean_overhead_measured"]
        out["budget_trajectories"] = pd.DataFrame(columns=[*cols, "mean_score", "budget"])
        return out
    traj = pa.tradeoff(r_pts, pa.TIME, best_err, refs[pa.TIME])
    traj = traj.merge(r_pts.drop_duplicates("view")[["view", "method", "k"]], on="view")
    measured = pa.tradeoff(r_pts.assign(workflow_s=r_pts["workflow_s_measured"]), pa.TIME, best_err, refs[pa.TIME])
    traj = traj.merge(
        measured[["view", "mean_overhead"]].rename(columns={"mean_overhead": "mean_overhead_measured"}), on="view"
    )
    traj = traj.join(r_pts.groupby("view")["score"].mean().rename("mean_score"), on="view")
    traj["budget"] = np.where(traj["view"].str.endswith("@" + FULL), FULL, traj["k"].astype(str))
    out["budget_trajectories"] = traj.sort_values(["method", "k"])
    return out


def _dataset_tables(r_res: pd.DataFrame, dataset_stats: pd.DataFrame | None) -> Tables:
    """Dataset-level leaders (tuned or canonical configurations), per-dataset scores, subgroup ranks."""
    wide = rk.dataset_scores(r_res)
    # Tuned or canonical: a default configuration competes only for a method compared as its default alone
    # (every search of one trial, so no tuned view).
    tuned = set(r_res.loc[r_res["variant"] == "tuned", "method"])
    ident = r_res.drop_duplicates("view").set_index("view")
    cand = wide[[v for v in wide.columns if ident.at[v, "variant"] != "default" or ident.at[v, "method"] not in tuned]]
    cand = cand.dropna(how="all")
    leaders = pd.DataFrame(
        {
            "dataset": cand.index,
            "leader": cand.idxmax(axis=1).to_numpy() if len(cand.columns) else [],
            "score": cand.max(axis=1).to_numpy(),
        }
    )
    kinds = r_res.drop_duplicates("view").set_index("view")["kind"]
    leaders["leader_kind"] = leaders["leader"].map(kinds)
    per_ds = (
        r_res.groupby(["dataset", "view"])
        .agg(
            score_mean=("score", "mean"),
            score_std=("score", "std"),
            partitions=("split", "nunique"),
            imputed=("imputed", "any"),
            workflow_s=("workflow_s", "mean"),
            task_type=("task_type", "first"),
        )
        .reset_index()
    )
    out = {"dataset_leaders": leaders, "per_dataset": per_ds}
    if dataset_stats is not None:
        out["subgroup_ranks"] = sg.subgroup_ranks(r_res, dataset_stats)
    return out


def _appendix_tables(an: Analysis, main: pd.DataFrame, budget_points: pd.DataFrame, rounds: int) -> None:
    """The paper's appendix views, over the common universe (``main``) and the budget points."""
    an.tables["metric_sensitivity"], an.tables["metric_sensitivity_summary"] = se.metric_sensitivity(
        main, anchor=an.anchor, rounds=rounds
    )
    an.tables["task_type_leaderboards"] = se.primary_boards(an.tables["metric_sensitivity"])
    an.lap("metric and task-type views")
    an.tables["tuning_requirements"], an.tables["tuning_curves"] = tu.tuning_requirements(budget_points)
    an.tables["validation_test_gap"] = tu.validation_test_gap(budget_points)
    an.lap("tuning")


# ---------------------------------------------------------------------------------------------
# Per-regime views of the tables: what each figure and page table shows.


def regime_rows(tables: Tables, name: str, regime: str) -> pd.DataFrame:
    """The rows of long table ``name`` that belong to ``regime`` (none when no regime produced the table)."""
    if name not in tables:
        return pd.DataFrame(columns=["regime"])
    t = tables[name]
    return t[t["regime"] == regime]


def leaderboard_order(tables: Tables, regime: str) -> pd.Series:
    """The regime's views in leaderboard (Elo) order."""
    return regime_rows(tables, "leaderboard", regime)["view"]


def mean_rank(tables: Tables, regime: str) -> pd.DataFrame:
    """Mean rank and its interquartile range per view."""
    return regime_rows(tables, "leaderboard", regime)[["view", "mean_rank", "rank_q25", "rank_q75"]]


def winrate(tables: Tables, regime: str) -> pd.DataFrame:
    """The pairwise win-rate matrix (row beats column)."""
    return tables[f"winrate_{slug(regime)}"]


def subgroup_matrix(tables: Tables, regime: str) -> pd.DataFrame:
    """Mean rank per view (rows, leaderboard order) within each subgroup (columns, with dataset counts).

    Empty when the report has no dataset statistics.
    """
    if "subgroup_ranks" not in tables:
        return pd.DataFrame()
    sr = regime_rows(tables, "subgroup_ranks", regime)
    mat = sr.pivot_table(index="view", columns="subgroup", values="mean_rank")
    mat = mat[[x.name for x in sg.SUBGROUPS if x.name in mat.columns]]
    ndat = sr.groupby("subgroup")["datasets"].max()
    mat.columns = [f"{c} (n={ndat.get(c, 0)})" for c in mat.columns]
    order = leaderboard_order(tables, regime)
    return mat.loc[order[order.isin(mat.index)]]


def task_type_panels(tables: Tables, regime: str) -> pd.DataFrame:
    """The task-type leaderboards with each view's variant and a panel label (task type and metric)."""
    tt = regime_rows(tables, "task_type_leaderboards", regime)
    variants = tables["leaderboard"].drop_duplicates("view").set_index("view")["variant"]
    return tt.assign(variant=tt["view"].map(variants), panel=tt["task_type"] + " (" + tt["metric"] + ")")


def metric_positions(tables: Tables, regime: str) -> pd.DataFrame:
    """Each view's Elo position (rows, leaderboard order) per task type and metric (columns)."""
    ms = regime_rows(tables, "metric_sensitivity", regime)
    if ms.empty:
        return pd.DataFrame()
    mat = ms.assign(col=ms["task_type"] + ": " + ms["metric"]).pivot_table(
        index="view", columns="col", values="position"
    )
    return mat.loc[[v for v in leaderboard_order(tables, regime) if v in mat.index]]


def dataset_scores(tables: Tables, regime: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(mean primary metric, imputed flag): one row per dataset, one column per view in leaderboard order."""
    pdf = regime_rows(tables, "per_dataset", regime)
    wide = pdf.pivot_table(index="dataset", columns="view", values="score_mean")
    imp = pdf.pivot_table(index="dataset", columns="view", values="imputed", aggfunc="any")
    order = [v for v in leaderboard_order(tables, regime) if v in wide.columns]
    return wide[order], imp.reindex(columns=order)


def totals(tables: Tables) -> dict[str, int]:
    """Executed trials, datasets and compared views of the whole report."""
    costs = tables["workflow_costs"]
    return {
        "trials": int(costs.loc[costs["budget"] == FULL, "n_trials"].sum()),
        "datasets": tables["results"]["dataset"].nunique(),
        "views": tables["results"]["view"].nunique(),
    }
