"""`orchestrator datasets list|stats|splits|add`: thin commands over orchestrator.data."""

from __future__ import annotations

import csv
import math
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from orchestrator.cli.errors import UserError, user_errors
from orchestrator.cli.options import parse_regimes
from orchestrator.data.registry import add_user_dataset, is_builtin_name, list_tasks, load_dataset, resolve_name, tasks
from orchestrator.data.splits import ALL_REGIMES, export_splits
from orchestrator.data.stats import SUBGROUP_PROPERTIES, stats_rows
from orchestrator.data.user import accepted_names, graph_summary, remove_user_dataset, user_registry, user_rows

app = typer.Typer(
    help="The dataset catalog: list tasks, compute statistics, export splits, add or remove your own graph.",
    no_args_is_help=True,
)
out = Console(width=200)


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


@app.command("list")
@user_errors
def list_command() -> None:
    """Show the catalog's tasks (source, domain, size, classes, local availability), then your registered datasets."""
    rows = list_tasks()
    table = Table(title=f"{len(rows)} tasks")
    for column in ("name", "source", "domain", "task_type", "nodes", "classes", "local"):
        table.add_column(column, justify="right" if column in ("nodes", "classes") else "left")
    for row in rows:
        table.add_row(*(_fmt(row[c]) for c in ("name", "source", "domain", "task_type", "nodes", "classes", "local")))
    out.print(table)
    domains = Counter(r["domain"] for r in rows)
    nodes = [r["nodes"] for r in rows if r["nodes"]]
    out.print(
        "domains: "
        + ", ".join(f"{d} {n}" for d, n in domains.most_common())
        + f"; nodes {min(nodes):,} to {max(nodes):,}; available locally: {sum(r['local'] for r in rows)}"
    )
    users = user_rows()
    if not users:
        out.print("no user datasets registered (add one with `orchestrator datasets add FILE --name NAME`)")
        return
    mine = Table(title=f"{len(users)} user dataset(s)", caption="`orchestrator datasets remove NAME` unregisters one")
    for column in ("name", "task_type", "nodes", "classes", "local", "from"):
        mine.add_column(column, justify="right" if column in ("nodes", "classes") else "left")
    for row in users:
        mine.add_row(*(_fmt(row[c]) for c in ("name", "task_type", "nodes", "classes", "local", "from")))
    out.print(mine)


# The subgroup properties (the node count first), with the edge count beside the node count.
STATS_COLUMNS = ("dataset", *SUBGROUP_PROPERTIES[:1], "num_edges", *SUBGROUP_PROPERTIES[1:])


@app.command("stats")
@user_errors
def stats_command(
    names: Annotated[
        list[str] | None, typer.Argument(help="Datasets (default: every catalog task already available locally).")
    ] = None,
    all_tasks: Annotated[bool, typer.Option("--all", help="Every catalog task (downloads what is missing).")] = False,
    out_csv: Annotated[
        Path | None, typer.Option("--out", help="Write every statistic and subgroup to this CSV.")
    ] = None,
) -> None:
    """Print dataset statistics (and the 7 subgroup properties); optionally write them as CSV."""
    if names and all_tasks:
        raise UserError("give dataset names or --all, not both")
    if all_tasks:
        chosen = [t["name"] for t in tasks()]
    elif names:
        chosen = [resolve_name(n) for n in names]
    else:
        chosen = [r["name"] for r in list_tasks() if r["local"]]
        if not chosen:
            raise UserError("no catalog task is available locally yet; name datasets or pass --all to download them")
    rows = stats_rows(chosen)
    table = Table()
    for column in STATS_COLUMNS:
        table.add_column(column, justify="left" if column == "dataset" else "right")
    for row in rows:
        table.add_row(*(_fmt(row[c]) for c in STATS_COLUMNS))
    out.print(table)
    if out_csv is not None:
        out_csv.parent.mkdir(parents=True, exist_ok=True)
        with out_csv.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        out.print(f"wrote {len(rows)} rows to {out_csv} (subgroup properties: {', '.join(SUBGROUP_PROPERTIES)})")


@app.command("splits")
@user_errors
def splits_command(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    out_dir: Annotated[
        Path, typer.Option("--out", help="Directory to write <regime>_<index>.npz files and manifest.json into.")
    ],
    regimes: Annotated[
        str | None,
        typer.Option(help=f"Comma-separated regimes among {', '.join(ALL_REGIMES)} (default: all that apply)."),
    ] = None,
) -> None:
    """Export a dataset's splits (node ids per train/val/test) with their digests."""
    chosen = parse_regimes(regimes) if regimes else None
    graph = load_dataset(name)
    manifest = export_splits(graph, out_dir, chosen)
    for item in manifest:
        out.print(
            f"{item['regime']:>9} {item['index']}  train {item['train']:>7,}  val {item['val']:>7,}  test "
            f"{item['test']:>7,}  {item['digest'][:16]}"
        )
    out.print(f"wrote {len(manifest)} splits of {graph.name} to {out_dir}")


@app.command("add")
@user_errors
def add_command(
    file: Annotated[
        Path,
        typer.Argument(
            help=f"An .npz with arrays named ({accepted_names()}; edges 2 x E or E x 2, labels negative for unlabeled "
            "nodes) and optional masks (train_mask, val_mask, test_mask or the plural forms), or a saved PyG Data."
        ),
    ],
    name: Annotated[
        str,
        typer.Option("--name", help="Name to register it under (then usable as `orchestrator run --datasets NAME`)."),
    ],
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help=(
                "Register under a name already in use (stored results of the old graph stay apart: trials are keyed "
                "by content)."
            ),
        ),
    ] = False,
) -> None:
    """Validate and register your own graph."""
    graph = add_user_dataset(file, name, replace=replace)
    info = graph_summary(graph)
    unlabeled = info["unlabeled"]
    out.print(
        f"registered {graph.name}: {info['nodes']:,} nodes ({unlabeled:,} unlabeled"
        f"{', never in a split' if unlabeled else ''}), {info['edges']:,} edges, {info['features']} features, "
        f"{info['classes']} classes ({info['task_type']}); content hash {graph.content_hash[:16]}"
    )
    same = user_registry().get(graph.name, {}).get("same_content_as", [])
    if same:
        out.print(
            f"same content as {', '.join(same)}: the pretraining-overlap audit and GFM searches treat {graph.name} as "
            "that graph; its splits are seeded by this content (every registered dataset's are; a catalog "
            "task's by its name), so another registration of this file gets the same splits"
        )


@app.command("remove")
@user_errors
def remove_command(
    name: Annotated[str, typer.Argument(help="A registered user dataset (see `datasets list`).")],
) -> None:
    """Unregister one of your datasets and delete its canonical copy (your file and stored trials stay)."""
    if is_builtin_name(name):
        raise UserError(f"{name!r} is a built-in dataset; only user datasets can be removed")
    entry = remove_user_dataset(name.strip())
    out.print(
        f"removed {name} (content hash {entry['content_hash'][:16]}, from {entry.get('source')}); "
        "trials already in run stores are kept, keyed by that hash"
    )
