"""The findings page: what a store shows, in the paper's terms, one sentence per computed fact.

Every sentence is computed from the report's tables (never written by hand) and names the figure
it comes from, so a reader can check it. Topics follow the paper: who leads Elo in each regime,
the strongest GFM and its rank, which GFMs sit on each Pareto frontier with and without
intermediate budgets, the largest tuning gains, task-type leaders, metric sensitivity, the
validation–test gap, pretraining overlap and results below chance. Each topic is one function;
``RANKED`` and ``AUDITS`` list them in the page's order, and ``findings`` walks them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from orchestrator.analysis.views import REFERENCE_METHOD
from orchestrator.trials.selection import default_view

COLUMNS = ["regime", "topic", "sentence", "figure"]
#: The result that stands in for a missing or overlapping one (imputation, overlap audit).
REPLACEMENT = default_view(REFERENCE_METHOD)


def _names(views) -> str:
    views = list(views)
    return ", ".join(views) if views else "none"


def _and(views) -> str:
    views = list(views)
    return views[0] if len(views) == 1 else ", ".join(views[:-1]) + " and " + views[-1]


def _top(df: pd.DataFrame, col: str) -> pd.DataFrame:
    """Every row tied for the highest ``col`` (Elo ties are common on few datasets)."""
    return df[np.isclose(df[col], df[col].max())]


def _places(n: int) -> str:
    """A change of leaderboard position in words (positive: the method ranks better)."""
    if n == 0:
        return "nowhere"
    return f"{'up' if n > 0 else 'down'} {abs(n)} place{'s' if abs(n) != 1 else ''}"


#: A sentence of the page: (topic, sentence, the stem of the figure it comes from).
Sentence = tuple[str, str, str]
#: A finding: the sentences it says of a regime, from the report's tables (none when they have nothing to say).
Finding = Callable[[dict[str, pd.DataFrame], str], list[Sentence]]


def _leaderboard(tables: dict[str, pd.DataFrame], regime: str) -> pd.DataFrame:
    lb = tables["leaderboard"]
    return lb[lb["regime"] == regime].sort_values("rank")


def _elo_leader(tables: dict[str, pd.DataFrame], regime: str) -> list[Sentence]:
    lb = _leaderboard(tables, regime)
    top = _top(lb, "elo")
    if len(top) == 1:
        t = top.iloc[0]
        return [
            (
                "elo",
                f"In {regime}, {t['view']} leads Elo at {t['elo']:.0f} (95% interval "
                f"{t['lower']:.0f}–{t['upper']:.0f}) among {len(lb)} compared methods.",
                "elo",
            )
        ]
    intervals = ", ".join(f"{t.view} {t.lower:.0f}–{t.upper:.0f}" for t in top.itertuples())
    return [
        (
            "elo",
            f"In {regime}, {_and(top['view'])} tie for the lead in Elo at {top['elo'].iloc[0]:.0f} "
            f"among {len(lb)} compared methods (95% intervals: {intervals}).",
            "elo",
        )
    ]


def _strongest_gfm(tables: dict[str, pd.DataFrame], regime: str) -> list[Sentence]:
    lb = _leaderboard(tables, regime)
    gfms = lb[lb["kind"] != "supervised"]
    if gfms.empty:
        return [("gfm", f"In {regime}, no GFM has results.", "elo")]
    g = gfms.iloc[0]
    rank = 1 + int((lb["elo"] > g["elo"] + 1e-9).sum())  # a tie shares the better rank
    imputed = int(g.get("imputed_datasets", 0) or 0)
    shown = imputed + int(g.get("native_datasets", 0) or 0)
    stand_in = f"; on {imputed} of its {shown} datasets its result is the imputed {REPLACEMENT} one" if imputed else ""
    return [
        (
            "gfm",
            f"In {regime}, the strongest GFM is {g['view']}: Elo {g['elo']:.0f}, rank {rank} "
            f"of {len(lb)} (mean rank across datasets {g['mean_rank']:.2f}{stand_in}).",
            "elo",
        )
    ]


def _pareto_frontiers(tables: dict[str, pd.DataFrame], regime: str) -> list[Sentence]:
    said: list[Sentence] = []
    for cost, label in (("time", "workflow time"), ("memory", "peak memory")):
        ends = tables[f"pareto_{cost}"]
        ends = ends[(ends["regime"] == regime) & ends["on_front"]]
        both = tables[f"pareto_{cost}_budgets"]
        both = both[(both["regime"] == regime) & both["on_front"]]
        said.append(
            (
                f"pareto_{cost}",
                f"In {regime}, GFMs on the {label} Pareto frontier: "
                f"{_names(ends.loc[ends['kind'] != 'supervised', 'view'])} (the frontier: {_names(ends['view'])}).",
                f"pareto_{cost}",
            )
        )
        said.append(
            (
                f"pareto_{cost}_budgets",
                f"In {regime}, with intermediate tuning budgets, GFMs on the {label} "
                f"frontier: {_names(both.loc[both['kind'] != 'supervised', 'view'])} (the frontier: "
                f"{_names(both['view'].drop_duplicates())}).",
                f"pareto_{cost}_budgets",
            )
        )
    return said


def _tuning_gains(tables: dict[str, pd.DataFrame], regime: str) -> list[Sentence]:
    tr = tables["tuning_requirements"]
    tr = tr[tr["regime"] == regime].sort_values("tuning_gain", ascending=False)
    if not len(tr):
        return []
    best = "; ".join(
        f"{r.method} {r.tuning_gain:+.1f} points (within 1 point of the full search from k = "
        f"{r.k_within_1pt} of {r.search_trials} trials)"
        for r in tr.head(3).itertuples()
    )
    return [
        (
            "tuning",
            f"In {regime}, the test gain of a full search over the default configuration, largest first: {best}.",
            "tuning",
        )
    ]


def _validation_test_gap(tables: dict[str, pd.DataFrame], regime: str) -> list[Sentence]:
    gap = tables["validation_test_gap"]
    gap = gap[(gap["regime"] == regime) & (gap["budget"] == "full")]
    if not len(gap):
        return []
    mean = gap["overstatement"].mean()
    worst = gap.sort_values("overstatement", ascending=False).iloc[0]
    verdict = (
        f"validation overstates the gain by {mean:.1f} points"
        if mean >= 0.05
        else f"validation understates the gain by {-mean:.1f} points"
        if mean <= -0.05
        else "validation and test agree on the gain"
    )
    return [
        (
            "validation_test_gap",
            f"In {regime}, a full search improves validation by {gap['val_gain'].mean():.1f} points and test by "
            f"{gap['test_gain'].mean():.1f} points over the default, averaged over {len(gap)} methods: {verdict} "
            f"(largest overstatement: {worst['method']}, {worst['overstatement']:+.1f}).",
            "validation_test_gap",
        )
    ]


def _task_type_leaders(tables: dict[str, pd.DataFrame], regime: str) -> list[Sentence]:
    tt = tables["task_type_leaderboards"]
    tt = tt[tt["regime"] == regime]
    leads = [
        f"on {task} tasks ({g['metric'].iloc[0]}, {int(g['datasets'].max())} dataset"
        f"{'s' if g['datasets'].max() != 1 else ''}) by {_and(g.loc[g['position'] == 1, 'view'])}"
        for task, g in tt.groupby("task_type", sort=True)
    ]
    if not leads:
        return []
    return [("task_types", f"In {regime}, Elo is led " + "; ".join(leads) + ".", "task_types")]


def _metric_sensitivity(tables: dict[str, pd.DataFrame], regime: str) -> list[Sentence]:
    ms = tables["metric_sensitivity_summary"]
    ms = ms[ms["regime"] == regime].dropna(subset=["spearman"])
    if not len(ms):
        return []
    if (ms["changed_positions"] == 0).all():
        return [
            (
                "metric_sensitivity",
                f"In {regime}, every secondary metric ({', '.join(sorted(set(ms['metric'])))}) "
                "orders the methods as the primary metric does.",
                "metric_sensitivity",
            )
        ]
    w = ms.sort_values("spearman").iloc[0]
    return [
        (
            "metric_sensitivity",
            f"In {regime}, the ordering departs most from the primary metric under "
            f"{w['metric']} on {w['task_type']} tasks (Spearman {w['spearman']:.2f}, {w['changed_positions']} of "
            f"{w['views']} methods change position; {w['largest_move_view']} moves "
            f"{_places(int(w['largest_move']))}).",
            "metric_sensitivity",
        )
    ]


def _pretraining_overlap(tables: dict[str, pd.DataFrame], regime: str) -> list[Sentence]:
    o = tables["pretraining_overlap"]
    o = o[o["regime"] == regime]
    if not len(o):
        return []
    pairs = sorted({f"{v} on {d}" for v, d in zip(o["view"], o["dataset"], strict=True)})
    replaced = int(o["replaced"].astype(bool).sum())
    fate = (
        f"replaced by {REPLACEMENT}"
        if replaced == len(o)
        else f"omitted ({replaced} replaced by {REPLACEMENT}, the rest without a matched {REPLACEMENT} result)"
    )
    return [
        (
            "pretraining_overlap",
            f"In {regime}, {len(o)} GFM result(s) are {fate} for pretraining overlap: {', '.join(pairs)}.",
            "pretraining_overlap",
        )
    ]


#: What a regime whose leaderboard ranks any method says, in the page's order (regime by regime).
RANKED: tuple[Finding, ...] = (
    _elo_leader,
    _strongest_gfm,
    _pareto_frontiers,
    _tuning_gains,
    _validation_test_gap,
    _task_type_leaders,
    _metric_sensitivity,
)
#: What every regime says after them, ranked or not (the audit removes results, perhaps a regime's every one).
AUDITS: tuple[Finding, ...] = (_pretraining_overlap,)


def _below_chance(tables: dict[str, pd.DataFrame]) -> list[dict]:
    """The store-wide finding: selected binary results below chance, linked to the index page's list."""
    bc = tables["below_chance"]
    if not len(bc):
        return []
    pairs = sorted({f"{v} on {d}" for v, d in zip(bc["view"], bc["dataset"], strict=True)})
    return [
        {
            "regime": "",
            "topic": "below_chance",
            "figure": "index.html#below-chance",
            "sentence": f"{len(bc)} selected binary result(s) score a test AUROC below 0.5: {', '.join(pairs)}.",
        }
    ]


def findings(tables: dict[str, pd.DataFrame], regimes: list[str], figure: Callable[[str, str], str]) -> pd.DataFrame:
    """One row per sentence: regime, topic, sentence, figure (a path relative to the report)."""

    def rows(said: Finding, regime: str) -> list[dict]:
        return [
            {"regime": regime, "topic": topic, "sentence": sentence, "figure": figure(stem, regime)}
            for topic, sentence, stem in said(tables, regime)
        ]

    ranked = [r for r in regimes if not _leaderboard(tables, r).empty]
    out = [row for regime in ranked for said in RANKED for row in rows(said, regime)]
    out += [row for said in AUDITS for regime in regimes for row in rows(said, regime)]
    return pd.DataFrame(out + _below_chance(tables), columns=COLUMNS)
