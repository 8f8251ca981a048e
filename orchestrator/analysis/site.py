"""Write the static report: tables (CSV + Parquet), figures (PNG + their data) and HTML pages.

The site only renders. Every table comes from ``tables.compute_analysis``; the index page is the
list ``SECTIONS``, each with its figures (``Figure``: the data, the plot function, the title and
the caption) and its HTML tables, and one loop walks it. ``build_report`` is the whole pipeline.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from orchestrator.analysis import cohorts as co
from orchestrator.analysis import elo as elo_mod
from orchestrator.analysis import plots
from orchestrator.analysis import tables as tb
from orchestrator.analysis.pages import Html, figure, html_table, join, markup, page, write_table
from orchestrator.analysis.tables import Analysis, Tables, compute_analysis, figure_path, regime_rows, slug

#: A regime's HTML around its figures: a function of the analysis and the regime.
RegimeHtml = Callable[[Analysis, str], list[str]]


@dataclass(frozen=True)
class Figure:
    """One figure per regime: ``figures/<stem>_<regime>.png`` with the data it plots beside it."""

    stem: str
    data: str | Callable[[Tables, str], pd.DataFrame]  # a long table's name, or a function of ``tables``
    draw: Callable[[pd.DataFrame, Path, str], object]  # a ``plots`` function: (data, path, title)
    title: str  # "{regime}" is filled in
    caption: str | Callable[[pd.DataFrame, str], str]  # text ("{regime}" filled in), or a function of (data, regime)
    index: bool = False  # the data's index is a column (matrices)
    optional: bool = False  # skipped where its data is empty


@dataclass(frozen=True)
class Section:
    """A section of the index page: per regime, HTML ``before``, the figures, HTML ``after``; then ``footer``."""

    id: str
    title: str
    figures: tuple[Figure, ...] = ()
    intro: str = ""  # HTML under the heading
    before: RegimeHtml | None = None
    after: RegimeHtml | None = None
    footer: Callable[[Analysis], list[str]] | None = None
    empty: str = ""  # HTML when nothing else is shown
    per_regime_heading: bool = False  # each regime opens its own "<title> — <regime>" heading, no section heading
    fold: bool = True  # closed until the reader opens it (a link to it opens it), so the page reads at a glance


LEADERBOARD_COLUMNS = [
    ("rank", "#", 0),
    ("view", "Method", -1),
    ("kind", "Kind", -1),
    ("elo", "Elo", 0),
    ("interval", "95% interval", -1),
    ("mean_rank", "Mean rank", 2),
    ("rank_iqr", "Rank IQR", 1),
    ("mean_winrate", "Win rate", 3),
    ("sig_wins", "Sig. wins", 0),
    ("sig_losses", "Sig. losses", 0),
    ("mean_improvability", "Improvability", 3),
    ("overhead_time", "Overhead time", 2),
    ("overhead_memory", "Overhead memory", 2),
    ("native_datasets", "Native", 0),
    ("imputed_datasets", "Imputed", 0),
    ("missing_datasets", "Missing", 0),
]
#: Shown when the reader asks for every column; the rest fit a 1,400-pixel window.
LEADERBOARD_SECONDARY = frozenset({"kind", "sig_wins", "sig_losses", "missing_datasets"})
LEADERBOARD_TITLES = {
    "interval": "2.5% and 97.5% quantiles over the dataset-bootstrap resamples; "
    f"\u2020: fewer than {elo_mod.MIN_BOOTSTRAP_DATASETS} datasets behind it",
    "mean_improvability": "Mean Improvability: error relative to the best point on each dataset (lower is better)",
    "overhead_time": "Mean Overhead of workflow time: mean log2(cost / cheapest) over datasets (lower is better)",
    "overhead_memory": "Mean Overhead of workflow peak memory (lower is better)",
    "native_datasets": "datasets with the method's own results on every partition",
    "imputed_datasets": "datasets where a missing partition holds the matched reference result",
    "missing_datasets": "datasets without any result (user submissions are never imputed)",
    "sig_wins": "opponents beaten significantly (Wilcoxon, Holm-corrected)",
}
FEW = "\u2020"  # marks an interval that rests on fewer datasets than the bootstrap supports
SUBMISSION = "user submission"  # a submission's status where no reference comparison names one


def _interval(lb: pd.DataFrame, regime_datasets: int) -> pd.Series:
    """'[lower, upper]', marked where it is no confidence interval (``elo.interval_resolved``)."""
    return pd.Series(
        [
            f"[{lo:.0f}, {hi:.0f}]{'' if elo_mod.interval_resolved(n, regime_datasets) else ' ' + FEW}"
            for lo, hi, n in zip(lb["lower"], lb["upper"], lb["native_datasets"], strict=True)
        ],
        index=lb.index,
    )


def _submitted_views(an: Analysis) -> tuple[frozenset[str], frozenset[str]]:
    """(views, methods) of the user submissions (``cohorts.is_user``): the pages and figures mark them."""
    res = an.tables["results"]
    mine = res[co.is_user(res["origin"])]
    return frozenset(mine["view"].astype(str)), frozenset(mine["method"].astype(str))


def _row_class(submissions: frozenset[str]) -> Callable[[pd.Series], str]:
    """A leaderboard row's class: its variant (the GFMs' colour, the defaults' grey), and "user" for a submission."""
    return lambda r: f"{r['variant']} user" if str(r["view"]) in submissions else str(r["variant"])


def _leaderboard_table(an: Analysis, name: str, regime: str, table_id: str) -> str:
    lb = regime_rows(an.tables, name, regime)
    lb = lb.assign(interval=_interval(lb, _regime_datasets(an, regime)))
    columns = LEADERBOARD_COLUMNS
    mine, _ = _submitted_views(an)
    if "entries" in an.tables:  # a comparison with the shipped reference: each method's standing
        status = an.tables["entries"].set_index("method")["status"]
        names = an.tables["results"].drop_duplicates("view").set_index("view")["method_name"]
        lb = lb.assign(status=lb["view"].map(names).map(status).fillna(""))
    elif mine:
        lb = lb.assign(status=np.where(lb["view"].astype(str).isin(mine), SUBMISSION, ""))
    if "status" in lb.columns:
        columns = [*columns[:3], ("status", "Status", -1), *columns[3:]]
    return html_table(
        lb,
        columns,
        row_class=_row_class(mine),
        table_id=table_id,
        secondary=LEADERBOARD_SECONDARY,
        sort_keys={"interval": "lower"},
        titles=LEADERBOARD_TITLES,
    )


def _leaderboard(an: Analysis, regime: str) -> list[str]:
    """Two views: the designated comparison (built-in gaps imputed) and each method on its own results only."""
    imputed = int(regime_rows(an.tables, "results", regime)["imputed"].astype(bool).sum())
    native_id = f"leaderboard-native-{slug(regime)}"
    return [
        _leaderboard_table(an, "leaderboard", regime, f"leaderboard-{slug(regime)}"),
        markup(
            '<details id="{0}-view"><summary>Non-imputed view: every method on its own results only ({1:,} imputed '
            "result(s) left out; Elo, ranks and win rates recomputed)</summary>{2}</details>",
            native_id,
            imputed,
            Html(_leaderboard_table(an, "leaderboard_native", regime, native_id)),
        ),
    ]


def _regime_datasets(an: Analysis, regime: str) -> int:
    return co.regime_datasets(an.tables["coverage"], regime)


def _pareto_figures(cost: str, label: str) -> tuple[Figure, ...]:
    """The endpoints' frontier on one cost, then the same with intermediate tuning budgets."""

    def caption(extra: str) -> Callable[[pd.DataFrame, str], str]:
        return lambda d, _regime: (
            f"{label.capitalize()}, {extra}. Frontier: {', '.join(d.loc[d['on_front'], 'view'].astype(str))}. "
            f"In colour: the frontier{' and the user submissions' if plots.submitted(d).any() else ''}; "
            f"grey: the rest{'' if plots.names_every_point(d) else ', named in the data file'}."
        )

    xlabel = f"Mean Overhead, {label} (log2 of cost over cheapest; lower is better)"
    return tuple(
        Figure(
            f"pareto_{cost}{suffix}",
            f"pareto_{cost}{suffix}",
            partial(plots.pareto, xlabel=xlabel, budgets=bool(suffix)),
            f"{label.capitalize()} Pareto frontier — {{regime}} ({extra})",
            caption(extra),
        )
        for suffix, extra in (
            ("", "default, tuned and GFM endpoints"),
            ("_budgets", "with intermediate tuning budgets k"),
        )
    )


def _subgroup_boundaries(an: Analysis) -> list[str]:
    if "subgroup_boundaries" not in an.tables:
        return []
    return [
        html_table(
            an.tables["subgroup_boundaries"],
            [("property", "property", -1), ("name", "subgroup", -1), ("low", "from", 3), ("high", "below", 3)],
        )
    ]


def _tuning_table(an: Analysis, regime: str) -> list[str]:
    req = regime_rows(an.tables, "tuning_requirements", regime)
    if req.empty:
        return []
    return [
        html_table(
            req,
            [
                ("method", "method", -1),
                ("datasets", "datasets", 0),
                ("search_trials", "trials", 0),
                ("default_score", "default", 4),
                ("tuned_score", "tuned", 4),
                ("tuning_gain", "gain (points)", 2),
                ("k_within_1pt", "k within 1 point", 0),
                ("gain_k50_to_full", "gain k=50 to full", 2),
            ],
            table_id=f"tuning-table-{slug(regime)}",
        )
    ]


def _metric_table(an: Analysis, regime: str) -> list[str]:
    if regime_rows(an.tables, "metric_sensitivity", regime).empty:
        return []
    summ = regime_rows(an.tables, "metric_sensitivity_summary", regime)
    return [
        html_table(
            summ,
            [
                ("task_type", "task type", -1),
                ("metric", "metric", -1),
                ("views", "methods", 0),
                ("datasets", "datasets", 0),
                ("spearman", "Spearman vs primary", 3),
                ("kendall", "Kendall vs primary", 3),
                ("changed_positions", "positions changed", 0),
                ("largest_move_view", "largest move", -1),
                ("largest_move", "by", 0),
            ],
            table_id=f"metric-sensitivity-{slug(regime)}",
        )
    ]


def _overlap_table(an: Analysis, regime: str) -> list[str]:
    ov = regime_rows(an.tables, "pretraining_overlap", regime)
    if ov.empty:
        return []
    return [
        html_table(
            ov,
            [
                ("view", "method", -1),
                ("dataset", "dataset", -1),
                ("split", "split", 0),
                ("omitted_score", "omitted score", 4),
                ("replacement_score", "replacement", 4),
            ],
            table_id=f"overlap-table-{slug(regime)}",
        )
    ]


def _declarations(an: Analysis) -> list[str]:
    """Each GFM's declared pretraining graphs and what the declaration rests on (paper, checkpoints, vendor)."""
    dec = an.tables["pretraining_declarations"]
    if dec.empty:
        return []
    return [
        "<h3>What each foundation model declares</h3>",
        html_table(
            dec,
            [("method", "method", -1), ("pretraining_graphs", "pretraining graphs", -1), ("basis", "basis", -1)],
            table_id="pretraining-declarations",
        ),
    ]


def _cohort_caption(ce: pd.DataFrame, _regime: str) -> str:
    ncoh = ce.groupby("cohort")["cohort_datasets"].first().to_dict()
    return "Cohorts: " + "; ".join(f"{k} ({co.COHORT_TITLES.get(k, k)}, {v} datasets)" for k, v in ncoh.items()) + "."


def _robustness_tables(an: Analysis, regime: str) -> list[str]:
    rs = regime_rows(an.tables, "rule_sensitivity", regime).drop(columns=["regime"])
    pt = regime_rows(an.tables, "pairwise_tests", regime)
    return [
        "<p>Aggregation-rule sensitivity (Spearman correlation between rankings):</p>",
        html_table(rs, [("rule", "rule", -1)] + [(c, c, 3) for c in rs.columns if c != "rule"]),
        markup(
            '<p class="small">{0} significant pairs after Holm correction (Wilcoxon signed-rank on per-dataset means); '
            'full table: <a href="tables/pairwise_tests.csv">pairwise_tests.csv</a>.</p>',
            len(pt[pt["significant"]]),
        ),
    ]


def _cells_sentence(cc: pd.DataFrame, regime: str) -> str:
    """One regime's cells in words: planned, with a result, unselectable (and why), absent."""
    planned, methods = int(cc["planned_cells"].sum()), len(cc)
    parts = int(cc["planned_cells"].iloc[0]) if methods else 0

    def per_method(col: str, why: bool = False) -> str:
        hit = cc[cc[col] > 0]
        if hit.empty:
            return ""
        items = [
            f"{m} {n}" + (f": {w}" if why and w else "")
            for m, n, w in zip(hit["method"], hit[col], hit["unselectable_statuses"], strict=True)
        ]
        return f" ({'; '.join(items)})"

    return markup(
        "<b>{regime}</b>: {methods} method(s) \u00d7 {parts} partition(s) = {planned} planned cells; {selected} hold a "
        "selectable result, {unselectable} hold trials but none selectable{why}, {absent} hold no trial{which}.",
        regime=regime,
        methods=methods,
        parts=parts,
        planned=planned,
        selected=int(cc["selected_cells"].sum()),
        unselectable=int(cc["unselectable_cells"].sum()),
        why=per_method("unselectable_cells", True),
        absent=int(cc["absent_cells"].sum()),
        which=per_method("absent_cells"),
    )


def _few(an: Analysis) -> list[tuple[str, int]]:
    """(regime, datasets) of each regime whose comparison rests on fewer datasets than its bootstrap supports."""
    need = elo_mod.MIN_BOOTSTRAP_DATASETS
    return [(r, d) for r in an.regimes if (d := _regime_datasets(an, r)) < need]


def _few_datasets_warning(an: Analysis) -> list[str]:
    """One line for every regime compared on too few datasets, linked to the reason (in the coverage section)."""
    few = _few(an)
    if not few:
        return []
    regimes = join((markup("{0} ({1} dataset{2})", r, d, "" if d == 1 else "s") for r, d in few), Html(", "))
    return [
        markup(
            '<p class="warn" id="few-datasets-warning"><b>Too few datasets for confidence intervals:</b> {0}. Their '
            'intervals (marked {1}) are not confidence intervals. <a href="#few-datasets">Why</a></p>',
            regimes,
            FEW,
        )
    ]


def _few_datasets_why(an: Analysis) -> list[str]:
    """Why the regimes of ``_few`` have no confidence intervals: how many distinct resamples their bootstrap has."""
    few = _few(an)
    if not few:
        return []
    need = elo_mod.MIN_BOOTSTRAP_DATASETS
    each = join(
        (
            markup("{0} compares methods on {1} dataset(s) ({2} distinct resamples)", r, d, math.comb(2 * d - 1, d))
            for r, d in few
        ),
        Html("; "),
    )
    return [
        markup(
            '<p class="small" id="few-datasets"><b>Too few datasets for the intervals:</b> {each}. A dataset '
            "bootstrap of d datasets can draw at most C(2d\u22121, d) distinct resamples, and the ends of a 95% "
            "interval, its 2.5% and 97.5% quantiles, fall between distinct resamples only with at least 40 of them: "
            "{need} datasets or more (C({twice}, {need}) = {enough}). Intervals marked {few} are the rating on a "
            "single resample such as one dataset repeated, not confidence intervals; the ranks and win rates rest on "
            "as few datasets.</p>",
            each=each,
            need=need,
            twice=2 * need - 1,
            enough=math.comb(2 * need - 1, need),
            few=FEW,
        )
    ]


def _coverage(an: Analysis) -> list[str]:
    """What the leaderboard rests on: cells planned vs present, and per method native and imputed datasets."""
    cc, cov = an.tables["cell_coverage"], an.tables["coverage"]
    out = [
        '<ul class="small" id="cells">'
        + join(markup("<li>{0}</li>", _cells_sentence(cc[cc["regime"] == r], r)) for r in sorted(cc["regime"].unique()))
        + "</ul>",
        '<p class="small">A cell is one method on one partition (dataset and split). The store does not keep '
        "a sweep's plan, so the planned cells are its methods times the partitions its trials ran on.</p>",
    ]
    out += _few_datasets_why(an)
    out += _dataset_coverage(an, cov)
    return out


def _dataset_coverage(an: Analysis, cov: pd.DataFrame) -> list[str]:
    """The paper's Table 24: per method and regime, native and imputed (and missing) datasets; the complete in words."""
    counts = ("native_datasets", "imputed_datasets", "missing_datasets")
    wide = cov.pivot_table(index="view", columns="regime", values=list(counts), aggfunc="first")
    gaps = wide[[c for c in wide.columns if c[0] != "native_datasets"]].fillna(0).sum(axis=1) > 0
    n_ds = cov.groupby("regime")["datasets"].first()
    total = ", ".join(f"{n_ds[r]} in {r}" for r in an.regimes if r in n_ds)
    if not gaps.any():
        return [markup('<p class="small">Every method has native results on every dataset ({0}).</p>', total)]
    cols = [("view", "method", -1), ("origin", "origin", -1)]
    flat = pd.DataFrame({"view": wide.index[gaps]})
    flat["origin"] = flat["view"].map(cov.drop_duplicates("view").set_index("view")["origin"])
    for regime in an.regimes:
        for what in counts:
            col = wide.get((what, regime))
            if col is None or (what == "missing_datasets" and not col.gt(0).any()):
                continue
            flat[f"{what} {regime}"] = col[gaps].fillna(0).astype(int).to_numpy()
            cols.append((f"{what} {regime}", f"{what.split('_')[0]} ({n_ds[regime]}) {regime}", 0))
    rest = int((~gaps).sum())
    return [
        markup(
            '<details id="coverage-datasets"><summary class="small">Datasets per method: {0} method(s) lack native '
            'results on some dataset ({1})</summary><p class="small">Native means the method\'s own results on every '
            "partition; imputed, a missing partition holds the matched {2} result; missing, no result (user "
            "submissions are never imputed). {3}</p>{4}</details>",
            int(gaps.sum()),
            total,
            an.reference,
            f"The {rest} method(s) not listed have native results on every dataset." if rest else "",
            Html(html_table(flat.sort_values("view"), cols, table_id="coverage-table")),
        )
    ]


def _below_chance(an: Analysis) -> list[str]:
    bc = an.tables["below_chance"]
    if bc.empty:
        return ['<p class="small">No selected binary result scores a test AUROC below 0.5.</p>']
    return [
        markup(
            '<p class="note">{0} selected binary result(s) score a test AUROC below 0.5, worse than a constant '
            "predictor: an untrained or inverted head was probably kept. Data: "
            '<a href="tables/below_chance.csv">below_chance.csv</a>.</p>',
            len(bc),
        ),
        html_table(
            bc,
            [
                ("regime", "regime", -1),
                ("view", "method", -1),
                ("dataset", "dataset", -1),
                ("split", "split", 0),
                ("selected_trial_index", "selected trial", 0),
                ("val_loss", "val loss", 4),
                ("test_auroc", "test AUROC", 4),
            ],
            table_id="below-chance-table",
        ),
    ]


_TUNING_X = "tuning budget k (last point: the full search)"

#: The index page, in order.
SECTIONS: tuple[Section, ...] = (
    Section("coverage", "Coverage: what the leaderboard rests on", footer=_coverage, fold=False),
    Section(
        "lb",
        "Leaderboard",
        per_regime_heading=True,
        before=_leaderboard,
        figures=(
            Figure("elo", "leaderboard", plots.elo_bars, "Elo with 95% intervals — {regime}", "Elo ratings, {regime}."),
            Figure(
                "mean_rank",
                tb.mean_rank,
                plots.rank_iqr,
                "Mean rank and IQR across datasets — {regime}",
                "Mean rank, {regime}.",
            ),
        ),
    ),
    Section(
        "pareto",
        "Performance–cost Pareto frontiers",
        intro=(
            "<p class=\"small\">Time is every call's as the records measure it: the service's CPU seconds on a CPU "
            "(an idle machine's wall time for a one-thread service, whatever else the machine ran), its wall seconds "
            "on a GPU. Peak memory is the service's resident set on a CPU, its allocator's peak on a GPU.</p>"
        ),
        figures=_pareto_figures("time", "workflow time") + _pareto_figures("memory", "workflow peak memory"),
    ),
    Section(
        "budgets",
        "Tuning budgets",
        intro=(
            '<p class="small">Budget k selects among the first k trials by validation loss only; its cost is '
            "interpolated linearly between the measured default (k=1) and full-search costs (measured cumulative "
            "costs are in the CSV as mean_overhead_measured).</p>"
        ),
        figures=(
            Figure(
                "budget_trajectories",
                "budget_trajectories",
                plots.budget_curves,
                "Tuning-budget trajectories — {regime}",
                "Improvability and interpolated overhead against budget, {regime}.",
            ),
        ),
    ),
    Section(
        "subgroups",
        "Dataset subgroups",
        footer=_subgroup_boundaries,
        empty='<p class="note">Subgroup views skipped: no dataset has statistics (--dataset-stats CSV).</p>',
        figures=(
            Figure(
                "subgroups",
                tb.subgroup_matrix,
                partial(plots.heatmap, cbar="mean rank (lower is better)", fmt="{:.1f}", reverse=True),
                "Mean rank within each dataset subgroup — {regime}",
                "Subgroups, {regime}: rows ordered by Elo.",
                index=True,
                optional=True,
            ),
        ),
    ),
    Section(
        "tuning",
        "Tuning requirements",
        intro=(
            '<p class="small">Per supervised method: the test gain of the full search over the default configuration, '
            "the smallest budget k whose selection comes within one point of the full search on average, the gain "
            "from k = 50 to the full search (blank: searches of 50 trials or fewer), and how much of the validation "
            "improvement shows up on test. Points = x100 on the primary metric.</p>"
        ),
        after=_tuning_table,
        empty='<p class="small">No supervised method has a search to analyse.</p>',
        figures=(
            Figure(
                "tuning",
                "tuning_curves",
                partial(
                    plots.lines,
                    x="k",
                    y="gap_to_full",
                    group="method",
                    xlabel=_TUNING_X,
                    ylabel="full search minus budget k (points)",
                    hline=1.0,
                ),
                "Test gap to the full search against budget k — {regime}",
                "Mean test-score gap (points) between budget k and the full search; dashed: one point.",
                optional=True,
            ),
            Figure(
                "validation_test_gap",
                "validation_test_gap",
                partial(
                    plots.lines,
                    x="k",
                    y="overstatement",
                    group="method",
                    xlabel=_TUNING_X,
                    ylabel="validation gain - test gain (points)",
                    hline=0.0,
                ),
                "Validation gain minus test gain of tuning — {regime}",
                "How much of tuning's validation improvement over the default fails to show up on test (points).",
                optional=True,
            ),
        ),
    ),
    Section(
        "metrics",
        "Task types and metric sensitivity",
        intro=(
            '<p class="small">The leaderboard on binary tasks (AUROC) and multiclass tasks (accuracy) separately, and '
            "recomputed on each secondary metric (multiclass: accuracy, macro-F1, cross-entropy; binary: accuracy, "
            "positive-class precision, binary cross-entropy) with its agreement with the primary ordering.</p>"
        ),
        after=_metric_table,
        figures=(
            Figure(
                "task_types",
                tb.task_type_panels,
                partial(plots.elo_panels, panel="panel"),
                "Elo by task type — {regime}",
                "Elo on binary tasks (AUROC) and multiclass tasks (accuracy) separately.",
                optional=True,
            ),
            Figure(
                "metric_sensitivity",
                tb.metric_positions,
                partial(plots.heatmap, cbar="position (1 = best)", fmt="{:.0f}", reverse=True),
                "Elo position on each metric — {regime}",
                "Each method's Elo position per task type and metric (the first metric of a task type is its primary).",
                index=True,
                optional=True,
            ),
        ),
    ),
    Section(
        "overlap",
        "Pretraining overlap",
        intro=(
            '<p class="small">A GFM result on a graph its pretraining used (declared in its family manifest, matched '
            "by canonical graph identity) is omitted from the common-universe analyses and replaced by the matched "
            "gcn-Default result.</p>"
        ),
        after=_overlap_table,
        footer=_declarations,
        empty='<p class="small">No GFM result overlaps its pretraining graphs.</p>',
        figures=(
            Figure(
                "pretraining_overlap",
                "pretraining_overlap",
                plots.overlap_bars,
                "Omitted for pretraining overlap — {regime}",
                "Each omitted GFM result beside the gcn-Default result that replaced it (mean over partitions).",
                optional=True,
            ),
        ),
    ),
    Section(
        "robustness",
        "Robustness: cohorts, win rates, significance",
        after=_robustness_tables,
        figures=(
            Figure(
                "winrate",
                tb.winrate,
                partial(plots.heatmap, cbar="win rate", cmap="RdBu"),
                "Pairwise win rate (row beats column) — {regime}",
                "Win rates, {regime}.",
                index=True,
            ),
            Figure(
                "cohort_elo",
                "cohort_elo",
                plots.cohort_elo,
                "Elo by analysis cohort — {regime}",
                _cohort_caption,
                optional=True,  # no cohort compares two methods
            ),
        ),
    ),
    Section("below-chance", "Results below chance", footer=_below_chance),
)


def _marked(data: pd.DataFrame, an: Analysis) -> pd.DataFrame:
    """A figure's data with a ``submitted`` column (``plots.submitted``) where it names any user submission's view or
    method; as it is otherwise."""
    views, methods = _submitted_views(an)
    if "method" in data.columns:
        mine = data["method"].astype(str).isin(methods)
    elif "view" in data.columns:
        mine = data["view"].astype(str).isin(views)
    else:
        return data
    return data.assign(submitted=mine) if mine.any() else data


def _draw(fig: Figure, an: Analysis, regime: str, out: Path) -> tuple[Path, str] | None:
    """Plot ``fig`` for ``regime`` and write its data beside it; (the PNG, its HTML), or None when skipped."""
    data = regime_rows(an.tables, fig.data, regime) if isinstance(fig.data, str) else fig.data(an.tables, regime)
    if fig.optional and data.empty:
        return None
    data = _marked(data, an)
    rel = figure_path(fig.stem, regime)
    png = out / rel
    fig.draw(data, png, fig.title.format(regime=regime))
    write_table(data, png.with_suffix(""), index=fig.index)
    caption = fig.caption(data, regime) if callable(fig.caption) else fig.caption.format(regime=regime)
    return png, figure(rel, caption)


def _section(section: Section, an: Analysis, out: Path, figures: list[Path]) -> list[str]:
    """A section's HTML; the PNGs it draws are appended to ``figures``. A folded section is a ``details`` element
    whose summary is its heading and what it holds."""
    blocks: list[str] = []
    drawn = len(figures)
    for regime in an.regimes:
        parts = section.before(an, regime) if section.before else []
        for fig in section.figures:
            made = _draw(fig, an, regime, out)
            if made is not None:
                figures.append(made[0])
                parts.append(made[1])
        parts += section.after(an, regime) if section.after else []
        if not parts:
            continue
        anchor = f"{section.id}-{slug(regime)}"
        if section.per_regime_heading:
            blocks.append(markup('<h2 id="{0}">{1} — {2}</h2>', anchor, section.title, regime))
        else:
            blocks.append(markup('<h3 id="{0}">{1}</h3>', anchor, regime))
        blocks += parts
    if not blocks and section.empty:  # nothing per regime: say so, before what holds for every regime
        blocks.append(section.empty)
    blocks += section.footer(an) if section.footer else []
    if section.per_regime_heading:
        return blocks
    intro = [section.intro] if section.intro else []
    if not section.fold:
        return [markup('<h2 id="{0}">{1}</h2>', section.id, section.title), *intro, *blocks]
    n = len(figures) - drawn
    holds = f"{n} figure{'s' if n != 1 else ''}" if n else "tables and notes"
    return [
        markup(
            '<details class="fold" id="{0}"><summary><h2>{1}</h2> <span class="small">{2}</span></summary>',
            section.id,
            section.title,
            holds,
        ),
        *intro,
        *blocks,
        "</details>",
    ]


def _glance(an: Analysis) -> list[str]:
    """The page's first lines: per regime, who leads and how sure it is, and where each user submission ranks (the
    findings' own sentences, so the page and the findings page say the same), then the page-wide warnings."""
    said = an.tables["findings"]
    items = []
    for regime in an.regimes:
        lead = said[(said["regime"] == regime) & (said["topic"] == "elo")]["sentence"]
        if lead.empty:
            continue
        mine = said[(said["regime"] == regime) & (said["topic"] == "submitted")]["sentence"]
        rest = [s.removeprefix(f"In {regime}, ") for s in mine]  # our own words first: "the user submission ..."
        items.append(
            markup(
                '<li><b>{0}</b>: {1} {2}<a href="#lb-{3}">Leaderboard</a></li>',
                regime,
                lead.iloc[0].removeprefix(f"In {regime}, "),
                join(markup('<span class="user">{0}</span> ', r[:1].upper() + r[1:]) for r in rest),
                slug(regime),
            )
        )
    glance = [markup('<div class="glance" id="glance"><ul>{0}</ul></div>', join(items))] if items else []
    return [*glance, *_few_datasets_warning(an), *_notes(an)]


#: Notes shown on the first screen; the rest wait behind "more".
_NOTES_SHOWN = 2


def _notes(an: Analysis) -> list[str]:
    """The notes on the whole page (``an.notes``) in one box: the first ``_NOTES_SHOWN``, the rest folded."""
    if not an.notes:
        return []
    shown = join(markup("<li>{0}</li>", n) for n in an.notes[:_NOTES_SHOWN])
    rest = an.notes[_NOTES_SHOWN:]
    more = (
        markup(
            "<details><summary>{0} more note(s)</summary><ul>{1}</ul></details>",
            len(rest),
            join(markup("<li>{0}</li>", n) for n in rest),
        )
        if rest
        else Html()
    )
    return [markup('<div class="note" id="notes"><ul>{0}</ul>{1}</div>', shown, more)]


def _preamble(an: Analysis) -> list[str]:
    """The glance, and how the leaderboard reads."""
    anchored = f"anchored at {an.anchor} = 1000" if an.anchor else "centred on 1000 (no reference result)"
    return [
        *_glance(an),
        markup(
            '<p class="small">Elo: partition-level battles on the primary metric (accuracy, or AUROC for binary '
            "tasks), ties half, each partition weighted 1/5, 200 dataset-bootstrap resamples, {0}. Missing built-in "
            'results are imputed with the matched {1} result and counted under "Imputed datasets"; user submissions '
            "are never imputed. Mean Overhead: mean over datasets of log2(cost / cheapest method on that dataset).</p>",
            anchored,
            an.reference,
        ),
    ]


def _datasets_body(an: Analysis) -> str:
    """The per-dataset page: dataset leaders, and every view's mean score on every dataset."""
    body: list[str] = []
    mine, _ = _submitted_views(an)
    for regime in an.regimes:
        leaders = regime_rows(an.tables, "dataset_leaders", regime)
        body.append(markup("<h2>{0}</h2><h3>Dataset leaders (tuned or canonical configurations)</h3>", regime))
        counts = leaders["leader"].value_counts().items()
        body.append(markup("<p>{0}</p>", ", ".join(f"{k}: {v}" for k, v in counts)))
        body.append(
            html_table(
                leaders,
                [
                    ("dataset", "dataset", -1),
                    ("leader", "leader", -1),
                    ("leader_kind", "kind", -1),
                    ("score", "score", 4),
                ],
                row_class=lambda r: "user" if str(r["leader"]) in mine else "",
            )
        )
        wide, imp = tb.dataset_scores(an.tables, regime)
        body.append(markup("<h3>Mean primary metric over partitions (* imputed with {0})</h3>", an.reference))
        head = Html('<th class="l">dataset</th>') + join(
            markup('<th class="{0}">{1}</th>', "user" if str(v) in mine else "", v) for v in wide.columns
        )
        rows = []
        for ds, r in wide.iterrows():
            cells = []
            for v, x in r.items():
                if not np.isfinite(x):
                    cells.append(Html("<td></td>"))
                    continue
                star = Html('<span class="imp">*</span>' if bool(imp.loc[ds, v]) else "")
                value = markup("<b>{0:.4f}</b>", x) if x == r.max() else markup("{0:.4f}", x)
                cells.append(markup('<td data-v="{0}">{1}{2}</td>', x, value, star))
            rows.append(markup('<tr><td class="l">{0}</td>{1}</tr>', ds, join(cells)))
        body.append(
            markup(
                '<div class="wrap"><table class="sortable"><thead><tr>{0}</tr></thead><tbody>{1}</tbody></table></div>',
                Html(head),
                join(rows),
            )
        )
    return "\n".join(body)


def _findings_body(findings: pd.DataFrame) -> str:
    """The findings page: each computed sentence, linked to the figure it comes from."""
    parts = [
        '<p class="small">Every sentence below is computed from this store\'s tables; the link opens the '
        'figure it comes from. Data: <a href="tables/findings.csv">findings.csv</a>.</p>'
    ]
    for regime, g in findings.groupby("regime", sort=True):
        parts.append(markup('<h2>{0}</h2><ul id="findings-{1}">', regime or "All regimes", slug(regime or "all")))
        for r in g.itertuples():
            parts.append(
                markup('<li data-topic="{0}">{1} <a href="{2}">[figure]</a></li>', r.topic, r.sentence, r.figure)
            )
        parts.append("</ul>")
    return "\n".join(parts)


def write_report(an: Analysis, out: Path, title: str = "NodeGround leaderboard") -> list[Path]:
    """Write tables, figures and pages under ``out``; returns the figure paths."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "figures").mkdir(exist_ok=True)
    for name, df in an.tables.items():
        write_table(df, out / "tables" / name, index=name.startswith(("winrate_", "nemenyi_")))
    figures: list[Path] = []
    body = _preamble(an)
    for section in SECTIONS:
        body += _section(section, an, out, figures)
    n = tb.totals(an.tables)
    sub = (
        f"{n['trials']:,} trials · {n['datasets']} datasets · {n['views']} compared methods · "
        f"regimes {', '.join(an.regimes)}"
    )
    (out / "index.html").write_text(page(title, "\n".join(body), sub), encoding="utf-8")
    (out / "datasets.html").write_text(page(title + " — per dataset", _datasets_body(an), sub), encoding="utf-8")
    (out / "findings.html").write_text(
        page(title + " — findings", _findings_body(an.tables["findings"]), sub), encoding="utf-8"
    )
    items = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.suffix in (".csv", ".parquet"))
    lis = join(markup('<li><a href="{0}">{0}</a></li>', i) for i in items)
    (out / "tables.html").write_text(page(title + " — data files", markup("<ul>{0}</ul>", lis), sub), encoding="utf-8")
    (out / "manifest.json").write_text(
        json.dumps(
            {"figures": [p.relative_to(out).as_posix() for p in figures], "timings_s": an.timings, "notes": an.notes},
            indent=1,
        )
    )
    return figures


def build_report(
    trials: pd.DataFrame,
    out: Path,
    dataset_stats: pd.DataFrame | None = None,
    anchor: str | None = None,
    rounds: int = elo_mod.BOOTSTRAP_ROUNDS,
    near_complete_min: float = 0.9,
    title: str = "NodeGround leaderboard",
    compute_stats: bool = True,
    notes: Sequence[str] = (),
    entries: pd.DataFrame | None = None,
) -> Analysis:
    """Compute every table of ``trials`` and write the site under ``out``; ``notes`` head the page's notes (the
    store is a partial merge, say); ``entries`` says each competing method's standing (reference, submitted,
    verified: ``orchestrator.reference.compare``)."""
    an = compute_analysis(
        trials,
        dataset_stats,
        anchor=anchor,
        rounds=rounds,
        near_complete_min=near_complete_min,
        compute_stats=compute_stats,
    )
    an.notes[:0] = list(notes)
    if entries is not None:
        an.tables["entries"] = entries
    t = time.perf_counter()
    write_report(an, Path(out), title=title)
    an.timings["write_report"] = round(time.perf_counter() - t, 3)
    return an
