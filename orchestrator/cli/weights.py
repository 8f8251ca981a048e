"""`orchestrator weights list|fetch`: the pretrained checkpoints of the GFM families, verified by sha256.

Files land in the weights directory (NODEGROUND_WEIGHTS, default
$NODEGROUND_CACHE/weights) at their upstream URL path without the scheme, the
layout the services read and containers mount read-only at /weights. Downloads
go through the same verified, mirror-aware fetch as datasets (NODEGROUND_MIRROR).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from contract.weights import (
    UNVERIFIED,
    WeightsEntry,
    WeightsError,
    load_weights_catalog,
    manifest_sha256,
    url_path,
    verify_file,
    weights_dir,
)
from orchestrator.cli.errors import UserError, user_errors
from orchestrator.data.fetch import FetchError, fetch

app = typer.Typer(help="Pretrained GFM weights: list the catalog, download and verify files.", no_args_is_help=True)
out = Console(width=200)


def _catalog():
    try:
        return load_weights_catalog()
    except WeightsError as exc:
        raise UserError(str(exc)) from None


def _status(entry: WeightsEntry) -> str:
    """missing, ok (verified), unverified (present, no digest to check it against) or MODIFIED."""
    path = weights_dir() / entry.relative_path
    if not path.is_file():
        return "missing"
    verdict = verify_file(entry, path, weights_dir())
    if verdict.problem:
        return "MODIFIED"
    return "ok" if verdict.official else UNVERIFIED


def verified_by(entry: WeightsEntry) -> str:
    """How a file of this entry is verified, as `weights list` says it; an unverified one says why."""
    kind, value = entry.integrity
    if kind == "sha256":
        return f"sha256 {value[:12]}"
    if kind == "git_blob_sha1":
        return f"git blob {value[:12]}"
    if kind == "sha256_from":
        return f"sha256 in {value}"
    return f"UNVERIFIED: {value}"


@app.command("list")
@user_errors
def list_command() -> None:
    """Show every catalogued checkpoint: id, model, license, how it is verified, and whether the local copy verifies."""
    catalog = _catalog()
    table = Table(title=f"{len(catalog)} weights files in {weights_dir()}")
    for column in ("id", "model", "version", "license", "verified by", "local"):
        table.add_column(column, overflow="fold")
    for entry in catalog.values():
        table.add_row(entry.id, entry.model, entry.version, entry.license, verified_by(entry), _status(entry))
    out.print(table)


def fetch_entry(entry: WeightsEntry, root: Path) -> None:
    """Download (or copy from the mirror) one entry's file and verify it by its integrity field.

    ``sha256_from``: the pinned manifest first, then the file against the digest it records.
    A Git blob id or an unverified entry: the file, then its check; a file that fails is removed.
    """
    dest = root / entry.relative_path
    kind, value = entry.integrity
    if kind == "sha256":
        fetch(entry.url, value, dest)
        return
    if kind == "sha256_from":
        manifest = root / url_path(value)
        fetch(value, UNVERIFIED, manifest, lock=False)  # pinned by its revision; the package checks its schema
        fetch(entry.url, manifest_sha256(manifest), dest)
        return
    fetch(entry.url, UNVERIFIED, dest, lock=False)
    verdict = verify_file(entry, dest, root)
    if verdict.problem:
        dest.unlink()
        raise FetchError(f"{entry.url} fails verification: {verdict.problem}")


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
            fetch_entry(entry, root)
        except (FetchError, WeightsError) as exc:
            failed.append(entry.id)
            out.print(f"{entry.id:20s} FAILED  {exc}")
            continue
        except OSError as exc:
            raise UserError(f"cannot write {dest}: {exc} (is the weights directory read-only?)") from None
        out.print(f"{entry.id:20s} {_status(entry)}  {verified_by(entry)}  {entry.license}  -> {dest}")
    if failed:
        raise UserError(f"{len(failed)} of {len(chosen)} weights files could not be fetched: {', '.join(failed)}")
