"""`orchestrator plan`: a sweep's cells and trials per shard, from data alone (no service, no dataset, no weights)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from contract.descriptions import GENERATOR, MethodSpec, description_path
from orchestrator.cli.errors import UserError, user_errors
from orchestrator.cli.run import ENDPOINT_HELP, TIME_LIMIT_HELP, build_plan, named_by_endpoint, parse_endpoints
from orchestrator.data.registry import resolve_name
from orchestrator.estimate import (
    EXTRAPOLATION,
    CellCost,
    CostModel,
    ShardCost,
    backtest,
    estimate_cells,
    fit_cost_model,
    read_records,
    shard_costs,
    summarise,
)
from orchestrator.plan import DEFAULT_TIME_LIMIT_S, Plan, described_specs, make_plan, stored_done
from orchestrator.services.client import MethodClient, ServiceUnavailable
from orchestrator.services.directory import resolve_methods


def plan_specs(methods: tuple[str, ...], endpoints: dict[str, list[str]]) -> dict[str, MethodSpec]:
    """Every method's spec, starting nothing: a running ``--endpoint``'s Describe where one names the method (as
    ``run`` does), else its family's committed description. UserError (one line) for a method with neither."""
    families = resolve_methods(list(methods))
    named = [m for m in methods if named_by_endpoint(m, families, endpoints)]
    specs = described_specs([m for m in methods if m not in named], families)
    for method in methods:
        if method in specs:
            continue
        family = families[method]
        if method not in named:
            raise UserError(
                f"family {family.name} (method {method}) has no description ({description_path(family.name)}); "
                f"write it with `{GENERATOR} {family.name}` (make describe), or name its running service with "
                f"--endpoint {family.name}=HOST:PORT"
            )
        address = (endpoints.get(method) or endpoints[family.name])[0]
        client = MethodClient(address)
        try:
            hosted = {s.name: s for s in client.describe(timeout=10.0)}
        except ServiceUnavailable as exc:
            raise UserError(f"--endpoint {address}: {exc}") from None
        finally:
            client.close()
        if method not in hosted:
            raise UserError(f"the service at {address} does not host {method!r} (it hosts {', '.join(hosted)})")
        specs[method] = hosted[method]
    return specs


HARDWARE_HELP = (
    "The hardware whose records price the plan: cpu, or a GPU's name as the records' host_json names it "
    "(default: the hardware most records ran on)."
)


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
def plan(
    methods: Annotated[str, typer.Option(help="Comma-separated method names, as for `run`.")],
    datasets: Annotated[str, typer.Option(help="Comma-separated dataset names, as for `run`.")],
    regimes: Annotated[str, typer.Option(help="Comma-separated label regimes, as for `run`.")] = "10/10/80",
    splits: Annotated[str, typer.Option(help="Comma-separated split indices (0-4).")] = "0",
    budget: Annotated[int, typer.Option(help="Trials per cell, as for `run`.")] = 1,
    shards: Annotated[int, typer.Option(help="Number of shards to list (as for `run --shard I/N`).")] = 1,
    store: Annotated[
        Path | None, typer.Option(help="A run store: count the planned trials it holds (those a rerun skips).")
    ] = None,
    time_limit: Annotated[float, typer.Option(help=TIME_LIMIT_HELP)] = DEFAULT_TIME_LIMIT_S,
    endpoint: Annotated[
        list[str], typer.Option(help=f"{ENDPOINT_HELP} Its Describe plans the methods it names (as in `run`).")
    ] = [],  # noqa: B006
    estimate: Annotated[
        bool, typer.Option("--estimate", help="Also price the plan: hours and peak memory fitted on --from stores.")
    ] = False,
    from_stores: Annotated[
        list[Path], typer.Option("--from", help="A run store whose records the estimate learns from (repeatable).")
    ] = [],  # noqa: B006
    hardware: Annotated[str | None, typer.Option(help=HARDWARE_HELP)] = None,
) -> None:
    """Print the cells and trials of a sweep per shard: from the families' descriptions and the catalog alone.

    No service starts and no dataset or weights file is read or downloaded; a family without a
    committed description is refused (exit 2) unless --endpoint names its running service. With
    --estimate --from STORE, also the estimated fit+predict hours and peak memory per method, regime and shard.
    """
    if shards < 1:
        raise UserError(f"--shards must be at least 1, got {shards}")
    if estimate and not from_stores:
        raise UserError("--estimate needs --from STORE: the records (of the hardware to price) it learns from")
    if from_stores and not estimate:
        raise UserError("--from is read by --estimate; add --estimate")
    sweep_plan = build_plan(methods, datasets, regimes, splits, budget, time_limit)
    computed = make_plan(sweep_plan, plan_specs(sweep_plan.methods, parse_endpoints(endpoint)))
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
    model = fit_cost_model(read_records(from_stores), hardware)
    cell_costs = estimate_cells(computed, model)
    console.print(shard_table(computed, shards, done, shard_costs(computed, model, shards, cell_costs)))
    console.print(estimate_table(computed, model, cell_costs))
    for line in estimate_notes(computed, model, cell_costs, from_stores):
        typer.echo(line)


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}" if value >= 10 else f"{value:,.2f}"


def _bytes(value: float | None) -> str:
    return "-" if value is None else f"{value / 2**30:,.2f} GiB"


def _interval(low: float | None, high: float | None, show) -> str:
    return "-" if low is None or high is None else f"{show(low)} - {show(high)}"


def estimate_table(computed: Plan, model: CostModel, costs: list[CellCost]) -> Table:
    """Per method and regime, per regime, and in total: trials, estimated hours and peak memory with intervals."""
    table = Table(title=f"estimated cost on {model.hardware} (fit + predict, service-side; 80% interval)")
    for column in ("method", "regime", "trials", "hours", "hours interval", "peak", "peak interval", "notes"):
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
    if row.estimated_trials < row.trials:
        notes.append(f"no records: {row.trials - row.estimated_trials:,} trials unpriced")
    if method != "all" and method in model.methods and model.methods[method].time.interval is None:
        notes.append(f"no interval (records on {len(model.methods[method].datasets)} dataset(s))")
    if row.extrapolated:
        notes.append(f"{row.extrapolated:,} cells beyond {EXTRAPOLATION:g}x the records' largest graph")
    if row.imputed:
        notes.append(f"{row.imputed:,} cells with imputed graph sizes")
    table.add_row(
        method,
        regime,
        f"{row.trials:,}",
        _hours(row.hours) if row.estimated_trials else "-",
        _interval(row.hours_low, row.hours_high, _hours),
        _bytes(row.peak),
        _interval(row.peak_low, row.peak_high, _bytes),
        "; ".join(notes),
        end_section=end_section,
    )


def estimate_notes(computed: Plan, model: CostModel, costs: list[CellCost], stores: list[Path]) -> list[str]:
    """What the estimate rests on and what it could not price, one line each."""
    fitted = [m for m in computed.sweep.methods if m in model.methods]
    lines = [
        f"hardware: {model.hardware} ({model.hardware_seen[model.hardware]:,} records in {len(stores)} store(s); "
        f"{', '.join(f'{m}: {len(model.methods[m].datasets)} datasets' for m in fitted) or 'no method of the plan'})"
    ]
    others = {h: n for h, n in model.hardware_seen.items() if h != model.hardware}
    if others:
        lines.append(
            f"also in the stores (choose with --hardware): {', '.join(f'{h} ({n:,})' for h, n in others.items())}"
        )
    missing = [m for m in computed.sweep.methods if m not in model.methods]
    if missing:
        cells = [c for c in computed.cells if c.method in missing]
        lines.append(
            f"no data for {', '.join(missing)} on {model.hardware}: {len(cells):,} cells, "
            f"{sum(c.trials for c in cells):,} trials not priced"
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
    hardware: Annotated[str | None, typer.Option(help=HARDWARE_HELP)] = None,
) -> None:
    """Check `plan --estimate` on records: fit on part of the stores, predict held-out whole datasets, print the error.

    Each method is fitted without the held-out datasets' records and predicts their trials (with their
    own configurations); the table compares the predicted and measured hours and peaks.
    """
    if not from_stores:
        raise UserError("--from STORE is required: the records to fit on and predict")
    held = [resolve_name(d) for d in holdout.split(",") if d.strip()]
    rows = backtest(read_records(from_stores), held or None, hardware)
    if not rows:
        raise UserError("nothing to back-test: no method has records both on and off the held-out datasets")
    table = Table(title="back-test: trials of held-out datasets, predicted by a model fitted without them")
    for column in (
        "method",
        "held out",
        "trials",
        "measured h",
        "predicted h",
        "predicted / measured",
        "in 80% interval",
        "peak measured",
        "peak predicted",
        "peak ratio",
    ):
        table.add_column(column, justify="left" if column in ("method", "held out") else "right")
    for row in rows:
        table.add_row(
            row.method,
            ", ".join(row.datasets) if held else f"each of {len(row.datasets)} in turn",
            f"{row.trials:,}",
            _hours(row.measured_hours),
            _hours(row.predicted_hours),
            f"{row.ratio:.2f}",
            f"{row.within}/{row.intervals}" if row.intervals else "-",
            _bytes(row.measured_peak),
            _bytes(row.predicted_peak),
            f"{row.peak_ratio:.2f}",
        )
    Console(width=200).print(table)
    ratios = [row.ratio for row in rows]
    peaks = [row.peak_ratio for row in rows]
    typer.echo(
        f"median predicted / measured over {len(rows)} methods: time {float(np.median(ratios)):.2f} "
        f"(range {min(ratios):.2f}-{max(ratios):.2f}), peak memory {float(np.median(peaks)):.2f} "
        f"(range {min(peaks):.2f}-{max(peaks):.2f})"
    )
