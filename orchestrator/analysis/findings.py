"""The findings page: what a store shows, in the paper's terms, one sentence per computed fact.

Every sentence is computed from the report's tables (never written by hand) and names the figure
it comes from, so a reader can check it. Topics follow the paper: who leads Elo in each regime and
how sure the lead is (the runner-up, and whether their intervals overlap), where each user
submission ranks, the strongest GFM and its rank, each cost's Pareto frontier and what intermediate
budgets change on it, the largest tuning gains, task-type leaders, metric sensitivity, the
validation–test gap, pretraining overlap and results below chance. The index page opens with the
first two (``site``'s "At a glance"). Each topic is one function;
``RANKED`` and ``AUDITS`` list them in the page's order, and ``findings`` walks them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from orchestrator.analysis.cohorts import is_user, regime_datasets
from orchestrator.analysis.elo import MIN_BOOTSTRAP_DATASETS, interval_resolved
from orchestrator.analysis.views import REFERENCE_METHOD
from orchestrator.trial_table.selection import default_view

COLUMNS = ["regime", "topic", "sentence", "figure"]
#: The result that stands in for a missing or overlapping one (imputation, overlap audit).
REPLACEMENT = default_view(REFERENCE_METHOD)


def _and(views) -> str:
    """Names as a person lists them: "a", "a and b", "a, b and c"."""
    views = [str(v) for v in views]
    return ", ".join(views[:-1]) + " and " + views[-1] if len(views) > 1 else "".join(views) or "none"


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


def _datasets(n: int) -> str:
    return f"{n} dataset{'s' if n != 1 else ''}"


def _resolved(row: pd.Series, regime_datasets: int) -> bool:
    return interval_resolved(row.get("native_datasets", np.nan), regime_datasets)


def _interval(row: pd.Series, regime_datasets: int) -> str:
    """A view's Elo interval in words, or why it has none (``elo.interval_resolved``)."""
    if _resolved(row, regime_datasets):
        return f"95% interval {row['lower']:.0f}–{row['upper']:.0f}"
    return "too few datasets for a confidence interval"


def _too_few(regime_datasets: int) -> str:
    return f"{_datasets(regime_datasets)} {'is' if regime_datasets == 1 else 'are'} too few for confidence intervals"


def _lead(t: pd.Series, runners: pd.DataFrame, regime_datasets: int) -> str:
    """How sure the lead of ``t`` over the runner-up (``runners``: every view tied second) is: whether their
    intervals overlap, or why it is not known."""
    r = runners.iloc[0]
    who = f"the runner-up is {r['view']}" if len(runners) == 1 else f"the runners-up are {_and(runners['view'])}"
    said = f"; {who} at {r['elo']:.0f}"
    if regime_datasets < MIN_BOOTSTRAP_DATASETS:
        return said + f", but {_too_few(regime_datasets)}, so how sure the lead is cannot be said"
    thin = next(
        (x for _, x in pd.concat([t.to_frame().T, runners]).iterrows() if not _resolved(x, regime_datasets)), None
    )
    if thin is not None:
        return (
            said + f", but {thin['view']} has its own results on only {_datasets(int(thin['native_datasets']))}, too "
            "few for a confidence interval, so how sure the lead is cannot be said"
        )
    intervals = ", ".join(f"{x['lower']:.0f}–{x['upper']:.0f}" for _, x in runners.iterrows())
    said += f" (95% interval{'s' if len(runners) > 1 else ''} {intervals})"
    if (t["lower"] <= runners["upper"]).any():
        return said + ": the intervals overlap, so the lead is not settled"
    return said + ": the intervals do not overlap"


def _elo_leader(tables: dict[str, pd.DataFrame], regime: str) -> list[Sentence]:
    lb = _leaderboard(tables, regime)
    d = regime_datasets(tables["coverage"], regime)
    top = _top(lb, "elo")
    among = f"among {len(lb)} compared methods on {_datasets(d)}"
    if len(top) == 1:
        t = top.iloc[0]
        interval = f" ({_interval(t, d)})" if _resolved(t, d) else ""
        rest = lb[lb["view"] != t["view"]]
        lead = _lead(t, _top(rest, "elo"), d) if len(rest) else ""
        return [("elo", f"In {regime}, {t['view']} leads Elo at {t['elo']:.0f}{interval} {among}{lead}.", "elo")]
    if d < MIN_BOOTSTRAP_DATASETS:
        intervals = f"; {_too_few(d)}"
    else:
        each = [
            f"{t['view']} {t['lower']:.0f}–{t['upper']:.0f}"
            if _resolved(t, d)
            else f"{t['view']} none (too few datasets)"
            for _, t in top.iterrows()
        ]
        intervals = f" (95% intervals: {', '.join(each)})"
    return [
        (
            "elo",
            f"In {regime}, {_and(top['view'])} tie for the lead in Elo at {top['elo'].iloc[0]:.0f} {among}{intervals}.",
            "elo",
        )
    ]


def _submissions(tables: dict[str, pd.DataFrame], regime: str) -> list[Sentence]:
    """Where each user submission ranks (the table's # column), with its Elo and the datasets it covers."""
    lb = _leaderboard(tables, regime)
    if "origin" not in lb.columns or not is_user(lb["origin"]).any():
        return []
    d = regime_datasets(tables["coverage"], regime)
    said = []
    for _, r in lb[is_user(lb["origin"])].iterrows():
        about = [f"Elo {r['elo']:.0f}"]
        if r["native_datasets"] < d:  # a submission is never imputed: what it lacks is missing
            about.append(f"results on {r['native_datasets']:.0f} of {_datasets(d)}")
        if _resolved(r, d) or d >= MIN_BOOTSTRAP_DATASETS:  # else the leader's sentence says no interval is one
            about.append(_interval(r, d))
        said.append(f"{r['view']} ranks {r['rank']:.0f} of {len(lb)} ({', '.join(about)})")
    subject = "the user submission" if len(said) == 1 else "of the user submissions,"
    return [("submitted", f"In {regime}, {subject} {_and(said)}.", "elo")]


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


def _front(tables: dict[str, pd.DataFrame], name: str, regime: str) -> pd.DataFrame:
    """A regime's frontier, cheapest first."""
    t = tables[name]
    return t[(t["regime"] == regime) & t["on_front"]].drop_duplicates("view").sort_values("mean_overhead")


def _gfms_on(front: pd.DataFrame) -> str:
    gfms = front.loc[front["kind"] != "supervised", "view"]
    return f"GFMs on it: {_and(gfms)}" if len(gfms) else "no GFM on it"


def _pareto_frontiers(tables: dict[str, pd.DataFrame], regime: str) -> list[Sentence]:
    """One sentence per cost: the endpoints' frontier, and what intermediate budgets add to it or take off (GFMs
    named where any GFM competes)."""
    gfms_compete = (_leaderboard(tables, regime)["kind"] != "supervised").any()
    said: list[Sentence] = []
    for cost, label in (("time", "workflow-time"), ("memory", "peak-memory")):
        ends, both = _front(tables, f"pareto_{cost}", regime), _front(tables, f"pareto_{cost}_budgets", regime)
        if ends.empty:
            said.append((f"pareto_{cost}", f"In {regime}, no method has a {label} cost.", f"pareto_{cost}"))
            continue
        sentence = f"In {regime}, the {label} Pareto frontier, cheapest first, is {_and(ends['view'])}"
        sentence += f" ({_gfms_on(ends)})" if gfms_compete else ""
        added = both.loc[~both["view"].isin(ends["view"]), "view"]
        dropped = ends.loc[~ends["view"].isin(both["view"]), "view"]
        changes = []
        if len(added):
            changes.append(f"add {_and(added)}")
        if len(dropped):
            changes.append(f"push {_and(dropped)} off it")
        sentence += f"; intermediate tuning budgets {' and '.join(changes) or 'do not change it'}"
        if gfms_compete and _gfms_on(both) != _gfms_on(ends):
            sentence += f" (then {_gfms_on(both)})"
        said.append((f"pareto_{cost}", sentence + ".", f"pareto_{cost}"))
    return said


def _points(x: float) -> str:
    return f"{x:.1f} point{'s' if round(abs(x), 1) != 1 else ''}"


def _signed(x: float) -> str:
    """A change in points with its sign, or "no change" where it rounds to nothing."""
    return "no change" if abs(x) < 0.05 else f"{'+' if x > 0 else '-'}{_points(abs(x))}"


def _tuning_gains(tables: dict[str, pd.DataFrame], regime: str) -> list[Sentence]:
    """The largest test gains of a full search over the default, and the methods it does not improve."""
    tr = tables["tuning_requirements"]
    tr = tr[tr["regime"] == regime].sort_values("tuning_gain", ascending=False)
    if not len(tr):
        return []
    gains, none = tr[tr["tuning_gain"] >= 0.05], tr[tr["tuning_gain"] < 0.05]
    best = [
        f"{r.method} (+{_points(r.tuning_gain)}; within 1 point of it from k = {r.k_within_1pt} of "
        f"{r.search_trials} trials)"
        for r in gains.head(3).itertuples()
    ]
    flat = [f"{r.method} ({_signed(r.tuning_gain)})" for r in none.sort_values("tuning_gain").itertuples()]
    if not best:
        sentence = f"In {regime}, a full search does not improve on the default configuration on test for any method: "
        return [("tuning", sentence + f"{_and(flat)}.", "tuning")]
    sentence = f"In {regime}, a full search improves on the default configuration on test most for {_and(best)}"
    if flat:
        sentence += f"; it does not improve {_and(flat[:3])}" + (f" or {len(flat) - 3} more" if len(flat) > 3 else "")
    return [("tuning", sentence + ".", "tuning")]


def _changes(val: float, test: float) -> str:
    """Mean changes of the validation and test scores in words: "raises validation by 1.5 points and test by 2.3
    points", "lowers validation ... and raises test ...", "leaves validation unchanged ..."."""

    def verb(x: float) -> str:
        return "leaves" if abs(x) < 0.05 else "raises" if x > 0 else "lowers"

    def by(x: float, what: str) -> str:
        return f"{what} unchanged" if abs(x) < 0.05 else f"{what} by {_points(abs(x))}"

    if verb(val) == verb(test):
        return f"{verb(val)} {by(val, 'validation')} and {by(test, 'test')}"
    return f"{verb(val)} {by(val, 'validation')} and {verb(test)} {by(test, 'test')}"


def _validation_test_gap(tables: dict[str, pd.DataFrame], regime: str) -> list[Sentence]:
    gap = tables["validation_test_gap"]
    gap = gap[(gap["regime"] == regime) & (gap["budget"] == "full")]
    if not len(gap):
        return []
    mean = gap["overstatement"].mean()
    worst = gap.sort_values("overstatement", ascending=False).iloc[0]
    verdict = (
        f"validation overstates what tuning does on test by {_points(mean)}"
        if mean >= 0.05
        else f"test comes out {_points(-mean)} better than validation suggests"
        if mean <= -0.05
        else "validation and test agree"
    )
    most = (
        f" (most overstated: {worst['method']}, by {_points(worst['overstatement'])})"
        if worst["overstatement"] >= 0.05
        else ""
    )
    methods = f"{len(gap)} method{'s' if len(gap) != 1 else ''}"
    moves = _changes(gap["val_gain"].mean(), gap["test_gain"].mean())
    return [
        (
            "validation_test_gap",
            f"In {regime}, a full search instead of the default configuration {moves} (mean over {methods}): "
            f"{verdict}{most}.",
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
    _submissions,
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
