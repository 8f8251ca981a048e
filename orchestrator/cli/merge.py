"""`orchestrator merge`: union run stores (shards of one sweep) into one, by trial key."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.errors import user_errors
from orchestrator.merge import CONFLICT_RULES, MergeReport, merge_stores

PARTIAL_HELP = (
    "Publish the merge even when planned trials are missing (shards still running or lost): the store is marked "
    "partial, and `report` and `show` say so."
)


@user_errors
def merge(
    stores: Annotated[list[Path], typer.Argument(help="Run stores to merge, in order of precedence for keep-first.")],
    into: Annotated[Path, typer.Option(help="The merged store; created if missing, extended if present.")],
    on_conflict: Annotated[
        str, typer.Option(help=f"When one trial key holds different results: {', '.join(CONFLICT_RULES)}.")
    ] = "refuse",
    partial: Annotated[bool, typer.Option("--partial", help=PARTIAL_HELP)] = False,
) -> None:
    """Merge stores by trial key: identical duplicates are skipped, conflicting ones refused unless a rule is picked.

    Shard stores (`run --shard I/N`) record their plan: a merge that would leave planned trials
    missing is refused (exit 2), naming the shards and counts, unless --partial is given.
    """
    echo_report(merge_stores(into, stores, on_conflict, partial), len(stores), into, on_conflict)


def echo_report(report: MergeReport, count: int, into: Path, on_conflict: str) -> None:
    """What a merge did, in a few lines: counts, dropped columns, superseded contents, completeness."""
    for where, columns in report.dropped.items():
        typer.echo(f"note: dropped unknown column(s) {', '.join(columns)} of {where} (not in the record schema)")
    for dataset, rows in report.superseded.items():
        typer.echo(f"note: {rows} row(s) of an earlier content of {dataset} moved to superseded_trials")
    resolved = f", {report.conflict_count} conflicting resolved by {on_conflict}" if report.conflicts else ""
    typer.echo(
        f"merged {count} store(s) into {into}: {report.added} trials added, {report.identical} identical duplicates "
        f"skipped, {report.replaced} replaced{resolved}, {report.services_added} service rows added"
    )
    state = report.completeness
    if state is None:
        typer.echo("no store recorded a sharded plan: completeness not checked")
    elif state.complete:
        typer.echo(f"complete: {state.summary()} ({state.shard_counts[0]} shard(s))")
    else:
        typer.echo(f"partial: {state.summary()}; {into} is marked partial")
