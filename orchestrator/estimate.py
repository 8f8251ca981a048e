"""What a sweep will cost before it runs: fit+predict hours and peak memory, estimated from earlier records.

The model, one per method and hardware (the device a record's ``host_json`` names: ``cpu``, or a
GPU's name): a trial's log seconds (service-side fit plus predict) and log peak bytes (the larger of
fit and predict; GPU bytes where the method used the GPU) are linear in the dataset's log nodes,
log edges, log features and log classes, the regime's train fraction, and the configuration (numbers
as logs where the space is positive, flags as 0/1, choices one-hot), fitted by ridge regression on
standardised features; time, which sweeps add up, is predicted as its expectation (the log model's
median times Duan's smearing factor). The ridge penalty is chosen by leave-one-dataset-out error on the records,
and those held-out errors give the interval: the 10th to 90th percentile of measured / predicted
per held-out dataset (an 80% interval; none with records on fewer than three datasets).

Why this form: a sweep's next datasets are graphs the records never saw, so the model must carry
over across datasets (hence whole datasets held out, never random trials) and extrapolate in size,
which a product of powers does more soberly than a flexible learner fitted to ten graphs.

A plan's cells are priced without building their configurations (about two million at protocol
scale): per method, the configuration term is averaged over a reference sequence of its space
(``REFERENCE_CONFIGS`` draws; the default's own term is exact), so a cell of n trials costs
exp(dataset term) x (default + (n - 1) x mean of the others). Dataset sizes come from the catalog
(``dataset_size``: no download); a size the catalog does not publish and this machine has not
processed is imputed from the catalog's median degree or feature count, and the cell says so.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from orchestrator.data.registry import DatasetError, dataset_size, tasks
from orchestrator.data.splits import REGIMES
from orchestrator.host import hardware_of
from orchestrator.plan import Cell, Plan, shard_index
from orchestrator.records import STATUS_UNAVAILABLE
from orchestrator.sampling import config_sequence
from orchestrator.store import read_trial_columns

PENALTIES = (0.01, 0.1, 1.0, 10.0)  # ridge penalties tried (times the number of records)
MIN_DATASETS_FOR_INTERVAL = 3
INTERVAL = (0.1, 0.9)  # quantiles of held-out measured / predicted: an 80% interval
REFERENCE_CONFIGS = 1000  # configurations per method that stand for a cell's sampled ones
EXTRAPOLATION = 2.0  # a cell whose graph is this many times larger than every graph in the records is extrapolated
DATA_FEATURES = ("log_nodes", "log_edges", "log_features", "log_classes", "train_fraction")


class EstimateError(ValueError):
    """Records that cannot support an estimate (none on the asked hardware, none that ran)."""


def train_fraction(regime: str) -> float:
    """The share of labeled nodes a regime trains on (NaN for ``public``: it depends on the dataset)."""
    return REGIMES[regime][0] if regime in REGIMES else math.nan


# ---- features --------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    nodes: float
    edges: float
    features: float
    classes: float
    imputed: bool  # some field was not known without the data and was imputed from the catalog


def _catalog_medians() -> tuple[float, float]:
    """The catalog's median average degree and median feature count, for sizes it does not publish."""
    degrees = [t["edges"] / t["nodes"] for t in tasks() if t.get("edges") and t.get("nodes")]
    features = [t["features"] for t in tasks() if t.get("features")]
    return float(np.median(degrees)), float(np.median(features))


def sizes_of(datasets: Iterable[str]) -> dict[str, Size]:
    """Each dataset's size (``dataset_size``), missing figures imputed; a name that no longer resolves is left out."""
    degree, features = _catalog_medians()
    out = {}
    for name in dict.fromkeys(datasets):
        try:
            size = dataset_size(name)
        except (DatasetError, OSError, ValueError):
            continue
        if size.nodes is None or size.classes is None:
            continue
        out[name] = Size(
            float(size.nodes),
            float(size.edges if size.edges is not None else degree * size.nodes),
            float(size.features if size.features is not None else features),
            float(size.classes),
            size.edges is None or size.features is None,
        )
    return out


def _data_row(size: Size, regime: str) -> list[float]:
    return [
        math.log(size.nodes),
        math.log1p(size.edges),
        math.log(max(size.features, 1.0)),
        math.log(size.classes),
        train_fraction(regime),
    ]


@dataclass(frozen=True)
class ConfigEncoding:
    """How one method's configurations become numbers, learned from the configurations its records ran."""

    logs: tuple[str, ...]  # numeric keys, every value seen positive: log(value)
    numbers: tuple[str, ...]  # other numeric keys and flags: the value (True = 1)
    choices: tuple[tuple[str, str], ...]  # (key, category): 1 when the key has that category

    @classmethod
    def learn(cls, configs: Sequence[Mapping]) -> ConfigEncoding:
        values: dict[str, list] = {}
        for config in configs:
            for key, value in config.items():
                values.setdefault(key, []).append(value)
        logs: list[str] = []
        numbers: list[str] = []
        choices: list[tuple[str, str]] = []
        for key in sorted(values):
            seen = values[key]
            if len({json.dumps(v) for v in seen}) < 2:
                continue  # constant in the records: nothing to learn from it
            if all(isinstance(v, (int, float)) for v in seen):  # bools count as numbers (flags)
                positive = all(not isinstance(v, bool) and v > 0 for v in seen)
                (logs if positive else numbers).append(key)
            else:
                counts = pd.Series([str(v) for v in seen]).value_counts()
                choices.extend((key, category) for category in sorted(counts.index[1:]))  # the commonest is the base
        return cls(tuple(logs), tuple(numbers), tuple(choices))

    @property
    def names(self) -> list[str]:
        return [*self.logs, *self.numbers, *(f"{k}={c}" for k, c in self.choices)]

    def encode(self, configs: Sequence[Mapping]) -> np.ndarray:
        """One row per configuration; a value the encoding cannot read is NaN (the model takes the records' mean)."""
        rows = [
            [_log(config.get(k)) for k in self.logs]
            + [_number(config.get(k)) for k in self.numbers]
            + [float(str(config.get(k)) == c) for k, c in self.choices]
            for config in configs
        ]
        return np.asarray(rows, dtype=float).reshape(len(rows), len(self.names))


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else math.nan


def _log(value: object) -> float:
    number = _number(value)
    return math.log(number) if number > 0 else math.nan


# ---- one method's model ------------------------------------------------------


@dataclass
class _Ridge:
    """Ridge regression on centred columns; a NaN cell (an unknown value) counts as the column's mean.

    The dataset's columns are logs already, and stay in their units: the penalty then keeps a size
    the records barely vary (ten graphs of one size) from scaling a far larger graph into any number,
    and new graphs do extrapolate along the sizes the records span, since that is what an estimate is for.
    The configuration's columns (``bounded``) are standardised and clipped to the range the records span:
    a configuration beyond every recorded one is priced as the nearest recorded value.
    """

    mean: np.ndarray
    scale: np.ndarray
    low: np.ndarray  # -inf where a column is not bounded
    high: np.ndarray
    intercept: float
    coef: np.ndarray
    # Duan's smearing factor, the mean of exp(residual): exp(prediction) is a median, and a sweep's hours are a
    # sum, whose expectation under log-normal noise is the median times this (without it sums come out low).
    smear: float = 1.0

    @classmethod
    def fit(cls, x: np.ndarray, y: np.ndarray, penalty: float, bounded: np.ndarray) -> _Ridge:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column: its mean is NaN, dropped below
            mean, scale = np.nanmean(x, axis=0), np.nanstd(x, axis=0)
            low = np.where(bounded, np.nanmin(x, axis=0), -np.inf)
            high = np.where(bounded, np.nanmax(x, axis=0), np.inf)
        mean = np.where(np.isfinite(mean), mean, 0.0)
        scale = np.where(np.isfinite(scale) & (scale > 1e-12), scale, np.inf)  # a constant column drops out
        scale = np.where(bounded | ~np.isfinite(scale), scale, 1.0)
        model = cls(mean, scale, np.nan_to_num(low, nan=-np.inf), np.nan_to_num(high, nan=np.inf), 0.0, np.zeros(0))
        z = model.standardise(x)
        model.intercept = float(y.mean())
        gram = z.T @ z + penalty * len(y) * np.eye(z.shape[1])
        model.coef = np.linalg.solve(gram, z.T @ (y - y.mean()))
        model.smear = float(np.mean(np.exp(y - model.predict(x))))
        return model

    def standardise(self, x: np.ndarray) -> np.ndarray:
        z = (np.clip(x, self.low, self.high) - self.mean) / self.scale
        return np.where(np.isfinite(z), z, 0.0)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.intercept + self.standardise(x) @ self.coef

    def expected(self, x: np.ndarray) -> np.ndarray:
        """The expected value (not the log's): what sums of trials add up to."""
        return np.exp(self.predict(x)) * self.smear


@dataclass
class Target:
    """One quantity of one method: its fitted model and the interval its held-out datasets give."""

    ridge: _Ridge
    penalty: float
    interval: tuple[float, float] | None  # multipliers of a prediction (low, high); None: too few datasets
    held_out_ratios: list[float] = field(default_factory=list)  # measured / predicted per held-out dataset


@dataclass
class MethodModel:
    method: str
    hardware: str
    memory_kind: str  # gpu or cpu bytes
    encoding: ConfigEncoding
    time: Target
    memory: Target
    datasets: tuple[str, ...]
    records: int
    largest: tuple[float, float]  # the largest nodes and edges among the records' graphs

    def features(self, rows: list[list[float]], configs: Sequence[Mapping]) -> np.ndarray:
        return np.hstack(
            [np.asarray(rows, dtype=float).reshape(len(rows), len(DATA_FEATURES)), self.encoding.encode(configs)]
        )

    def seconds(self, x: np.ndarray) -> np.ndarray:
        return self.time.ridge.expected(x)

    def peak_bytes(self, x: np.ndarray) -> np.ndarray:
        return np.exp(self.memory.ridge.predict(x))


def _fit_target(
    x: np.ndarray, y: np.ndarray, groups: np.ndarray, total: bool, penalties: Sequence[float] = PENALTIES
) -> Target:
    """Fit one target, the penalty chosen by leave-one-dataset-out error; ``total``: datasets compare by the sum of
    their trials (time), else by their largest trial (memory)."""
    names = list(dict.fromkeys(groups))
    bounded = np.arange(x.shape[1]) >= len(DATA_FEATURES)  # the configuration's columns
    best: tuple[float, float, list[float]] | None = None
    if len(names) >= 2:
        for penalty in penalties:
            ratios = []
            for name in names:
                held = groups == name
                model = _Ridge.fit(x[~held], y[~held], penalty, bounded)
                predicted = model.expected(x[held]) if total else np.exp(model.predict(x[held]))
                measured = np.exp(y[held])
                pair = (measured.sum(), predicted.sum()) if total else (measured.max(), predicted.max())
                ratios.append(float(pair[0] / pair[1]))
            error = float(np.mean(np.log(ratios) ** 2))
            if best is None or error < best[0]:
                best = (error, penalty, ratios)
    penalty, ratios = (best[1], best[2]) if best is not None else (penalties[-1], [])
    interval = None
    if len(names) >= MIN_DATASETS_FOR_INTERVAL:
        low, high = np.quantile(ratios, INTERVAL)
        interval = (float(low), float(high))
    return Target(_Ridge.fit(x, y, penalty, bounded), penalty, interval, ratios)


RECORD_COLUMNS = (
    "method",
    "dataset",
    "regime",
    "status",
    "config_json",
    "host_json",
    "fit_service_s",
    "predict_service_s",
    "fit_peak_rss_bytes",
    "predict_peak_rss_bytes",
    "fit_peak_gpu_bytes",
    "predict_peak_gpu_bytes",
)


def read_records(stores: Sequence[Path]) -> pd.DataFrame:
    """The columns an estimate reads, from every given store (read-only)."""
    frames = [read_trial_columns(path, RECORD_COLUMNS) for path in stores]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(RECORD_COLUMNS))


def trial_costs(records: pd.DataFrame) -> pd.DataFrame:
    """Per trial that ran: method, dataset, regime, config, hardware, seconds (fit + predict) and peak bytes."""
    ran = records[records["status"].ne(STATUS_UNAVAILABLE) & records["fit_service_s"].notna()]
    if ran.empty:
        return pd.DataFrame(columns=["method", "dataset", "regime", "config", "hardware", "seconds", "gpu", "cpu"])
    out = pd.DataFrame(
        {
            "method": ran["method"].astype(str),
            "dataset": ran["dataset"].astype(str),
            "regime": ran["regime"].astype(str),
            "config": [json.loads(c) if isinstance(c, str) else {} for c in ran["config_json"]],
            "hardware": [hardware_of(h) for h in ran["host_json"]],
            "seconds": (ran["fit_service_s"].astype(float) + ran["predict_service_s"].fillna(0).astype(float)).clip(
                lower=1e-4
            ),
            "gpu": ran[["fit_peak_gpu_bytes", "predict_peak_gpu_bytes"]].fillna(0).astype(float).max(axis=1),
            "cpu": ran[["fit_peak_rss_bytes", "predict_peak_rss_bytes"]].fillna(0).astype(float).max(axis=1),
        }
    )
    return out.reset_index(drop=True)


def fit_method(costs: pd.DataFrame, sizes: Mapping[str, Size]) -> MethodModel | None:
    """One method's model from its trial costs (one hardware); None when none of its datasets has a size."""
    costs = costs[costs["dataset"].isin(sizes)]
    if costs.empty:
        return None
    memory_kind = "gpu" if (costs["gpu"] > 0).any() else "cpu"
    peaks = costs[memory_kind].clip(lower=1.0).to_numpy()
    encoding = ConfigEncoding.learn(list(costs["config"]))
    rows = [_data_row(sizes[d], r) for d, r in zip(costs["dataset"], costs["regime"], strict=True)]
    x = np.hstack([np.asarray(rows, dtype=float), encoding.encode(list(costs["config"]))])
    groups = costs["dataset"].to_numpy()
    graphs = [sizes[d] for d in dict.fromkeys(groups)]
    return MethodModel(
        method=str(costs["method"].iloc[0]),
        hardware=str(costs["hardware"].iloc[0]),
        memory_kind=memory_kind,
        encoding=encoding,
        time=_fit_target(x, np.log(costs["seconds"].to_numpy()), groups, total=True),
        memory=_fit_target(x, np.log(peaks), groups, total=False),
        datasets=tuple(dict.fromkeys(groups)),
        records=len(costs),
        largest=(max(g.nodes for g in graphs), max(g.edges for g in graphs)),
    )


@dataclass
class CostModel:
    """Every method's model for one hardware, from the given records."""

    hardware: str
    methods: dict[str, MethodModel]
    hardware_seen: dict[str, int]  # every hardware in the records, with its record count


def fit_cost_model(records: pd.DataFrame, hardware: str | None = None) -> CostModel:
    """Fit every method the records hold on ``hardware`` (default: the hardware most of the records ran on)."""
    costs = trial_costs(records)
    seen = costs["hardware"].value_counts().to_dict()
    if not seen:
        raise EstimateError("the given stores hold no trial that ran (every row is unavailable or has no time)")
    chosen = hardware or max(seen, key=seen.get)
    if chosen not in seen:
        raise EstimateError(f"no records on hardware {chosen!r}; the stores hold {', '.join(map(str, seen))}")
    costs = costs[costs["hardware"] == chosen]
    sizes = sizes_of(costs["dataset"])
    models = {}
    for method, part in costs.groupby("method", sort=True):
        model = fit_method(part, sizes)
        if model is not None:
            models[str(method)] = model
    return CostModel(chosen, models, {str(k): int(v) for k, v in seen.items()})


# ---- a plan's cost -------------------------------------------------------------


@dataclass(frozen=True)
class CellCost:
    """One cell's estimate; ``None`` fields: no model for its method."""

    seconds: float | None
    low: float | None
    high: float | None
    peak: float | None  # bytes
    peak_low: float | None
    peak_high: float | None
    extrapolated: bool
    imputed: bool


QUANTILES = np.linspace(0.0, 1.0, 101)


@dataclass(frozen=True)
class _Reference:
    """One method's sampled configurations relative to its default (whose own factor is 1): for a plan's cells."""

    mean_time: float  # the mean time factor
    memory_quantiles: np.ndarray  # the memory factor at QUANTILES


def _reference(model: MethodModel, plan: Plan) -> _Reference:
    """The configuration term of ``model``'s method, from a reference sequence of its space (``REFERENCE_CONFIGS``).

    The model is linear, so a configuration's term relative to the default's is the same on every graph.
    """
    spec = plan.specs[model.method]
    configs = config_sequence(spec.default_config, spec.search_space, f"estimate|{model.method}", REFERENCE_CONFIGS)
    x = model.features([[0.0] * len(DATA_FEATURES)] * len(configs), configs)
    time_terms = np.exp(model.time.ridge.predict(x) - model.time.ridge.predict(x[:1])[0])
    memory_terms = np.exp(model.memory.ridge.predict(x) - model.memory.ridge.predict(x[:1])[0])
    sampled = slice(1, None) if len(configs) > 1 else slice(None)
    return _Reference(float(time_terms[sampled].mean()), np.quantile(memory_terms[sampled], QUANTILES))


def estimate_cells(plan: Plan, model: CostModel) -> list[CellCost]:
    """Every cell's estimated seconds and peak bytes (with intervals), in cell order."""
    sizes = sizes_of(plan.sweep.datasets)
    references: dict[str, _Reference] = {}
    defaults: dict[tuple[str, str, str], tuple[float, float]] = {}
    out = []
    for cell in plan.cells:
        fitted = model.methods.get(cell.method)
        size = sizes.get(cell.dataset)
        if fitted is None or size is None:
            out.append(CellCost(None, None, None, None, None, None, False, size is None or size.imputed))
            continue
        if cell.method not in references:
            references[cell.method] = _reference(fitted, plan)
        reference = references[cell.method]
        where = (cell.method, cell.dataset, cell.regime)
        if where not in defaults:  # the default configuration on this graph and regime
            spec = plan.specs[cell.method]
            x = fitted.features([_data_row(size, cell.regime)], [spec.default_config])
            defaults[where] = (float(fitted.seconds(x)[0]), float(fitted.peak_bytes(x)[0]))
        default_seconds, default_peak = defaults[where]
        seconds = default_seconds * (1.0 + (cell.trials - 1) * reference.mean_time)
        # the largest of n - 1 sampled configurations sits near the (1 - 1/n) quantile of their memory factor
        largest = float(np.interp(1.0 - 1.0 / cell.trials, QUANTILES, reference.memory_quantiles))
        peak = default_peak * (max(1.0, largest) if cell.trials > 1 else 1.0)
        time_interval, memory_interval = fitted.time.interval, fitted.memory.interval
        out.append(
            CellCost(
                seconds,
                seconds * time_interval[0] if time_interval else None,
                seconds * time_interval[1] if time_interval else None,
                peak,
                peak * memory_interval[0] if memory_interval else None,
                peak * memory_interval[1] if memory_interval else None,
                size.nodes > EXTRAPOLATION * fitted.largest[0] or size.edges > EXTRAPOLATION * fitted.largest[1],
                size.imputed,
            )
        )
    return out


@dataclass(frozen=True)
class CostRow:
    """The estimate of a group of cells (a method in a regime, a regime, a shard, the plan)."""

    trials: int
    estimated_trials: int  # trials of cells with a model
    hours: float
    hours_low: float | None  # None: some estimated cell has no interval
    hours_high: float | None
    peak: float | None  # bytes, the largest cell's
    peak_low: float | None
    peak_high: float | None
    extrapolated: int  # cells
    imputed: int  # cells


def _every(values: Iterable[float | None]) -> list[float] | None:
    """The values, or None when any is unknown (a sum or bound over them would be silently low)."""
    listed = list(values)
    known = [v for v in listed if v is not None]
    return known if len(known) == len(listed) else None


def summarise(cells: Sequence[Cell], costs: Sequence[CellCost]) -> CostRow:
    """Sum a group of cells' hours (intervals summed bound by bound) and take their largest peak."""
    known = [(c, k) for c, k in zip(cells, costs, strict=True) if k.seconds is not None]
    lows, highs = _every(k.low for _, k in known), _every(k.high for _, k in known)
    peaks = [k.peak for _, k in known if k.peak is not None]
    priced = [k for _, k in known if k.peak is not None]
    peak_lows, peak_highs = _every(k.peak_low for k in priced), _every(k.peak_high for k in priced)
    return CostRow(
        trials=sum(c.trials for c in cells),
        estimated_trials=sum(c.trials for c, _ in known),
        hours=sum(k.seconds or 0.0 for _, k in known) / 3600,
        hours_low=sum(lows) / 3600 if lows and known else None,
        hours_high=sum(highs) / 3600 if highs and known else None,
        peak=max(peaks, default=None),
        peak_low=max(peak_lows, default=None) if peak_lows is not None else None,
        peak_high=max(peak_highs, default=None) if peak_highs is not None else None,
        extrapolated=sum(k.extrapolated for _, k in known),
        imputed=sum(k.imputed for k in costs),
    )


@dataclass(frozen=True)
class ShardCost:
    """What one shard of a plan needs: its trials, estimated compute hours and the memory its services hold at once.

    ``peak_bytes`` sums, over the shard's method families, the largest estimated peak among that
    family's cells (each family runs as one service process that lives through the shard); the
    orchestrator's own memory is not in it. ``*_high``: the interval's upper end (None without one).
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
        by_family: dict[str, list[CellCost]] = {}
        for cell, cost in group:
            if cost.peak is not None:
                by_family.setdefault(plan.specs[cell.method].family, []).append(cost)
        peaks = [max(k.peak or 0.0 for k in ks) for ks in by_family.values()]
        family_highs = [_every(k.peak_high for k in ks) for ks in by_family.values()]
        highs = [max(h) for h in family_highs if h] if all(family_highs) else None
        out.append(
            ShardCost(
                row.trials,
                row.estimated_trials,
                row.hours,
                row.hours_high,
                sum(peaks) if peaks else None,
                sum(highs) if highs else None,
            )
        )
    return out


# ---- back-test -------------------------------------------------------------------


@dataclass(frozen=True)
class BacktestRow:
    method: str
    datasets: tuple[str, ...]  # held out
    trials: int
    measured_hours: float
    predicted_hours: float
    within: int  # held-out datasets whose measured time lies in the interval fitted without them
    intervals: int  # held-out datasets that had an interval
    measured_peak: float
    predicted_peak: float

    @property
    def ratio(self) -> float:
        """Predicted over measured time (1.0 is exact)."""
        return self.predicted_hours / self.measured_hours if self.measured_hours > 0 else math.nan

    @property
    def peak_ratio(self) -> float:
        return self.predicted_peak / self.measured_peak if self.measured_peak > 0 else math.nan


def backtest(
    records: pd.DataFrame, holdout: Sequence[str] | None = None, hardware: str | None = None
) -> list[BacktestRow]:
    """Fit on part of the records, predict the rest, per method: the time and peak of held-out whole datasets.

    ``holdout``: the datasets to hold out together; by default each dataset in turn (fit on all others).
    Each held-out trial is predicted with its own configuration.
    """
    costs = trial_costs(records)
    if costs.empty:
        raise EstimateError("the given stores hold no trial that ran")
    chosen = hardware or costs["hardware"].value_counts().idxmax()
    costs = costs[costs["hardware"] == chosen]
    sizes = sizes_of(costs["dataset"])
    costs = costs[costs["dataset"].isin(sizes)]
    folds = [tuple(holdout)] if holdout else [(d,) for d in dict.fromkeys(costs["dataset"])]
    rows = []
    for method, part in costs.groupby("method", sort=True):
        measured_s = predicted_s = 0.0
        measured_peak = predicted_peak = 0.0
        trials = within = intervals = 0
        held_names: list[str] = []
        for fold in folds:
            held = part["dataset"].isin(fold)
            if not held.any() or held.all():
                continue
            model = fit_method(part[~held], sizes)
            if model is None:
                continue
            test = part[held]
            x = model.features(
                [_data_row(sizes[d], r) for d, r in zip(test["dataset"], test["regime"], strict=True)],
                list(test["config"]),
            )
            predicted = model.seconds(x)
            peaks = model.peak_bytes(x)
            trials += len(test)
            measured_s += float(test["seconds"].sum())
            predicted_s += float(predicted.sum())
            measured_peak = max(measured_peak, float(test[model.memory_kind].max()))
            predicted_peak = max(predicted_peak, float(peaks.max()))
            held_names.extend(n for n in dict.fromkeys(test["dataset"]) if n not in held_names)
            for name in dict.fromkeys(test["dataset"]):
                interval = model.time.interval
                if interval is None:
                    continue
                one = (test["dataset"] == name).to_numpy()
                ratio = float(test["seconds"].to_numpy()[one].sum() / predicted[one].sum())
                intervals += 1
                within += interval[0] <= ratio <= interval[1]
        if trials:
            rows.append(
                BacktestRow(
                    str(method),
                    tuple(held_names),
                    trials,
                    measured_s / 3600,
                    predicted_s / 3600,
                    within,
                    intervals,
                    measured_peak,
                    predicted_peak,
                )
            )
    return rows
