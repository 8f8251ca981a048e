"""`orchestrator weights list|fetch`: the pretrained checkpoints of the GFM families, verified by sha256.

Files land in the weights directory (NODEGROUND_WEIGHTS, default
$NODEGROUND_CACHE/weights) at their upstream URL path without the scheme, the
layout the services read and containers mount read-only at /weights. Downloads
go through the same verified, mirror-aware fetch as datasets (NODEGROUND_MIRROR).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from contract.weights import WeightsError, file_sha256, load_weights_catalog, weights_dir
from orchestrator.cli.errors import UserError, user_errors
from orchestrator.data.fetch import FetchError, fetch

app = typer.Typer(help="Pretrained GFM weights: list the catalog, download and verify files.", no_args_is_help=True)
out = Console(width=200)


def _catalog():
    try:
        return load_weights_catalog()
    except WeightsError as exc:
        raise UserError(str(exc)) from None


def _status(entry) -> str:
    path = weights_dir() / entry.relative_path
    if not path.is_file():
        return "missing"
    return "ok" if file_sha256(path) == entry.sha256 else "MODIFIED"


@app.command("list")
@user_errors
def list_command() -> None:
    """Show every catalogued checkpoint: id, model, license, and whether the local copy verifies."""
    catalog = _catalog()
    table = Table(title=f"{len(catalog)} weights files in {weights_dir()}")
    for column in ("id", "model", "version", "license", "sha256", "local"):
        table.add_column(column)
    for entry in catalog.values():
        table.add_row(entry.id, entry.model, entry.version, entry.license, entry.sha256[:12], _status(entry))
    out.print(table)


@app.command("fetch")
@user_errors
def fetch_command(
    ids: Annotated[list[str] | None, typer.Argument(help="Weights ids or model names (default: all).")] = None,
) -> None:
    """Download (or copy from NODEGROUND_MIRROR) and verify weights into the weights directory."""
    catalog = _catalog()
    chosen = list(catalog.values())
    if ids:
        chosen = [e for e in catalog.values() if e.id in ids or e.model in ids]
        unknown = [i for i in ids if i not in catalog and not any(e.model == i for e in catalog.values())]
        if unknown:
            raise UserError(f"unknown weights {', '.join(unknown)}; known: {', '.join(catalog)}")
    root = weights_dir()
    failed = []
    for entry in chosen:  # one unreachable file does not stop the others
        dest = root / entry.relative_path
        try:
            fetch(entry.url, entry.sha256, dest)
        except FetchError as exc:
            failed.append(entry.id)
            out.print(f"{entry.id:20s} FAILED  {exc}")
            continue
        except OSError as exc:
            raise UserError(f"cannot write {dest}: {exc} (is the weights directory read-only?)") from None
        out.print(f"{entry.id:20s} ok  {entry.sha256[:12]}  {entry.license}  -> {dest}")
    if failed:
        raise UserError(f"{len(failed)} of {len(chosen)} weights files could not be fetched: {', '.join(failed)}")
