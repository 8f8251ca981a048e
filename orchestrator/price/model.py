"""What a sweep will cost before it runs: fit+predict hours and peak memory per cell, from records and a prior.

The model, one per method and hardware (``hardware_of``: a GPU by name and memory, else the CPU model and the
threads the service computed with)::

    seconds    = factor(config) x (a + b x epochs + epochs x sum_o c_o overhead_o + epochs x sum_k theta_k work_k
                                  + sum_j theta_j once_j)
    peak bytes = m + sum_l mu_l memory_l

Every ``overhead``, ``work``, ``once`` and ``memory`` term comes from the method's *cost prior*, which its family
declares as data beside its search space (``[cost]`` in ``methods/<family>/manifest.toml``, ``[cost.<method>]`` for
one method; ``cost_prior``): a product of graph sizes (``nodes``, ``edges``, ``arcs`` = nodes + 2 x edges, the
messages one propagation sends, ``features``, ``classes``, ``train`` = training nodes) and configuration values, with
a weight (multiply-adds; bytes). So a method's cost grows with the work it does: message passing linearly in arcs,
attention in what it attends over, an MLP in nodes x features, a dropout in the elements it draws for; its memory
has per-node, per-arc and per-feature terms. An ``overhead`` is configuration values only (layers, propagation
steps): the framework's fixed calls per epoch, which on small graphs outweigh the work and would otherwise be
charged to the work terms that grow with depth. A family that declares no prior gets ``GENERIC_PRIOR`` (linear in
nodes x features and in arcs).

Fitted on the ``ok`` records of one hardware, with errors relative (trials span milliseconds to hours): for time,
relative to the prediction (``_mean_fit``, so each trial's estimate is its mean and a sweep's sum is unbiased); for
memory, relative to the record:

1. the prior's shape: ``a``, ``b``, the ``c_o`` (``Design.free_columns``: the records alone weigh them) and one
   scale ``s`` on the prior's weighted sum, ``s`` at least the floor a machine's peak speed allows (``work_floor``;
   memory: ``MEMORY_FLOOR`` of the declared bytes). A few numbers, which records of a few small graphs already
   determine;
2. every term's own weight, pulled toward ``s`` x its prior weight with the strength of ``PRIOR_RECORDS``
   records: where records vary a term (graphs of growing size: the calibration probe, ``orchestrator calibrate``)
   they set it; where they say nothing (every graph with one feature count) the prior holds it;
3. ``factor(config)``: what the terms leave unexplained (a norm, an activation), a ridge on standardised
   configuration values clipped to the recorded range, bounded to ``FACTOR_BOUND``.

Epochs: a fit runs until early stopping (its best epoch + patience + 1, at most ``max_epochs``); the best epochs
of the method's real records stand for the next fits' (``EpochsModel``; without real records
``BEST_EPOCH_PRIOR`` of the default's ``max_epochs``). Calibration records (epochs capped) time an epoch and
never teach epochs.

Intervals (80%): estimate x exp(+-Z80 x sqrt(sigma^2 + (KAPPA x d)^2)). ``sigma`` is the RMS log error of whole
held-out datasets (leave-one-dataset-out over the method's records, at least ``SIGMA_FLOOR``; ``SIGMA_UNKNOWN``
with records on fewer than three datasets); ``d`` is the extrapolation distance, the log of how far the cell's
work (the prior's terms at the default configuration) lies beyond the largest recorded graph's, 0 within the
records. Centred on the estimate in log space, an interval always contains it, and it widens the further a
price extrapolates. Sums of cells add their bounds: the errors of one model do not average out across cells.

A plan's cells: a plan of at most ``EXACT_TRIALS`` trials is priced trial by trial, each with its own
configuration; a larger one (the protocol's two million) prices a cell as its default plus (n - 1) times the
mean over ``REFERENCE_CONFIGS`` sampled configurations (the terms are products, so a cell's size part and
configuration part separate), its peak as the (1 - 1/n) quantile of theirs. Dataset sizes come from the catalog
(``dataset_size``: no download); a size the catalog does not publish and this machine has not processed is imputed
from the catalog's median degree or feature count, and the cell says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from contract.cost import CostPrior, cost_prior
from contract.families import Family, load_families
from contract.space import EPOCHS_KEY, capped_epochs
from orchestrator.data.registry import DatasetError, dataset_size, tasks
from orchestrator.data.splits import REGIMES
from orchestrator.data.synthetic import CALIBRATION_PREFIX
from orchestrator.host import hardware_of
from orchestrator.plan import Cell, Plan, shard_index
from orchestrator.protocols import CALIBRATION
from orchestrator.records import STATUS_OK, call_seconds
from orchestrator.sampling import config_sequence
from orchestrator.store import read_trial_columns

PATIENCE_KEY = "patience"  # the SDK's early stopping reads it (methods.sdk.method.train_epochs)
WORK_UNIT = 1e9  # time terms in giga multiply-adds, memory terms in GiB: columns of like scale
PRIOR_RECORDS = 2.0  # a term's prior weighs as much as this many records' relative errors
MEAN_FIT_ROUNDS = 8  # reweightings of a time fit toward errors relative to its prediction (``_mean_fit``)
MIN_SCALE_SHARE = 0.05  # a reweighting scales a record's error by at least this share of the record
CPU_PEAK_GMACS = 50.0  # giga multiply-adds a second one CPU thread can do at most (vector peak): the time floor
GPU_PEAK_GMACS = 50_000.0  # and one GPU
MEMORY_FLOOR = 0.5  # a peak holds at least this share of the bytes the prior's terms declare
FACTOR_BOUND = 4.0  # the configuration factor stays within [1/4, 4]
CONFIG_PENALTY = 1.0  # its ridge penalty, times the number of records
SIGMA_FLOOR = 0.1
SIGMA_UNKNOWN = 0.7  # log error assumed with records on fewer than MIN_DATASETS datasets
MIN_DATASETS = 3
KAPPA = 0.25  # log error added per e-fold of extrapolation
Z80 = 1.2816  # the normal quantile of 0.9: an 80% interval
BEST_EPOCH_PRIOR = 0.1  # without real records, a fit's best epoch at this share of the default's max_epochs
PUBLIC_TRAIN_FRACTION = 0.1  # a published split's training share is the dataset's own; this stands for it
EXACT_TRIALS = 100_000  # plans up to this size are priced trial by trial
REFERENCE_CONFIGS = 1000  # configurations per method that stand for a large plan's sampled ones
QUANTILES = np.linspace(0.0, 1.0, 101)


class EstimateError(ValueError):
    """Records that cannot support an estimate (none on the asked hardware, none that ran)."""


# ---- graph sizes ----------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    nodes: float
    edges: float
    features: float
    classes: float
    imputed: bool  # some field was not known without the data and was imputed from the catalog


def train_fraction(regime: str) -> float:
    """The share of labeled nodes a regime trains on (``PUBLIC_TRAIN_FRACTION`` for a published split)."""
    return REGIMES[regime][0] if regime in REGIMES else PUBLIC_TRAIN_FRACTION


def size_values(size: Size, regime: str) -> dict[str, float]:
    """The sizes a prior's terms name, for one graph under one regime."""
    return {
        "nodes": size.nodes,
        "edges": size.edges,
        "arcs": size.nodes + 2 * size.edges,
        "features": max(size.features, 1.0),
        "classes": size.classes,
        "train": train_fraction(regime) * size.nodes,
    }


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


# ---- a method's terms as columns -----------------------------------------------------


@dataclass(frozen=True)
class Design:
    """A method's prior as design columns: time [trial, epoch, overhead..., work..., once...], memory [base,
    memory...]."""

    prior: CostPrior
    has_epochs: bool  # the method trains for epochs (its configuration has ``max_epochs``)

    @property
    def free_columns(self) -> int:
        """The leading time columns the records alone weigh: the trial's and the epoch's constants, the overheads."""
        return 2 + len(self.prior.overhead)

    @property
    def time_weights(self) -> np.ndarray:
        """The prior weight of each time column (NaN: the free columns, which the prior does not weigh)."""
        return np.array(
            [math.nan] * self.free_columns
            + [*(t.weight for t in self.prior.epoch), *(t.weight for t in self.prior.once)]
        )

    @property
    def memory_weights(self) -> np.ndarray:
        return np.array([math.nan, *(t.weight for t in self.prior.memory)])

    def time_columns(
        self, sizes: Sequence[Mapping[str, float]], configs: Sequence[Mapping], epochs: np.ndarray
    ) -> np.ndarray:
        rows = [
            [1.0, e, *(e * t.config_part(c) for t in self.prior.overhead)]
            + [e * t.size_part(s) * t.config_part(c) / WORK_UNIT for t in self.prior.epoch]
            + [t.size_part(s) * t.config_part(c) / WORK_UNIT for t in self.prior.once]
            for s, c, e in zip(sizes, configs, epochs, strict=True)
        ]
        return np.asarray(rows, dtype=float).reshape(len(rows), len(self.time_weights))

    def memory_columns(self, sizes: Sequence[Mapping[str, float]], configs: Sequence[Mapping]) -> np.ndarray:
        rows = [
            [1.0, *(t.size_part(s) * t.config_part(c) / 2**30 for t in self.prior.memory)]
            for s, c in zip(sizes, configs, strict=True)
        ]
        return np.asarray(rows, dtype=float).reshape(len(rows), 1 + len(self.prior.memory))

    def work(self, size: Mapping[str, float], config: Mapping, epochs: float) -> float:
        """The prior's weighted work of one trial (giga multiply-adds): how large a graph is, to this method."""
        columns = self.time_columns([size], [config], np.array([epochs]))[0]
        return float(np.nansum(columns * self.time_weights))

    def held(self, size: Mapping[str, float], config: Mapping) -> float:
        """The prior's bytes at the peak (GiB)."""
        return float(np.nansum(self.memory_columns([size], [config])[0][1:] * self.memory_weights[1:]))


def _nonnegative_fit(
    columns: np.ndarray,
    target: np.ndarray,
    offset: np.ndarray | None = None,
    prior: np.ndarray | None = None,
    strength: float = 0.0,
    scale: np.ndarray | None = None,
) -> np.ndarray:
    """theta >= 0 minimising sum(((offset + columns @ theta - target) / scale)^2) (``scale`` by default the target:
    relative errors), plus ``strength`` times sum(((theta_m - prior_m) / prior_m)^2) over the columns with a
    positive prior."""
    from scipy.optimize import nnls  # only a price needs it: `orchestrator --help` stays light

    scale = target if scale is None else scale
    relative = columns / scale[:, None]
    wanted = (target - (offset if offset is not None else 0.0)) / scale
    if prior is not None and strength > 0:
        held = [m for m in range(columns.shape[1]) if np.isfinite(prior[m]) and prior[m] > 0]
        rows = np.zeros((len(held), columns.shape[1]))
        for row, m in enumerate(held):
            rows[row, m] = math.sqrt(strength) / prior[m]
        relative = np.vstack([relative, rows])
        wanted = np.concatenate([wanted, np.full(len(held), math.sqrt(strength))])
    norms = np.abs(relative).max(axis=0)
    used = norms > 0
    theta = np.zeros(columns.shape[1])
    if used.any():
        solution, _ = nnls(relative[:, used] / norms[used], wanted)
        theta[used] = solution / norms[used]
    return theta


def _mean_fit(
    columns: np.ndarray,
    target: np.ndarray,
    offset: np.ndarray | None = None,
    prior: np.ndarray | None = None,
    strength: float = 0.0,
) -> np.ndarray:
    """``_nonnegative_fit`` with errors relative to the prediction (iteratively reweighted), not to the record.

    Seconds are a sum over a sweep's trials, so a trial's estimate should be its mean. Errors relative to the record
    are not: an over-estimate costs more than an under-estimate of the same factor, so they pull every estimate
    low, most where the records are fewest (the largest graphs), and flatten the growth with size. Errors relative
    to the prediction (a gamma model's weights) are unbiased for the mean under multiplicative noise."""
    theta = _nonnegative_fit(columns, target, offset, prior, strength)
    base = offset if offset is not None else 0.0
    for _ in range(MEAN_FIT_ROUNDS):
        predicted = np.maximum(base + columns @ theta, MIN_SCALE_SHARE * target)
        theta = _nonnegative_fit(columns, target, offset, prior, strength, scale=predicted)
    return theta


Fit = Callable[..., np.ndarray]  # _nonnegative_fit, or _mean_fit for time


def _shape_fit(
    columns: np.ndarray,
    weights: np.ndarray,
    target: np.ndarray,
    free: int,
    floor: float,
    fit: Fit = _nonnegative_fit,
) -> np.ndarray:
    """Step 1: the ``free`` leading columns (constants, overheads) on their own, the rest as the prior's weighted sum
    times one scale (at least ``floor``); the implied weight of every column."""
    weighted = columns[:, free:] @ weights[free:]
    theta = fit(np.column_stack([columns[:, :free], weighted]), target)
    if theta[-1] < floor:  # the records cannot tell the scale (or say less than a machine's peak allows)
        theta = np.append(fit(columns[:, :free], target, offset=floor * weighted), floor)
    return np.concatenate([theta[:free], theta[-1] * weights[free:]])


def _term_fit(
    columns: np.ndarray, target: np.ndarray, shape: np.ndarray, free: int, fit: Fit = _nonnegative_fit
) -> np.ndarray:
    """Step 2: every column's own weight, the size terms pulled toward the shape fit's."""
    prior = shape.copy()
    prior[:free] = math.nan  # the constants and overheads are the records' alone
    return fit(columns, target, prior=prior, strength=PRIOR_RECORDS)


# ---- the configuration factor -------------------------------------------------------


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
        """One row per configuration; a value the encoding cannot read is NaN (it counts as the records' mean)."""
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


@dataclass(frozen=True)
class ConfigFactor:
    """exp(ridge on standardised configuration values, clipped to the recorded range), within ``FACTOR_BOUND``."""

    encoding: ConfigEncoding
    mean: np.ndarray
    scale: np.ndarray
    low: np.ndarray
    high: np.ndarray
    coef: np.ndarray

    @classmethod
    def fit(cls, configs: Sequence[Mapping], log_residual: np.ndarray) -> ConfigFactor:
        encoding = ConfigEncoding.learn(configs)
        x = encoding.encode(configs)
        with np.errstate(all="ignore"):
            present = ~np.isnan(x)
            counts = present.sum(axis=0)
            mean = np.where(counts > 0, np.nansum(x, axis=0) / np.maximum(counts, 1), 0.0)
            filled = np.where(present, x, mean)
            scale = filled.std(axis=0)
        scale = np.where(scale > 1e-12, scale, np.inf)  # a constant column drops out
        low, high = filled.min(axis=0, initial=np.inf), filled.max(axis=0, initial=-np.inf)
        factor = cls(encoding, mean, scale, low, high, np.zeros(len(encoding.names)))
        z = factor._standardise(x)
        centred = log_residual - log_residual.mean() if len(log_residual) else log_residual
        gram = z.T @ z + CONFIG_PENALTY * max(len(log_residual), 1) * np.eye(z.shape[1])
        coef = np.linalg.solve(gram, z.T @ centred) if z.shape[1] else np.zeros(0)
        return cls(encoding, mean, scale, low, high, coef)

    def _standardise(self, x: np.ndarray) -> np.ndarray:
        filled = np.where(np.isnan(x), self.mean, x)
        z = (np.clip(filled, self.low, self.high) - self.mean) / self.scale
        return np.where(np.isfinite(z), z, 0.0)

    def __call__(self, configs: Sequence[Mapping]) -> np.ndarray:
        log = self._standardise(self.encoding.encode(configs)) @ self.coef
        return np.exp(np.clip(log, -math.log(FACTOR_BOUND), math.log(FACTOR_BOUND)))


NO_FACTOR = ConfigFactor(ConfigEncoding((), (), ()), *(np.zeros(0),) * 5)


# ---- epochs ------------------------------------------------------------------------


@dataclass(frozen=True)
class EpochsModel:
    """How many epochs a configuration's fit runs: early stopping after its best epoch plus patience, at most
    ``max_epochs``; the best epochs seen on the method's real records stand for the next fits' (their mean,
    since a sweep's hours are a sum)."""

    best: tuple[float, ...]  # best epochs of real records, or the prior's one
    fraction: float  # epochs run per max_epochs, for a method without patience
    from_prior: bool

    @classmethod
    def learn(cls, configs: Sequence[Mapping], infos: Sequence[Mapping], default: Mapping) -> EpochsModel:
        best = [float(i["best_epoch"]) for i in infos if isinstance(i.get("best_epoch"), (int, float))]
        runs = [
            float(i["epochs"]) / float(c[EPOCHS_KEY])
            for c, i in zip(configs, infos, strict=True)
            if isinstance(i.get("epochs"), (int, float)) and _number(c.get(EPOCHS_KEY)) > 0
        ]
        if best or runs:
            return cls(tuple(best) or (0.0,), float(np.mean(runs)) if runs else 1.0, False)
        cap = _number(default.get(EPOCHS_KEY))
        return cls((BEST_EPOCH_PRIOR * cap if cap > 0 else 0.0,), 1.0, True)

    def expected(self, config: Mapping) -> float:
        cap = _number(config.get(EPOCHS_KEY))
        if not cap > 0:
            return 1.0
        patience = _number(config.get(PATIENCE_KEY))
        if not patience >= 0:
            return max(1.0, cap * min(1.0, self.fraction))
        return float(np.mean(np.minimum(cap, np.asarray(self.best) + patience + 1)))


def recorded_epochs(config: Mapping, info: Mapping, has_epochs: bool) -> float:
    """The epochs a recorded fit ran: its own count, else its cap (a method without epochs runs one)."""
    if not has_epochs:
        return 1.0
    if isinstance(info.get("epochs"), (int, float)) and info["epochs"] > 0:
        return float(info["epochs"])
    cap = _number(config.get(EPOCHS_KEY))
    return cap if cap > 0 else 1.0


# ---- one method's model ---------------------------------------------------------------


@dataclass(frozen=True)
class _Fitted:
    """The weights of one fit: time columns, memory columns, configuration factor, and the time rescale."""

    theta: np.ndarray
    mu: np.ndarray
    factor: ConfigFactor
    rescale: float  # mean measured / predicted over the records: a sweep's hours are a sum


def work_floor(on_gpu: bool, threads: float) -> float:
    """Seconds per giga multiply-add a trial takes at least: a machine's peak, per CPU thread or per GPU."""
    return 1.0 / GPU_PEAK_GMACS if on_gpu else 1.0 / (CPU_PEAK_GMACS * max(1.0, threads))


def _fit_once(
    design: Design, time_x: np.ndarray, memory_x: np.ndarray, seconds: np.ndarray, peaks: np.ndarray,
    configs: Sequence[Mapping], floor: float,
) -> _Fitted:  # fmt: skip
    """Steps 1-3 on one set of records (all of a method's, or all but one dataset's for the held-out errors)."""
    free = design.free_columns
    shape = _shape_fit(time_x, design.time_weights, seconds, free, floor, _mean_fit)
    factor = NO_FACTOR
    theta = _term_fit(time_x, seconds, shape, free, _mean_fit)
    for _ in range(2):  # the factor explains what the terms leave, then the terms are refitted without it
        factor = ConfigFactor.fit(configs, np.log(seconds) - np.log(np.maximum(time_x @ theta, 1e-9)))
        theta = _term_fit(time_x, seconds / factor(configs), shape, free, _mean_fit)
    predicted = np.maximum(time_x @ theta, 1e-9) * factor(configs)
    memory_shape = _shape_fit(memory_x, design.memory_weights, peaks, 1, MEMORY_FLOOR)
    mu = _term_fit(memory_x, peaks, memory_shape, 1)
    return _Fitted(theta, mu, factor, float(np.mean(seconds / predicted)))


@dataclass
class MethodModel:
    method: str
    hardware: str
    memory_kind: str  # gpu or cpu bytes
    design: Design
    epochs: EpochsModel
    fitted: _Fitted
    sigma_time: float
    sigma_memory: float
    datasets: tuple[str, ...]
    records: int
    calibration_records: int
    largest_work: float  # the prior's work of the largest recorded trial's graph (default configuration)
    largest_held: float
    held_out: list[float] = field(default_factory=list)  # measured / predicted time per held-out dataset
    default: Mapping = field(default_factory=dict)

    def seconds(self, sizes: Sequence[Mapping[str, float]], configs: Sequence[Mapping]) -> np.ndarray:
        epochs = np.array([self.epochs.expected(c) if self.design.has_epochs else 1.0 for c in configs])
        return _predict_seconds(self.design, self.fitted, sizes, configs, epochs)

    def peak_bytes(self, sizes: Sequence[Mapping[str, float]], configs: Sequence[Mapping]) -> np.ndarray:
        return _predict_peaks(self.design, self.fitted, sizes, configs)

    def distance(self, size: Mapping[str, float]) -> tuple[float, float]:
        """How far (in e-folds) a graph lies beyond the records' largest, in time work and in memory."""
        epochs = self.epochs.expected(self.default) if self.design.has_epochs else 1.0
        work = self.design.work(size, self.default, epochs)
        held = self.design.held(size, self.default)
        return (
            max(0.0, math.log(work / self.largest_work)) if work > 0 and self.largest_work > 0 else 0.0,
            max(0.0, math.log(held / self.largest_held)) if held > 0 and self.largest_held > 0 else 0.0,
        )


def _predict_seconds(
    design: Design,
    fitted: _Fitted,
    sizes: Sequence[Mapping[str, float]],
    configs: Sequence[Mapping],
    epochs: np.ndarray,
) -> np.ndarray:
    x = design.time_columns(sizes, configs, epochs)
    return np.maximum(x @ fitted.theta, 1e-9) * fitted.factor(configs) * fitted.rescale


def _predict_peaks(
    design: Design, fitted: _Fitted, sizes: Sequence[Mapping[str, float]], configs: Sequence[Mapping]
) -> np.ndarray:
    return np.maximum(design.memory_columns(sizes, configs) @ fitted.mu, 1e-6) * 2**30


def interval(value: float, sigma: float, distance: float) -> tuple[float, float]:
    """The 80% interval of an estimate: centred on it in log space, wider the further it extrapolates."""
    spread = Z80 * math.sqrt(sigma**2 + (KAPPA * distance) ** 2)
    return value * math.exp(-spread), value * math.exp(spread)


RECORD_COLUMNS = (
    "method",
    "family",
    "dataset",
    "regime",
    "status",
    "config_json",
    "fit_info_json",
    "host_json",
    "protocol",
    "fit_service_s",
    "predict_service_s",
    "fit_cpu_s",
    "predict_cpu_s",
    "fit_peak_rss_bytes",
    "predict_peak_rss_bytes",
    "fit_peak_gpu_bytes",
    "predict_peak_gpu_bytes",
)


def read_records(stores: Sequence[Path]) -> pd.DataFrame:
    """The columns an estimate reads, from every given store (read-only)."""
    frames = [read_trial_columns(path, RECORD_COLUMNS) for path in stores]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(RECORD_COLUMNS))


def _column(frame: pd.DataFrame, name: str) -> np.ndarray:
    """A numeric column as floats, all NaN where the records predate it."""
    if name not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)


def _json(text: object) -> dict:
    try:
        value = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


COST_COLUMNS = ["method", "family", "dataset", "regime", "config", "info", "hardware", "threads", "calibration"]


def trial_costs(records: pd.DataFrame) -> pd.DataFrame:
    """Per ``ok`` trial: method, family, dataset, regime, config, fit info, hardware, seconds (fit + predict), peak
    bytes (gpu, cpu) and whether it is a calibration trial."""
    ran = records[records["status"].eq(STATUS_OK) & records["fit_service_s"].notna()]
    if ran.empty:
        return pd.DataFrame(columns=[*COST_COLUMNS, "seconds", "gpu", "cpu"])
    hosts = [_json(h) for h in ran["host_json"]]
    gpu = ran[["fit_peak_gpu_bytes", "predict_peak_gpu_bytes"]].fillna(0).astype(float).max(axis=1).to_numpy()
    protocol = ran["protocol"] if "protocol" in ran else pd.Series([None] * len(ran), index=ran.index)
    out = pd.DataFrame(
        {
            "method": ran["method"].astype(str),
            "family": ran["family"].astype(str) if "family" in ran else "",
            "dataset": ran["dataset"].astype(str),
            "regime": ran["regime"].astype(str),
            "config": [_json(c) for c in ran["config_json"]],
            "info": [_json(i) for i in ran["fit_info_json"]] if "fit_info_json" in ran else [{}] * len(ran),
            "hardware": [hardware_of(h) for h in ran["host_json"]],
            # CPU seconds add up every thread's work, so a floor per thread is theirs; wall seconds divide it
            "threads": np.where(
                np.isnan(_column(ran, "fit_cpu_s")) | (gpu > 0),
                [float(h.get("compute_threads") or h.get("cpu_count") or 1) for h in hosts],
                1.0,
            ),
            "calibration": (
                protocol.eq(CALIBRATION) | ran["dataset"].astype(str).str.startswith(CALIBRATION_PREFIX)
            ).to_numpy(),
            "seconds": np.clip(
                call_seconds(ran["fit_service_s"], _column(ran, "fit_cpu_s"), ran["fit_peak_gpu_bytes"])
                + np.nan_to_num(
                    call_seconds(ran["predict_service_s"], _column(ran, "predict_cpu_s"), ran["predict_peak_gpu_bytes"])
                ),
                1e-4,
                None,
            ),
            "gpu": gpu,
            "cpu": ran[["fit_peak_rss_bytes", "predict_peak_rss_bytes"]].fillna(0).astype(float).max(axis=1),
        }
    )
    return out.reset_index(drop=True)


def fit_method(
    costs: pd.DataFrame, sizes: Mapping[str, Size], families: Mapping[str, Family] | None = None
) -> MethodModel | None:
    """One method's model from its trial costs (one hardware); None when none of its datasets has a size."""
    costs = costs[costs["dataset"].isin(sizes)].reset_index(drop=True)
    if costs.empty:
        return None
    method = str(costs["method"].iloc[0])
    families = load_families() if families is None else families
    family = families.get(str(costs["family"].iloc[0])) or next(
        (f for f in families.values() if method in f.methods), None
    )
    prior = cost_prior(method, family)
    configs = list(costs["config"])
    infos = list(costs["info"])
    default = _default_of(costs)
    has_epochs = any(_number(c.get(EPOCHS_KEY)) > 0 for c in configs)
    design = Design(prior, has_epochs)
    real = ~costs["calibration"].to_numpy(dtype=bool)
    epochs_model = EpochsModel.learn(
        [c for c, r in zip(configs, real, strict=True) if r],
        [i for i, r in zip(infos, real, strict=True) if r],
        default,
    )
    values = [size_values(sizes[d], r) for d, r in zip(costs["dataset"], costs["regime"], strict=True)]
    epochs = np.array([recorded_epochs(c, i, has_epochs) for c, i in zip(configs, infos, strict=True)])
    memory_kind = "gpu" if (costs["gpu"] > 0).any() else "cpu"
    seconds = costs["seconds"].to_numpy(dtype=float)
    peaks = costs[memory_kind].clip(lower=2**20).to_numpy(dtype=float) / 2**30
    time_x, memory_x = design.time_columns(values, configs, epochs), design.memory_columns(values, configs)
    hardware = str(costs["hardware"].iloc[0])
    floor = work_floor(memory_kind == "gpu", float(costs["threads"].median()))
    fitted = _fit_once(design, time_x, memory_x, seconds, peaks, configs, floor)
    groups = costs["dataset"].to_numpy()
    names = list(dict.fromkeys(groups))
    held_time, held_memory = [], []
    if len(names) >= 2:
        expected = np.array([epochs_model.expected(c) if has_epochs else 1.0 for c in configs])
        expected_x = design.time_columns(values, configs, expected)
        for name in names:
            out = groups == name
            part = _fit_once(
                design, time_x[~out], memory_x[~out], seconds[~out], peaks[~out],
                [c for c, o in zip(configs, out, strict=True) if not o], floor,
            )  # fmt: skip
            held_configs = [c for c, o in zip(configs, out, strict=True) if o]
            predicted = np.maximum(expected_x[out] @ part.theta, 1e-9) * part.factor(held_configs) * part.rescale
            held_time.append(float(seconds[out].sum() / predicted.sum()))
            held_memory.append(float(peaks[out].max() / max((memory_x[out] @ part.mu).max(), 1e-6)))
    works = [design.work(v, default, epochs_model.expected(default) if has_epochs else 1.0) for v in values]
    helds = [design.held(v, default) for v in values]
    return MethodModel(
        method=method,
        hardware=hardware,
        memory_kind=memory_kind,
        design=design,
        epochs=epochs_model,
        fitted=fitted,
        sigma_time=_sigma(held_time),
        sigma_memory=_sigma(held_memory),
        datasets=tuple(names),
        records=len(costs),
        calibration_records=int((~real).sum()),
        largest_work=max(works),
        largest_held=max(helds),
        held_out=held_time,
        default=default,
    )


def _default_of(costs: pd.DataFrame) -> dict:
    """The method's default configuration as its real records ran it (the commonest), for distances."""
    configs = [c for c, cal in zip(costs["config"], costs["calibration"], strict=True) if not cal] or list(
        costs["config"]
    )
    counts = pd.Series([json.dumps(c, sort_keys=True) for c in configs]).value_counts()
    return dict(json.loads(counts.index[0]))


def _sigma(ratios: Sequence[float]) -> float:
    """The RMS log error of held-out datasets; ``SIGMA_UNKNOWN`` with too few of them."""
    if len(ratios) < MIN_DATASETS:
        return SIGMA_UNKNOWN
    return max(SIGMA_FLOOR, float(np.sqrt(np.mean(np.log(ratios) ** 2))))


@dataclass
class CostModel:
    """Every method's model for one hardware, from the given records."""

    hardware: str
    methods: dict[str, MethodModel]
    hardware_seen: dict[str, int]  # every hardware in the records, with its record count
    cores: int | None = None  # the host's CPU cores, as its records name them


def fit_cost_model(records: pd.DataFrame, hardware: str | None = None) -> CostModel:
    """Fit every method the records hold on ``hardware`` (default: the hardware most of the records ran on).

    ``hardware`` names a hardware as the records do, or a part of its name that only one of them has (``cpu``,
    ``H200``)."""
    costs = trial_costs(records)
    seen = {str(k): int(v) for k, v in costs["hardware"].value_counts().items()}
    if not seen:
        raise EstimateError("the given stores hold no trial that ran (no ok trial with a recorded time)")
    chosen = choose_hardware(seen, hardware)
    costs = costs[costs["hardware"] == chosen]
    sizes = sizes_of(costs["dataset"])
    families = load_families()
    models = {}
    for method, part in costs.groupby("method", sort=True):
        model = fit_method(part, sizes, families)
        if model is not None:
            models[str(method)] = model
    hosts = records.loc[records["host_json"].map(hardware_of) == chosen, "host_json"].map(_json)
    cores = [h.get("cpu_count") for h in hosts if isinstance(h.get("cpu_count"), int)]
    return CostModel(chosen, models, seen, max(set(cores), key=cores.count) if cores else None)


def choose_hardware(seen: Mapping[str, int], asked: str | None) -> str:
    """The hardware to price on: the asked one (exactly, or the one name it is part of), else the commonest."""
    if asked is None:
        return max(seen, key=lambda h: seen[h])
    if asked in seen:
        return asked
    matches = [h for h in seen if asked.lower() in h.lower()]
    if len(matches) == 1:
        return matches[0]
    held = "; ".join(f"{h} ({n:,})" for h, n in seen.items())
    reason = "several hardware names contain it" if matches else "no records on it"
    raise EstimateError(f"--hardware {asked!r}: {reason}; the stores hold {held}")


# ---- a plan's cost -------------------------------------------------------------


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
    """One method's sampled configurations as mean column factors and memory column factors (``REFERENCE_CONFIGS``)."""

    configs: list[dict]
    time_means: np.ndarray  # per time column: mean over the configurations of factor x epochs x config part
    memory_parts: np.ndarray  # configurations x memory columns: each one's config part


def _reference(model: MethodModel, plan: Plan) -> _Reference:
    spec = plan.specs[model.method]
    configs = config_sequence(spec.default_config, spec.search_space, f"estimate|{model.method}", REFERENCE_CONFIGS)
    configs = _capped(configs, plan)[1:] or configs
    design, fitted = model.design, model.fitted
    epochs = np.array([model.epochs.expected(c) if design.has_epochs else 1.0 for c in configs])
    factors = fitted.factor(configs) * fitted.rescale
    parts = [
        [1.0, e, *(e * t.config_part(c) for t in (*design.prior.overhead, *design.prior.epoch))]
        + [t.config_part(c) for t in design.prior.once]
        for c, e in zip(configs, epochs, strict=True)
    ]
    time_means = (np.asarray(parts) * factors[:, None]).mean(axis=0)
    memory_parts = np.asarray([[1.0, *(t.config_part(c) for t in design.prior.memory)] for c in configs])
    return _Reference(configs, time_means, memory_parts)


def _capped(configs: list[dict], plan: Plan) -> list[dict]:
    cap = plan.sweep.epochs_cap
    return configs if cap is None else [{**c, **capped_epochs(c, cap)} for c in configs]


def _size_parts(model: MethodModel, size: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """The size part of each time and memory column, in the columns' units."""
    prior = model.design.prior
    time = [
        1.0,
        1.0,
        *(1.0 for _ in prior.overhead),
        *(t.size_part(size) / WORK_UNIT for t in prior.epoch),
        *(t.size_part(size) / WORK_UNIT for t in prior.once),
    ]
    memory = [1.0, *(t.size_part(size) / 2**30 for t in prior.memory)]
    return np.asarray(time), np.asarray(memory)


@dataclass(frozen=True)
class _Group:
    """A large plan's (method, dataset, regime): its default's time and peak, a sampled configuration's mean time,
    and the quantiles of the sampled configurations' peaks."""

    default_seconds: float
    default_peak: float
    mean_seconds: float
    peak_quantiles: np.ndarray


def _group(model: MethodModel, reference: _Reference, values: Mapping[str, float], default: list[dict]) -> _Group:
    time_part, memory_part = _size_parts(model, values)
    peaks = (reference.memory_parts * memory_part) @ model.fitted.mu * 2**30
    return _Group(
        float(model.seconds([values], default)[0]),
        float(model.peak_bytes([values], default)[0]),
        float(time_part @ (reference.time_means * model.fitted.theta)),
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
        fitted, size = model.methods.get(cell.method), sizes.get(cell.dataset)
        if fitted is None or size is None or cell.trials == 0:
            out.append(CellCost(None, None, None, None, None, None, False, size is None or size.imputed))
            continue
        values = size_values(size, cell.regime)
        if exact:
            configs = [t.config for t in plan.trials([cell])]
            seconds = float(fitted.seconds([values] * len(configs), configs).sum())
            peak = float(fitted.peak_bytes([values] * len(configs), configs).max())
        else:
            if cell.method not in references:
                references[cell.method] = _reference(fitted, plan)
            where = (cell.method, cell.dataset, cell.regime)
            if where not in groups:
                default = _capped([dict(plan.specs[cell.method].default_config)], plan)
                groups[where] = _group(fitted, references[cell.method], values, default)
            group = groups[where]
            seconds = group.default_seconds + (cell.trials - 1) * group.mean_seconds
            # the largest of n - 1 sampled configurations sits near the (1 - 1/n) quantile of their peaks
            largest = float(np.interp(1.0 - 1.0 / cell.trials, QUANTILES, group.peak_quantiles))
            peak = max(group.default_peak, largest) if cell.trials > 1 else group.default_peak
        time_distance, memory_distance = fitted.distance(values)
        low, high = interval(seconds, fitted.sigma_time, time_distance)
        peak_low, peak_high = interval(peak, fitted.sigma_memory, memory_distance)
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


# ---- back-test -------------------------------------------------------------------


@dataclass(frozen=True)
class BacktestRow:
    method: str
    fitted_on: tuple[str, ...]  # the real datasets the model was fitted on (calibration graphs besides)
    datasets: tuple[str, ...]  # predicted (held out)
    trials: int
    measured_hours: float
    predicted_hours: float
    within: int  # held-out datasets whose measured time lies in the interval of the model fitted without them
    intervals: int
    measured_peak: float
    predicted_peak: float
    size_factor: tuple[float, float] = (1.0, 1.0)  # held-out graphs' nodes / the largest fitted real graph's

    @property
    def ratio(self) -> float:
        """Predicted over measured time (1.0 is exact)."""
        return self.predicted_hours / self.measured_hours if self.measured_hours > 0 else math.nan

    @property
    def peak_ratio(self) -> float:
        return self.predicted_peak / self.measured_peak if self.measured_peak > 0 else math.nan


def size_holdout(costs: pd.DataFrame, sizes: Mapping[str, Size], factor: float) -> tuple[list[str], list[str]]:
    """The size back-test's split of the real graphs: fitted on those no larger than twice the smallest, held out
    those at least ``factor`` times larger (in nodes) than every fitted one."""
    real = sorted({d for d, c in zip(costs["dataset"], costs["calibration"], strict=True) if not c and d in sizes},
                  key=lambda d: sizes[d].nodes)  # fmt: skip
    if not real:
        return [], []
    smallest = sizes[real[0]].nodes
    fitted = [d for d in real if sizes[d].nodes <= 2 * smallest]
    largest = max(sizes[d].nodes for d in fitted)
    return fitted, [d for d in real if sizes[d].nodes >= factor * largest]


def backtest(
    records: pd.DataFrame,
    holdout: Sequence[str] | None = None,
    hardware: str | None = None,
    by_size: float | None = None,
) -> list[BacktestRow]:
    """Fit on part of the records, predict the rest, per method: the time and peak of held-out whole datasets.

    ``holdout``: the datasets to hold out together; ``by_size``: hold out the real graphs at least that many times
    larger than the small ones fitted on (``size_holdout``), the calibration graphs kept in the fit; by default each
    real dataset in turn (fit on all others). A held-out trial is predicted with its own configuration and the
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
        fitted_on, held = size_holdout(costs, sizes, by_size)
        keep = costs["dataset"].isin(fitted_on) | costs["dataset"].isin(held) | costs["calibration"]
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
    method: str, part: pd.DataFrame, folds: Sequence[tuple[str, ...]], sizes: Mapping[str, Size], families
) -> BacktestRow | None:
    measured_s = predicted_s = measured_peak = predicted_peak = 0.0
    trials = within = intervals = 0
    held_names: list[str] = []
    fitted_names: set[str] = set()
    factors: list[float] = []
    for fold in folds:
        held = part["dataset"].isin(fold).to_numpy()
        if not held.any() or held.all():
            continue
        model = fit_method(part[~held], sizes, families)
        if model is None:
            continue
        test = part[held]
        fitted_real = [d for d in model.datasets if not d.startswith(CALIBRATION_PREFIX)]
        fitted_names.update(fitted_real)
        values = [size_values(sizes[d], r) for d, r in zip(test["dataset"], test["regime"], strict=True)]
        configs = list(test["config"])
        predicted = model.seconds(values, configs)
        peaks = model.peak_bytes(values, configs)
        trials += len(test)
        measured_s += float(test["seconds"].sum())
        predicted_s += float(predicted.sum())
        measured_peak = max(measured_peak, float(test[model.memory_kind].max()))
        predicted_peak = max(predicted_peak, float(peaks.max()))
        largest = max((sizes[d].nodes for d in fitted_real), default=0.0)
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
        tuple(sorted(fitted_names, key=lambda d: sizes[d].nodes)),
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
