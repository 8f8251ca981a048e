"""`orchestrator verify BUNDLE --full RUN`: a Lite submission checked against a full-protocol rerun."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.errors import UserError, user_errors
from orchestrator.submission.bundle import BundleError
from orchestrator.submission.verify import verify

FAILED_EXIT = 1


@user_errors
def verify_command(
    bundle: Annotated[Path, typer.Argument(help="The Lite submission bundle (`orchestrator submit --protocol lite`).")],
    full: Annotated[
        Path, typer.Option("--full", help="The full-protocol rerun: its bundle (`submit --protocol paper`) or store.")
    ],
) -> None:
    """Check a Lite bundle against a full-protocol rerun; on a match mark it verified (exit 0), else exit 1."""
    if not full.exists():
        raise UserError(f"--full {full}: no such bundle or store")
    try:
        verdict = verify(bundle, full)
    except BundleError as exc:
        raise UserError(str(exc)) from None
    typer.echo(verdict.line())
    if not verdict.ok:
        raise typer.Exit(FAILED_EXIT)
