"""The price of a plan's cells: each cell's hours and peak memory with their 80% intervals, summed by group and shard.

A plan of at most ``EXACT_TRIALS`` trials is priced trial by trial, each with its own configuration; a larger one
(the protocol's two million) prices a cell as its default plus (n - 1) times the mean over ``REFERENCE_CONFIGS``
sampled configurations (the terms are products, so a cell's size part and configuration part separate:
``Design.time_size_parts`` and ``Design.time_config_parts``), its peak as the (1 - 1/n) quantile of theirs. Sums of
cells add their bounds: the errors of one model do not average out across cells. The priced trials' hours and the
unpriced ones (no model for their method, no size for their graph) are never summed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from contract.space import capped_epochs
from orchestrator.plan import Cell, Plan, shard_index
from orchestrator.price.model import MethodModel, interval
from orchestrator.price.records import CostModel
from orchestrator.price.sizes import size_values, sizes_of
from orchestrator.sampling import config_sequence

EXACT_TRIALS = 100_000  # plans up to this size are priced trial by trial
REFERENCE_CONFIGS = 1000  # configurations per method that stand for a large plan's sampled ones
QUANTILES = np.linspace(0.0, 1.0, 101)


@dataclass(frozen=True)
class CellCost:
    """One cell's estimate; ``None`` fields: no model for its method, or no size for its graph."""

    seconds: float | None
    low: float | None
    high: float | None
    peak: float | None  # bytes
    peak_low: float | None
    peak_high: float | None
    extrapolated: bool  # the graph lies beyond the records' largest (its interval is widened)
    imputed: bool


@dataclass(frozen=True)
class _Reference:
    """One method's sampled configurations (``REFERENCE_CONFIGS``): the mean of their time columns' configuration
    parts and each one's memory columns' configuration parts (``Design``'s layout, factor and rescale included)."""

    configs: list[dict]
    time_means: np.ndarray  # per time column: mean over the configurations of factor x epochs x config part
    memory_parts: np.ndarray  # configurations x memory columns: each one's config part


def _reference(model: MethodModel, plan: Plan) -> _Reference:
    spec = plan.specs[model.method]
    configs = config_sequence(spec.default_config, spec.search_space, f"estimate|{model.method}", REFERENCE_CONFIGS)
    configs = _capped(configs, plan)[1:] or configs
    design = model.design
    epochs = model.expected_epochs(configs)
    time_means = model.weights.mean_config_parts(design, configs, epochs)
    memory_parts = np.asarray([design.memory_config_parts(c) for c in configs])
    return _Reference(configs, time_means, memory_parts)


def _capped(configs: list[dict], plan: Plan) -> list[dict]:
    cap = plan.sweep.epochs_cap
    return configs if cap is None else [{**c, **capped_epochs(c, cap)} for c in configs]


@dataclass(frozen=True)
class _Group:
    """A large plan's (method, dataset, regime): its default's time and peak, a sampled configuration's mean time,
    and the quantiles of the sampled configurations' peaks."""

    default_seconds: float
    default_peak: float
    mean_seconds: float
    peak_quantiles: np.ndarray


def _group(model: MethodModel, reference: _Reference, values: Mapping[str, float], default: list[dict]) -> _Group:
    design, weights = model.design, model.weights
    peaks = weights.peak_bytes(reference.memory_parts * design.memory_size_parts(values))
    return _Group(
        float(model.seconds([values], default)[0]),
        float(model.peak_bytes([values], default)[0]),
        weights.mean_seconds(design.time_size_parts(values), reference.time_means),
        np.quantile(peaks, QUANTILES),
    )


def estimate_cells(plan: Plan, model: CostModel) -> list[CellCost]:
    """Every cell's estimated seconds and peak bytes with their intervals, in cell order."""
    sizes = sizes_of(plan.sweep.datasets)
    exact = plan.total <= EXACT_TRIALS
    references: dict[str, _Reference] = {}
    groups: dict[tuple[str, str, str], _Group] = {}
    out = []
    for cell in plan.cells:
        method, size = model.methods.get(cell.method), sizes.get(cell.dataset)
        if method is None or size is None or cell.trials == 0:
            out.append(CellCost(None, None, None, None, None, None, False, size is None or size.imputed))
            continue
        values = size_values(size, cell.regime)
        if exact:
            configs = [t.config for t in plan.trials([cell])]
            seconds = float(method.seconds([values] * len(configs), configs).sum())
            peak = float(method.peak_bytes([values] * len(configs), configs).max())
        else:
            if cell.method not in references:
                references[cell.method] = _reference(method, plan)
            where = (cell.method, cell.dataset, cell.regime)
            if where not in groups:
                default = _capped([dict(plan.specs[cell.method].default_config)], plan)
                groups[where] = _group(method, references[cell.method], values, default)
            group = groups[where]
            seconds = group.default_seconds + (cell.trials - 1) * group.mean_seconds
            # the largest of n - 1 sampled configurations sits near the (1 - 1/n) quantile of their peaks
            largest = float(np.interp(1.0 - 1.0 / cell.trials, QUANTILES, group.peak_quantiles))
            peak = max(group.default_peak, largest) if cell.trials > 1 else group.default_peak
        time_distance, memory_distance = method.distance(values)
        low, high = interval(seconds, method.sigma_time, time_distance)
        peak_low, peak_high = interval(peak, method.sigma_memory, memory_distance)
        extrapolated = time_distance > 0 or memory_distance > 0
        out.append(CellCost(seconds, low, high, peak, peak_low, peak_high, extrapolated, size.imputed))
    return out


@dataclass(frozen=True)
class CostRow:
    """The estimate of a group of cells (a method in a regime, a regime, a shard, the plan): priced trials only."""

    trials: int  # every trial of the group
    estimated_trials: int  # trials of priced cells: the hours are theirs alone
    hours: float
    hours_low: float | None
    hours_high: float | None
    peak: float | None  # bytes, the largest cell's
    peak_low: float | None
    peak_high: float | None
    extrapolated: int  # cells
    imputed: int  # priced cells whose graph size was imputed

    @property
    def unpriced_trials(self) -> int:
        return self.trials - self.estimated_trials


def summarise(cells: Sequence[Cell], costs: Sequence[CellCost]) -> CostRow:
    """Sum a group's priced cells' hours (intervals summed bound by bound) and take their largest peak."""
    known = [(c, k) for c, k in zip(cells, costs, strict=True) if k.seconds is not None]
    priced = [k for _, k in known]
    return CostRow(
        trials=sum(c.trials for c in cells),
        estimated_trials=sum(c.trials for c, _ in known),
        hours=sum(k.seconds or 0.0 for k in priced) / 3600,
        hours_low=sum(k.low or 0.0 for k in priced) / 3600 if priced else None,
        hours_high=sum(k.high or 0.0 for k in priced) / 3600 if priced else None,
        peak=max((k.peak for k in priced if k.peak is not None), default=None),
        peak_low=max((k.peak_low for k in priced if k.peak_low is not None), default=None),
        peak_high=max((k.peak_high for k in priced if k.peak_high is not None), default=None),
        extrapolated=sum(k.extrapolated for k in priced),
        imputed=sum(k.imputed for k in priced),
    )


@dataclass(frozen=True)
class ShardCost:
    """What one shard of a plan needs: its trials, estimated compute hours and the memory its services hold at once.

    ``peak_bytes`` sums, over the shard's method families, the largest estimated peak among that
    family's cells (each family runs as one service process that lives through the shard); the
    orchestrator's own memory is not in it. ``*_high``: the interval's upper end.
    """

    trials: int
    estimated_trials: int
    hours: float
    hours_high: float | None
    peak_bytes: float | None
    peak_bytes_high: float | None


def shard_costs(
    plan: Plan, model: CostModel, count: int, cell_costs: Sequence[CellCost] | None = None
) -> list[ShardCost]:
    """The estimate of each of ``count`` shards (as ``run --shard I/N`` cuts them): for a batch scheduler's requests."""
    costs = list(cell_costs) if cell_costs is not None else estimate_cells(plan, model)
    total = plan.total
    groups: list[list[tuple[Cell, CellCost]]] = [[] for _ in range(count)]
    for cell, cost in zip(plan.cells, costs, strict=True):
        groups[shard_index(cell.start, count, total)].append((cell, cost))
    out = []
    for group in groups:
        row = summarise([c for c, _ in group], [k for _, k in group])
        peaks: dict[str, float] = {}
        highs: dict[str, float] = {}
        for cell, cost in group:
            if cost.peak is not None:
                family = plan.specs[cell.method].family
                peaks[family] = max(peaks.get(family, 0.0), cost.peak)
                highs[family] = max(highs.get(family, 0.0), cost.peak_high or cost.peak)
        out.append(
            ShardCost(
                row.trials,
                row.estimated_trials,
                row.hours,
                row.hours_high,
                sum(peaks.values()) if peaks else None,
                sum(highs.values()) if highs else None,
            )
        )
    return out
