"""`orchestrator report`: aggregate a trial store into a static leaderboard site."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.trial_table.load import AnalysisInputError


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=2)


def _check_writable(out: Path) -> None:
    """Refuse an --out the site cannot be written into (AnalysisInputError), creating it when it is missing."""
    if out.exists() and not out.is_dir():
        raise AnalysisInputError(f"--out exists and is not a directory: {out}")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        raise AnalysisInputError(f"--out {out} cannot be written: {exc.strerror or exc}") from None


def report(
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            help="Trial store: SQLite file with a 'trials' table, or a .parquet / .csv export with the same columns "
            "(default: runs.sqlite, or none when --bundle is given).",
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Directory to write the site into (index.html, figures/, tables/).")
    ] = Path("report"),
    dataset_stats: Annotated[
        Path | None,
        typer.Option(
            "--dataset-stats",
            help=(
                "CSV of dataset properties (dataset, num_nodes, avg_degree, adjusted_homophily, feature_dim, "
                "feature_nonzero_fraction, num_classes, class_imbalance), overriding those the report computes for "
                "the datasets it can load offline."
            ),
        ),
    ] = None,
    anchor: Annotated[
        str | None,
        typer.Option(
            "--anchor",
            help="Method whose default configuration is fixed at 1000 Elo (a GFM: its selected setting). Default: gcn.",
        ),
    ] = None,
    bootstrap_rounds: Annotated[
        int, typer.Option("--bootstrap-rounds", min=1, help="Dataset-bootstrap resamples for Elo intervals.")
    ] = 200,
    near_complete: Annotated[
        float,
        typer.Option(
            "--near-complete",
            min=0.0,
            max=1.0,
            help="Minimum native dataset coverage of a method in the near-complete cohort.",
        ),
    ] = 0.9,
    title: Annotated[str, typer.Option("--title", help="Page title.")] = "NodeGround leaderboard",
    bundle: Annotated[
        list[Path],
        typer.Option(
            "--bundle", help="Submission bundle directory to merge as a user submission (repeatable; never imputed)."
        ),
    ] = [],  # noqa: B006
    reference: Annotated[
        str | None,
        typer.Option(
            "--reference",
            help="Rank the store's (and bundles') methods among the shipped reference records of this protocol "
            "(lite): the reference's cells only, coverage stated, costs of other hardware kept off the frontiers.",
        ),
    ] = None,
    methods: Annotated[
        str | None,
        typer.Option(
            "--methods",
            help="Comma-separated methods that compete: Elo, ranks, win rates and improvability are recomputed over "
            "exactly these (default: every method of the trials).",
        ),
    ] = None,
) -> None:
    """Write the leaderboard site: Elo, ranks, Pareto frontiers, tuning budgets, subgroups, and the data behind
    every figure."""
    import pandas as pd

    from orchestrator.analysis.site import build_report
    from orchestrator.analysis.subgroups import STATS_COLUMNS
    from orchestrator.reference import ReferenceError
    from orchestrator.reference.compare import with_reference
    from orchestrator.store import partial_note
    from orchestrator.submission.bundle import BundleError, load_bundle, merge_trials
    from orchestrator.trial_table.load import competing, load_trials

    t0 = time.perf_counter()
    if store is None and not bundle:
        store = Path("runs.sqlite")
    partial = partial_note(store) if store is not None else None
    try:
        _check_writable(out)  # before minutes of aggregation, not after
        if store is not None:
            trials = merge_trials(load_trials(store), bundle) if bundle else load_trials(store)
        else:
            trials = merge_trials(load_bundle(bundle[0]), bundle[1:])
        entries, compared = None, []
        if reference is not None:
            trials, comparison = with_reference(trials, reference, store, bundle)
            entries, compared = comparison.entries, comparison.notes
        if methods is not None:
            entrants = [m.strip() for m in methods.split(",") if m.strip()]
            trials = competing(trials, entrants)
            entries = None if entries is None else entries[entries["method"].isin(entrants)]
            compared.append(f"leaderboards recomputed over {len(entrants)} method(s): {', '.join(entrants)}")
        stats = None
        if dataset_stats is not None:
            if not dataset_stats.is_file():
                raise AnalysisInputError(f"dataset statistics not found: {dataset_stats}")
            stats = pd.read_csv(dataset_stats)
            missing = [c for c in STATS_COLUMNS if c not in stats.columns]
            if missing:
                raise AnalysisInputError(f"{dataset_stats} lacks column(s): {', '.join(missing)}")
        an = build_report(
            trials,
            out,
            dataset_stats=stats,
            anchor=anchor,
            rounds=bootstrap_rounds,
            near_complete_min=near_complete,
            title=title,
            notes=[*([partial] if partial else []), *compared],
            entries=entries,
        )
    except (AnalysisInputError, BundleError, ReferenceError) as exc:
        _fail(str(exc))
        return
    except (KeyError, ValueError) as exc:
        _fail(f"cannot aggregate {store or bundle[0]}: {exc}")
        return
    for note in an.notes:
        typer.echo(f"note: {note}")
    typer.echo(f"report written to {out / 'index.html'} ({len(trials):,} trials, {time.perf_counter() - t0:.1f}s)")
