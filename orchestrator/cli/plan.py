"""`orchestrator plan`: a sweep's cells and trials per shard, from data alone (no service, no dataset, no weights)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from orchestrator.cli.calibrate import run_probe
from orchestrator.cli.errors import UserError, user_errors
from orchestrator.cli.options import ENDPOINT_HELP, SERVICES_HELP, HardwareOpt, SweepFlags, flag_groups, parse_endpoints
from orchestrator.cli.specs import plan_specs
from orchestrator.data.registry import resolve_name
from orchestrator.plan import Plan, make_plan, stored_done
from orchestrator.price import (
    MIN_DATASETS,
    BacktestRow,
    CellCost,
    CostModel,
    ShardCost,
    backtest,
    calibration_store,
    estimate_cells,
    learn_cost_model,
    read_records,
    shard_costs,
    summarise,
)

ESTIMATE_HELP = (
    "Also price the plan: hours and peak memory, from the --from stores and this machine's cost probe (run first "
    "when no --from is given)."
)
FROM_HELP = "A run store whose records the estimate learns from (repeatable)."


@dataclass
class _ShardRow:
    cells: int = 0
    trials: int = 0
    done: int = 0
    datasets: dict[str, None] = field(default_factory=dict)  # in plan order


def shard_table(computed: Plan, shards: int, done: list[int] | None, costs: list[ShardCost] | None = None) -> Table:
    """Every shard's cells, trials, trials already stored, estimated hours and memory (given ``costs``), datasets."""
    assigned = computed.shards(shards)
    rows = [_ShardRow() for _ in range(shards)]
    for position, (cell, shard) in enumerate(zip(computed.cells, assigned, strict=True)):
        row = rows[shard]
        row.cells += 1
        row.trials += cell.trials
        row.done += done[position] if done is not None else 0
        row.datasets[cell.dataset] = None
    table = Table(title=f"{computed.total:,} trials in {len(computed.cells):,} cells, {shards} shard(s)")
    columns = [
        "shard",
        "cells",
        "trials",
        "done",
        *(["hours", "hours (high)", "memory (high)"] if costs else []),
        "datasets",
    ]
    for column in columns:
        table.add_column(column, justify="left" if column == "datasets" else "right")
    for index, row in enumerate(rows):
        priced = []
        if costs:
            cost = costs[index]
            priced = [_hours(cost.hours), _hours(cost.hours_high), _bytes(cost.peak_bytes_high or cost.peak_bytes)]
        table.add_row(
            f"{index}/{shards}",
            f"{row.cells:,}",
            f"{row.trials:,}",
            f"{row.done:,}" if done is not None else "-",
            *priced,
            ", ".join(row.datasets),
        )
    return table


@user_errors
@flag_groups
def plan(
    sweep: SweepFlags,
    shards: Annotated[int, typer.Option(help="Number of shards to list (as for `run --shard I/N`).")] = 1,
    store: Annotated[
        Path | None, typer.Option(help="A run store: count the planned trials it holds (those a rerun skips).")
    ] = None,
    endpoint: Annotated[
        list[str], typer.Option(help=f"{ENDPOINT_HELP} Its Describe plans the methods it names (as in `run`).")
    ] = [],  # noqa: B006
    estimate: Annotated[bool, typer.Option("--estimate", help=ESTIMATE_HELP)] = False,
    from_stores: Annotated[list[Path], typer.Option("--from", help=FROM_HELP)] = [],  # noqa: B006
    hardware: HardwareOpt = None,
    services: Annotated[str, typer.Option(help=f"For the probe: {SERVICES_HELP}")] = "auto",
) -> None:
    """Print the cells and trials of a sweep per shard: from the families' descriptions and the catalog alone.

    No service starts and no dataset or weights file is read or downloaded; a family without a
    committed description is refused (exit 2) unless --endpoint names its running service. With
    --estimate, also the estimated fit+predict hours and peak memory per method, regime and shard, from the
    --from stores and this machine's cost probe; with no --from, the probe runs first where it has not
    (`orchestrator calibrate`: services start for it).
    """
    if from_stores and not estimate:
        raise UserError("--from is read by --estimate; add --estimate")
    sweep_plan = sweep.plan()
    computed = make_plan(sweep_plan, plan_specs(sweep_plan.methods, parse_endpoints(endpoint)))
    computed.check_shards(shards)  # before anything of that size is made
    done = None
    if store is not None and store.exists():
        held = stored_done(store, computed)
        done = held.per_cell
        if held.unmatched_legacy:
            typer.echo(
                f"note: {held.unmatched_legacy:,} stored trial(s) carry keys from before catalog identities and "
                "their datasets are not processed on this machine; `orchestrator run` on this store upgrades them",
                err=True,
            )
    console = Console(width=160)
    if not estimate:
        console.print(shard_table(computed, shards, done))
        return
    stores = pricing_stores(sweep_plan.methods, from_stores, endpoint, services)
    model = learn_cost_model(read_records(stores), hardware)
    cell_costs = estimate_cells(computed, model)
    console.print(shard_table(computed, shards, done, shard_costs(computed, model, shards, cell_costs)))
    console.print(estimate_table(computed, model, cell_costs))
    for line in estimate_notes(computed, model, cell_costs, stores):
        typer.echo(line)


def pricing_stores(methods: tuple[str, ...], given: list[Path], endpoint: list[str], services: str) -> list[Path]:
    """The stores a price learns from: the given ones and this machine's probe store. With none given the probe
    runs first (it resumes: a method probed before costs nothing), so a fresh machine can price a sweep."""
    for path in given:
        if not path.exists():
            raise UserError(f"no run store at {path}")
    probe = calibration_store()
    if not given:  # the probe says in one line whether it has anything to run (`orchestrator calibrate`)
        run_probe(methods, probe, endpoint, services)
    return [*given, probe] if probe.exists() and probe not in given else list(given)


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}" if value >= 10 else f"{value:,.2f}"


def _bytes(value: float | None) -> str:
    return "-" if value is None else f"{value / 2**30:,.2f} GiB"


def _interval(low: float | None, high: float | None, show) -> str:
    return "-" if low is None or high is None else f"{show(low)} - {show(high)}"


def estimate_table(computed: Plan, model: CostModel, costs: list[CellCost]) -> Table:
    """Per method and regime, per regime, and in total: priced trials, hours and peak memory with intervals, and the
    trials left unpriced (never summed into the hours)."""
    table = Table(title=f"estimated cost on {model.hardware} (fit + predict, service-side; 80% intervals)")
    for column in ("method", "regime", "priced", "hours", "hours 80%", "peak", "peak 80%", "unpriced", "notes"):
        table.add_column(column, justify="left" if column in ("method", "regime", "notes") else "right")
    groups: dict[tuple[str, str], list[int]] = {}
    for position, cell in enumerate(computed.cells):
        groups.setdefault((cell.method, cell.regime), []).append(position)
    for regime in computed.sweep.regimes:
        for method in computed.sweep.methods:
            positions = groups.get((method, regime), [])
            _add_row(table, method, regime, positions, computed, model, costs)
        positions = [p for (_, r), ps in groups.items() if r == regime for p in ps]
        _add_row(table, "all", regime, positions, computed, model, costs, end_section=True)
    _add_row(table, "all", "all", list(range(len(computed.cells))), computed, model, costs)
    return table


def _add_row(
    table: Table,
    method: str,
    regime: str,
    positions: list[int],
    computed: Plan,
    model: CostModel,
    costs: list[CellCost],
    end_section: bool = False,
) -> None:
    row = summarise([computed.cells[p] for p in positions], [costs[p] for p in positions])
    notes = []
    learned = model.methods.get(method)
    if learned is not None and len(learned.datasets) < MIN_DATASETS:
        notes.append(f"records on {len(learned.datasets)} graph(s): a wide interval")
    if row.extrapolated:
        notes.append(f"{row.extrapolated:,} cells beyond the recorded sizes (interval widened)")
    if row.imputed:
        notes.append(f"{row.imputed:,} cells with imputed graph sizes")
    table.add_row(
        method,
        regime,
        f"{row.estimated_trials:,}",
        _hours(row.hours) if row.estimated_trials else "-",
        _interval(row.hours_low, row.hours_high, _hours),
        _bytes(row.peak),
        _interval(row.peak_low, row.peak_high, _bytes),
        f"{row.unpriced_trials:,}" if row.unpriced_trials else "-",
        "; ".join(notes),
        end_section=end_section,
    )


def estimate_notes(computed: Plan, model: CostModel, costs: list[CellCost], stores: list[Path]) -> list[str]:
    """What the price is for and rests on, its priced and unpriced totals (apart), one line each."""
    learned = [m for m in computed.sweep.methods if m in model.methods]
    records = sum(model.methods[m].records for m in learned)
    probe = sum(model.methods[m].calibration_records for m in learned)
    cores = f", on a host of {model.cores} cores" if model.cores else ""
    lines = [
        f"hardware: {model.hardware}{cores} ({model.hardware_seen[model.hardware]:,} records in {len(stores)} "
        f"store(s); the plan's methods: {records:,} records, {probe:,} of them from the cost probe)"
    ]
    others = {h: n for h, n in model.hardware_seen.items() if h != model.hardware}
    if others:
        lines.append(
            f"also in the stores (choose with --hardware): {', '.join(f'{h} ({n:,})' for h, n in others.items())}"
        )
    total = summarise(list(computed.cells), costs)
    lines.append(
        f"priced: {total.estimated_trials:,} trials, {_hours(total.hours)} h "
        f"(80% interval {_interval(total.hours_low, total.hours_high, _hours)} h), largest peak {_bytes(total.peak)}"
    )
    lines.append(
        "hours are the services' own (a CPU's are its CPU hours, an idle machine's wall hours for one-thread "
        "services; `run` runs one per core side by side)"
    )
    unpriced = [(c, k) for c, k in zip(computed.cells, costs, strict=True) if k.seconds is None]
    if unpriced:
        missing = [m for m in computed.sweep.methods if m not in model.methods]
        unsized = sorted({c.dataset for c, _ in unpriced if c.method in model.methods})
        why = [f"no records of {', '.join(missing)} on this hardware (`orchestrator calibrate --methods ...`)"] * bool(
            missing
        )
        why += [f"graph sizes unknown: {', '.join(unsized)}"] * bool(unsized)
        lines.append(
            f"unpriced: {sum(c.trials for c, _ in unpriced):,} trials in {len(unpriced):,} cells, not in the hours "
            f"above ({'; '.join(why)})"
        )
    imputed = sorted({c.dataset for c, k in zip(computed.cells, costs, strict=True) if k.imputed})
    if imputed:
        lines.append(
            "graph sizes imputed (the catalog does not publish them and they are not processed here): "
            + ", ".join(imputed)
        )
    return lines


@user_errors
def backtest_command(
    from_stores: Annotated[
        list[Path], typer.Option("--from", help="A run store of earlier records (repeatable).")
    ] = [],  # noqa: B006
    holdout: Annotated[
        str,
        typer.Option(help="Comma-separated datasets to hold out together (default: each dataset in turn)."),
    ] = "",
    by_size: Annotated[
        float | None,
        typer.Option(
            "--by-size",
            help="Size mode: fit on the smallest real graphs (and the cost probe's), predict the real graphs at least "
            "this many times larger in nodes, e.g. 5.",
        ),
    ] = None,
    hardware: HardwareOpt = None,
) -> None:
    """Check `plan --estimate` on records: fit on part of the stores, predict held-out whole datasets, print the error.

    Each method is fitted without the held-out datasets' records and predicts their trials (with their
    own configurations and the epochs it expects); the table compares the predicted and measured hours and peaks.
    --by-size asks what matters most: graphs far larger than those the model saw.
    """
    if not from_stores:
        raise UserError("--from STORE is required: the records to fit on and predict")
    if holdout and by_size is not None:
        raise UserError("give --holdout or --by-size, not both")
    if by_size is not None and not by_size > 1:
        raise UserError(f"--by-size must be a factor above 1, got {by_size:g}")
    held = [resolve_name(d) for d in holdout.split(",") if d.strip()]
    rows = backtest(read_records(from_stores), held or None, hardware, by_size)
    if not rows:
        raise UserError(
            "nothing to back-test: no method has records both on and off the held-out datasets"
            + (f" (no real graph is {by_size:g}x larger than the smallest ones)" if by_size else "")
        )
    Console(width=220).print(backtest_table(rows, bool(held), by_size))
    ratios = [row.ratio for row in rows]
    peaks = [row.peak_ratio for row in rows]
    typer.echo(
        f"median predicted / measured over {len(rows)} methods: time {float(np.median(ratios)):.2f} "
        f"(range {min(ratios):.2f}-{max(ratios):.2f}), peak memory {float(np.median(peaks)):.2f} "
        f"(range {min(peaks):.2f}-{max(peaks):.2f})"
    )


def backtest_table(rows: list[BacktestRow], named: bool, by_size: float | None) -> Table:
    mode = f"graphs at least {by_size:g}x larger than those fitted on" if by_size else "held-out datasets"
    table = Table(title=f"back-test: trials of {mode}, predicted by a model fitted without them")
    columns = [
        "method",
        "fitted on",
        "held out",
        "size factor",
        "trials",
        "measured h",
        "predicted h",
        "predicted / measured",
        "in 80% interval",
        "peak measured",
        "peak predicted",
        "peak ratio",
    ]
    for column in columns:
        table.add_column(column, justify="left" if column in ("method", "fitted on", "held out") else "right")
    for row in rows:
        low, high = row.size_factor
        table.add_row(
            row.method,
            ", ".join(row.learned_from) if by_size or named else f"{len(row.learned_from)} graphs",
            ", ".join(row.datasets) if by_size or named else f"each of {len(row.datasets)} in turn",
            f"{low:.1f}-{high:.1f}x" if by_size else "-",
            f"{row.trials:,}",
            _hours(row.measured_hours),
            _hours(row.predicted_hours),
            f"{row.ratio:.2f}",
            f"{row.within}/{row.intervals}" if row.intervals else "-",
            _bytes(row.measured_peak),
            _bytes(row.predicted_peak),
            f"{row.peak_ratio:.2f}",
        )
    return table
