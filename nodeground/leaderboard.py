"""A store's methods ranked among the shipped reference methods, as DataFrames: `orchestrator report --reference`
without the site.

The trials are combined as the report combines them (``orchestrator.reference.compare.with_reference``: the
reference's cells only, its methods re-measured in the store replacing their shipped rows, costs of other hardware
left out) and every table is the report's own (``orchestrator.analysis.tables.compute_analysis``): Elo with its
bootstrap interval, mean rank, win rates, improvability and overheads per regime, recomputed over whoever competes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from orchestrator.analysis.elo import BOOTSTRAP_ROUNDS
from orchestrator.analysis.tables import compute_analysis
from orchestrator.reference.compare import with_reference
from orchestrator.trial_table.load import competing, load_trials


@dataclass(frozen=True)
class Leaderboard:
    """``leaderboard``: per regime, one row per view (a method's tuned result, its default, its tuning budgets):
    rank, Elo and its interval, mean rank, win rate, improvability, overheads, coverage, kind and origin;
    ``results``: the selected result of every view on every dataset, regime and split (imputed ones flagged);
    ``entries``: each competing method's standing (reference, submitted, verified) and the reference cells it lacks;
    ``notes``: what the comparison left out and why; ``tables``: every table the report computes."""

    leaderboard: pd.DataFrame
    results: pd.DataFrame
    entries: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def compare(
    store: str | Path,
    reference: str = "lite",
    methods: Sequence[str] | None = None,
    rounds: int = BOOTSTRAP_ROUNDS,
    anchor: str | None = None,
) -> Leaderboard:
    """The methods of run store ``store`` (SQLite) ranked among the shipped ``reference``
    records; ``methods`` keeps only those entrants (ratings depend on who competes); ``rounds`` bootstrap resamples
    give each Elo its interval; ``anchor`` names the method whose default sits at 1000 Elo (default: gcn)."""
    path = Path(store)
    trials, comparison = with_reference(load_trials(path), reference, path, [])
    entries, notes = comparison.entries, list(comparison.notes)
    if methods is not None:
        trials = competing(trials, list(methods))
        entries = entries[entries["method"].isin(list(methods))]
    an = compute_analysis(trials, anchor=anchor, rounds=rounds, compute_stats=False)
    return Leaderboard(
        leaderboard=an.tables["leaderboard"],
        results=an.tables["results"],
        entries=entries.reset_index(drop=True),
        notes=[*notes, *an.notes],
        tables=an.tables,
    )
