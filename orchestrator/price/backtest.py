"""The price checked: learn from part of the records, predict held-out whole datasets, per method.

``orchestrator backtest`` prints predicted against measured hours and peaks: by default each real dataset in
turn; ``holdout`` some together; ``by_size`` the real graphs at least that many times larger than the small ones
learned from (``size_holdout``), which is how a price is used (docs/estimate.md#checking-the-price).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from contract.families import Family, load_families
from orchestrator.data.synthetic import CALIBRATION_PREFIX
from orchestrator.price.model import interval, learn_method_model
from orchestrator.price.records import EstimateError, choose_hardware, trial_costs
from orchestrator.price.sizes import Size, size_values, sizes_of


@dataclass(frozen=True)
class BacktestRow:
    method: str
    learned_from: tuple[str, ...]  # the real datasets the model learned from (calibration graphs besides)
    datasets: tuple[str, ...]  # predicted (held out)
    trials: int
    measured_hours: float
    predicted_hours: float
    within: int  # held-out datasets whose measured time lies in the interval of the model learned without them
    intervals: int
    measured_peak: float
    predicted_peak: float
    size_factor: tuple[float, float] = (1.0, 1.0)  # held-out graphs' nodes / the largest learned-from real graph's

    @property
    def ratio(self) -> float:
        """Predicted over measured time (1.0 is exact)."""
        return self.predicted_hours / self.measured_hours if self.measured_hours > 0 else math.nan

    @property
    def peak_ratio(self) -> float:
        return self.predicted_peak / self.measured_peak if self.measured_peak > 0 else math.nan


def size_holdout(costs: pd.DataFrame, sizes: Mapping[str, Size], factor: float) -> tuple[list[str], list[str]]:
    """The size back-test's split of the real graphs: learned from those no larger than twice the smallest, held out
    those at least ``factor`` times larger (in nodes) than every one learned from."""
    real = {d for d, c in zip(costs["dataset"], costs["calibration"], strict=True) if not c and d in sizes}
    ordered = sorted(real, key=lambda d: sizes[d].nodes)
    if not ordered:
        return [], []
    smallest = sizes[ordered[0]].nodes
    learned = [d for d in ordered if sizes[d].nodes <= 2 * smallest]
    largest = max(sizes[d].nodes for d in learned)
    return learned, [d for d in ordered if sizes[d].nodes >= factor * largest]


def backtest(
    records: pd.DataFrame,
    holdout: Sequence[str] | None = None,
    hardware: str | None = None,
    by_size: float | None = None,
) -> list[BacktestRow]:
    """Learn from part of the records, predict the rest, per method: the time and peak of held-out whole datasets.

    ``holdout``: the datasets to hold out together; ``by_size``: hold out the real graphs at least that many times
    larger than the small ones learned from (``size_holdout``), the calibration graphs kept in; by default each
    real dataset in turn (learned from all others). A held-out trial is predicted with its own configuration and the
    epochs the model expects (not the ones it ran).
    """
    costs = trial_costs(records)
    if costs.empty:
        raise EstimateError("the given stores hold no trial that ran")
    chosen = choose_hardware({str(k): int(v) for k, v in costs["hardware"].value_counts().items()}, hardware)
    costs = costs[costs["hardware"] == chosen]
    sizes = sizes_of(costs["dataset"])
    costs = costs[costs["dataset"].isin(sizes)]
    if by_size is not None:
        learned_from, held = size_holdout(costs, sizes, by_size)
        keep = costs["dataset"].isin(learned_from) | costs["dataset"].isin(held) | costs["calibration"]
        costs = costs[keep]
        folds = [tuple(held)] if held else []
    elif holdout:
        folds = [tuple(holdout)]
    else:
        folds = [(d,) for d in dict.fromkeys(costs.loc[~costs["calibration"].astype(bool), "dataset"])]
    families = load_families()
    rows = []
    for method, part in costs.groupby("method", sort=True):
        row = _backtest_method(str(method), part.reset_index(drop=True), folds, sizes, families)
        if row is not None:
            rows.append(row)
    return rows


def _backtest_method(
    method: str,
    part: pd.DataFrame,
    folds: Sequence[tuple[str, ...]],
    sizes: Mapping[str, Size],
    families: Mapping[str, Family],
) -> BacktestRow | None:
    measured_s = predicted_s = measured_peak = predicted_peak = 0.0
    trials = within = intervals = 0
    held_names: list[str] = []
    learned_names: set[str] = set()
    factors: list[float] = []
    for fold in folds:
        held = part["dataset"].isin(fold).to_numpy()
        if not held.any() or held.all():
            continue
        model = learn_method_model(part[~held], sizes, families)
        if model is None:
            continue
        test = part[held]
        learned_real = [d for d in model.datasets if not d.startswith(CALIBRATION_PREFIX)]
        learned_names.update(learned_real)
        values = [size_values(sizes[d], r) for d, r in zip(test["dataset"], test["regime"], strict=True)]
        configs = list(test["config"])
        predicted = model.seconds(values, configs)
        peaks = model.peak_bytes(values, configs)
        trials += len(test)
        measured_s += float(test["seconds"].sum())
        predicted_s += float(predicted.sum())
        measured_peak = max(measured_peak, float(test[model.memory_kind].max()))
        predicted_peak = max(predicted_peak, float(peaks.max()))
        largest = max((sizes[d].nodes for d in learned_real), default=0.0)
        for name in dict.fromkeys(test["dataset"]):
            held_names.append(name)
            one = (test["dataset"] == name).to_numpy()
            if largest:
                factors.append(sizes[name].nodes / largest)
            low, high = interval(
                float(predicted[one].sum()), model.sigma_time, model.distance(values[int(np.argmax(one))])[0]
            )
            intervals += 1
            within += low <= float(test["seconds"].to_numpy()[one].sum()) <= high
    if not trials:
        return None
    return BacktestRow(
        method,
        tuple(sorted(learned_names, key=lambda d: sizes[d].nodes)),
        tuple(held_names),
        trials,
        measured_s / 3600,
        predicted_s / 3600,
        within,
        intervals,
        measured_peak,
        predicted_peak,
        (min(factors), max(factors)) if factors else (1.0, 1.0),
    )
