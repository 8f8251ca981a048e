"""`orchestrator verify BUNDLE --full RUN`: a Lite submission checked against a full-protocol rerun."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.errors import UserError, user_errors
from orchestrator.submission import verify as verify_module
from orchestrator.submission.bundle import BundleError
from orchestrator.submission.verify import VERIFIED, record, verify

FAILED_EXIT = 1


@user_errors
def verify_command(
    bundle: Annotated[Path, typer.Argument(help="The Lite submission bundle (`orchestrator submit --protocol lite`).")],
    full: Annotated[
        Path, typer.Option("--full", help="The full-protocol rerun: its bundle (`submit --protocol paper`) or store.")
    ],
    record_it: Annotated[
        bool,
        typer.Option(
            "--record",
            help=f"On a match, append the entry to this checkout's list of verified bundles ({VERIFIED.name}), for "
            "the maintainers to commit: only a committed entry marks a bundle verified.",
        ),
    ] = False,
) -> None:
    """Check a Lite bundle against a full-protocol rerun; on a match print its verified entry (exit 0), else exit 1."""
    if not full.exists():
        raise UserError(f"--full {full}: no such bundle or store")
    try:
        verdict = verify(bundle, full)
    except BundleError as exc:
        raise UserError(str(exc)) from None
    typer.echo(verdict.line())
    if not verdict.ok:
        raise typer.Exit(FAILED_EXIT)
    if record_it:
        typer.echo(f"recorded in {record(verdict)}; commit it to mark the bundle verified")
        return
    typer.echo(f"to mark it verified, the maintainers commit this entry to {verify_module.VERIFIED} (or --record):")
    typer.echo(verdict.entry().rstrip("\n"))
