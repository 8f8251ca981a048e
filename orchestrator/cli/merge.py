"""`orchestrator merge`: union run stores (shards of one sweep) into one, by trial key."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.errors import user_errors
from orchestrator.merge import CONFLICT_RULES, merge_stores


@user_errors
def merge(
    stores: Annotated[list[Path], typer.Argument(help="Run stores to merge, in order of precedence for keep-first.")],
    into: Annotated[Path, typer.Option(help="The merged store; created if missing, extended if present.")],
    on_conflict: Annotated[
        str, typer.Option(help=f"When one trial key holds different results: {', '.join(CONFLICT_RULES)}.")
    ] = "refuse",
) -> None:
    """Merge stores by trial key: identical duplicates are skipped, conflicting ones refused unless a rule is picked."""
    report = merge_stores(into, stores, on_conflict)
    resolved = f", {len(report.conflicts)} conflicting resolved by {on_conflict}" if report.conflicts else ""
    typer.echo(
        f"merged {len(stores)} store(s) into {into}: {report.added} trials added, {report.identical} identical "
        f"duplicates skipped, {report.replaced} replaced{resolved}, {report.services_added} service rows added"
    )
