"""`orchestrator methods list`: the families and methods the manifests declare;
`orchestrator methods new NAME`: scaffold a method family that builds and passes validate unchanged."""

from __future__ import annotations

import datetime as _dt
import keyword
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from contract.cost import prior_problems
from contract.families import FAMILY_NAME, load_families, load_family
from orchestrator.cli.errors import UserError, user_errors

app = typer.Typer(help="List the method families, scaffold contributed methods.", no_args_is_help=True)

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "methods" / "templates" / "method"
_RESERVED = {"sdk", "templates", "serve", "families", "base", "test", "tests"}

# template file -> destination, relative to the repository root: the family is this one folder
# (its image builds from the shared docker/family/Dockerfile; compose and Swarm read its manifest).
FILES = {
    "__init__.py.tmpl": "methods/{name}/__init__.py",
    "method.py.tmpl": "methods/{name}/method.py",
    "model.py.tmpl": "methods/{name}/model.py",
    "manifest.toml.tmpl": "methods/{name}/manifest.toml",
    "README.md.tmpl": "methods/{name}/README.md",
}


def class_name(name: str) -> str:
    return name.capitalize() + "Method"


def render(text: str, name: str, date: str) -> str:
    return text.replace("{{name}}", name).replace("{{class_name}}", class_name(name)).replace("{{date}}", date)


def scaffold(name: str, root: Path = REPO, date: str | None = None) -> list[Path]:
    """Write the method's family folder under ``root``; refuse to overwrite."""
    if not FAMILY_NAME.fullmatch(name) or keyword.iskeyword(name) or name in _RESERVED:
        raise UserError(
            f"method name {name!r} must be 2-40 lowercase letters and digits, starting with a letter, "
            f"and not be one of {', '.join(sorted(_RESERVED))} (it becomes a Python module, an image and a service "
            "name)"
        )
    targets = {tmpl: root / dest.format(name=name) for tmpl, dest in FILES.items()}
    existing = [p for p in (root / "methods" / name, *targets.values()) if p.exists()]
    if existing:
        raise UserError(f"{existing[0]} already exists; choose another name or remove it")
    date = date or _dt.date.today().isoformat()
    written = []
    for tmpl, dest in targets.items():
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(render((TEMPLATES / tmpl).read_text(), name, date))
        written.append(dest)
    problems = prior_problems(load_family(root / "methods" / name))
    if problems:  # the family's resource checks and the price read it: say so now, not at its first fit
        raise UserError(f"methods/{name}/manifest.toml: its cost prior is malformed: {'; '.join(problems)}")
    return written


def method_rows(root: Path = REPO / "methods") -> list[dict[str, str]]:
    """One row per method, from the manifests alone (no model code is imported)."""
    return [
        {"method": method, "family": family.name, "kind": family.kind, "image": family.image}
        for family in load_families(root).values()
        for method in family.methods
    ]


@app.command("list")
@user_errors
def list_command() -> None:
    """Show every method with its family, kind (supervised or gfm) and the image that serves it."""
    rows = method_rows()
    table = Table(title=f"{len(rows)} methods in {len({r['family'] for r in rows})} families")
    for column in ("method", "family", "kind", "image"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["method"], row["family"], row["kind"], row["image"])
    Console(width=120).print(table)
    typer.echo("run them with: orchestrator run --methods NAME,... (make up starts every family's service)")


@app.command("new")
@user_errors
def new(
    name: Annotated[
        str, typer.Argument(help="Method (and family, module, image, service) name: lowercase letters and digits.")
    ],
    root: Annotated[Path, typer.Option(help="Repository root to write into.")] = REPO,
) -> None:
    """Scaffold methods/NAME/: an SDK subclass with its default config and search space (method.py), its network
    (model.py), the family manifest, a README."""
    for path in scaffold(name, root):
        typer.echo(f"created {path.relative_to(root) if path.is_relative_to(root) else path}")
    typer.echo(  # the contributor's path in order (docs/methods.md); `make describe` before the image, which copies it
        f"\nnext:\n  make describe\n  make image-{name}\n"
        f"  orchestrator validate nodeground/{name}\n"
        f"  orchestrator submit nodeground/{name} --out {name}-lite\n"
        f"  orchestrator report --bundle {name}-lite --reference lite --out report/"
    )
