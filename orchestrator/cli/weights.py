"""`orchestrator weights list|fetch`: the pretrained checkpoints of the GFM families, verified by sha256.

Files land in the weights directory (NODEGROUND_WEIGHTS, default
$NODEGROUND_CACHE/weights) at their upstream URL path without the scheme, the
layout the services read and containers mount read-only at /weights. Downloads
go through the same verified, mirror-aware fetch as datasets (NODEGROUND_MIRROR).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from contract.families import load_families
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
from orchestrator.data.fetch import ChecksumError, FetchError, fetch

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
        raise ChecksumError(f"{entry.url} fails verification: {verdict.problem}")


FAMILY_HELP = "Fetch what these families need (repeatable; a family without weights, such as gnn, needs nothing)."


@app.command("fetch")
@user_errors
def fetch_command(
    ids: Annotated[list[str] | None, typer.Argument(help="Weights ids or model names (default: all).")] = None,
    family: Annotated[list[str], typer.Option("--family", help=FAMILY_HELP)] = [],  # noqa: B006
) -> None:
    """Download (or copy from NODEGROUND_MIRROR) and verify weights into the weights directory.

    Ends with what each GFM family concerned has: ready, or which files it lacks. Exits 0 when every
    file and family named (ids, --family) is ready, or, with nothing named, when every file was either
    fetched or is simply unreachable from here (the families it serves are named as unable to run);
    1 when a named file or family is not ready, or any file fails its checksum.
    """
    catalog = _catalog()
    families = _families(family)
    chosen = _chosen(catalog, ids or [], families)
    root = weights_dir()
    unreachable: dict[str, str] = {}
    corrupt: list[str] = []
    for entry in chosen:  # one unreachable file does not stop the others
        dest = root / entry.relative_path
        try:
            fetch_entry(entry, root)
        except ChecksumError as exc:
            corrupt.append(entry.id)
            out.print(f"{entry.id:24s} FAILED  {exc}")
            continue
        except (FetchError, WeightsError) as exc:
            unreachable[entry.id] = str(exc)
            out.print(f"{entry.id:24s} FAILED  {_short(exc)}")
            continue
        except OSError as exc:
            raise UserError(f"cannot write {dest}: {exc} (is the weights directory read-only?)") from None
        out.print(f"{entry.id:24s} {_status(entry)}  {verified_by(entry)}  {entry.license}  -> {dest}")
    ready, lacking = _readiness(catalog, {e.family for e in chosen})
    if ready:
        out.print(f"ready: {', '.join(f'{f} ({n} file(s))' for f, n in ready.items())}")
    for fam, missing in lacking.items():
        out.print(f"cannot run: {fam} (lacks {', '.join(missing)}; `orchestrator weights fetch {' '.join(missing)}`)")
    if corrupt:
        raise typer.Exit(_fail(f"{len(corrupt)} weights file(s) failed verification: {', '.join(corrupt)}"))
    not_ready = [f for f in families if f in lacking] + [i for i in unreachable if ids and _named(catalog[i], ids)]
    if not_ready:
        raise typer.Exit(_fail(f"not ready: {', '.join(not_ready)} (unreachable from here)"))
    if lacking:
        out.print(
            f"{len(unreachable)} of {len(chosen)} weights files are unreachable from here (offline, and not in "
            "NODEGROUND_MIRROR): the families above cannot run until they are fetched; the others can"
        )


def _short(exc: FetchError | WeightsError) -> str:
    """A download failure without the network stack's chain: what was tried, and where the mirror was looked at."""
    text = str(exc)
    head, _, _ = text.partition(": ")
    _, sep, tail = text.rpartition("; ")
    return head + (f"; {tail}" if sep else "")


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def _families(names: list[str]) -> list[str]:
    """``--family`` values checked against the method folders (a family without weights is valid)."""
    known = set(load_families())
    unknown = [f for f in names if f not in known]
    if unknown:
        raise UserError(f"unknown family {', '.join(unknown)}; the families: {', '.join(sorted(known))}")
    return names


def _chosen(catalog: dict[str, WeightsEntry], ids: list[str], families: list[str]) -> list[WeightsEntry]:
    """The entries named by id, model or family; every entry when nothing is named."""
    unknown = [i for i in ids if i not in catalog and not any(e.model == i for e in catalog.values())]
    if unknown:
        raise UserError(f"unknown weights {', '.join(unknown)}; known: {', '.join(catalog)}")
    if not ids and not families:
        return list(catalog.values())
    return [e for e in catalog.values() if _named(e, ids) or e.family in families]


def _named(entry: WeightsEntry, ids: list[str]) -> bool:
    return entry.id in ids or entry.model in ids


def _readiness(catalog: dict[str, WeightsEntry], families: set[str]) -> tuple[dict[str, int], dict[str, list[str]]]:
    """(ready family -> file count, family -> ids it lacks): a family runs when every file of its catalog verifies."""
    ready: dict[str, int] = {}
    lacking: dict[str, list[str]] = {}
    for fam in sorted(families):
        entries = [e for e in catalog.values() if e.family == fam]
        missing = [e.id for e in entries if _status(e) not in ("ok", UNVERIFIED)]  # unverified: present, said so
        if missing:
            lacking[fam] = missing
        else:
            ready[fam] = len(entries)
    return ready, lacking
