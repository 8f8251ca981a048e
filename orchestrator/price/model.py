"""A method's cost model: its prior's terms as design columns, their weights learned from records in three steps.

The model, one per method and hardware::

    seconds    = factor(config) x (a + b x epochs + epochs x sum_o c_o overhead_o + epochs x sum_k theta_k work_k
                                  + sum_j theta_j once_j)
    peak bytes = m + sum_l mu_l memory_l

Every ``overhead``, ``work``, ``once`` and ``memory`` term comes from the method's *cost prior*, which its family
declares as data beside its search space (``contract.cost``: the grammar, ``cost_prior``). So a method's cost grows
with the work it does: message passing linearly in arcs, attention in what it attends over, an MLP in nodes x
features, a dropout in the elements it draws for; its memory has per-node, per-arc and per-feature terms. An
``overhead`` is configuration values only (layers, propagation steps): the framework's fixed calls per epoch, which
on small graphs outweigh the work and would otherwise be charged to the work terms that grow with depth.

``Design`` lays the terms out as columns, the one place that layout is spelled (``Column``: each column's size
part times its configuration part); ``Weights`` holds what is learned and the one prediction formula. Learned from
the ``ok`` records of one hardware, with errors relative (trials span milliseconds to hours): for time, relative
to the prediction (``_mean_solve``, so each trial's estimate is its mean and a sweep's sum is unbiased); for
memory, relative to the record:

1. the prior's shape: ``a``, ``b``, the ``c_o`` (``Design.free_columns``: the records alone weigh them) and one
   scale ``s`` on the prior's weighted sum, ``s`` at least the floor a machine's peak speed allows (``work_floor``;
   memory: ``MEMORY_FLOOR`` of the declared bytes). A few numbers, which records of a few small graphs already
   determine;
2. every term's own weight, pulled toward ``s`` x its prior weight with the strength of ``PRIOR_RECORDS``
   records: where records vary a term (graphs of growing size: the cost probe, ``orchestrator.price.probe``)
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
price extrapolates.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from contract.cost import CostPrior, Term, cost_prior
from contract.families import Family, load_families
from contract.space import EPOCHS_KEY
from orchestrator.price.sizes import Size, size_values

PATIENCE_KEY = "patience"  # the SDK's early stopping reads it (methods.sdk.method.train_epochs)
WORK_UNIT = 1e9  # time terms in giga multiply-adds
MEMORY_UNIT = 2**30  # memory terms in GiB: columns of like scale
PRIOR_RECORDS = 2.0  # a term's prior weighs as much as this many records' relative errors
MEAN_SOLVE_ROUNDS = 8  # reweightings of a time solve toward errors relative to its prediction (``_mean_solve``)
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
MIN_SECONDS = 1e-9  # the terms' sum is floored here (seconds), and a peak at MIN_GIB, so a log stays finite
MIN_GIB = 1e-6


# ---- a method's terms as columns -----------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One design column: a prior term's size part times its configuration part, in ``unit``, times the epochs where
    it is paid every epoch; without a term, the trial's or the epoch's constant."""

    term: Term | None
    per_epoch: bool
    unit: float | None  # a work or memory term's unit; None: no graph size (a constant, an overhead)

    @property
    def weight(self) -> float:
        """The prior's weight (NaN where the records alone weigh the column)."""
        return math.nan if self.term is None or self.unit is None else self.term.weight

    def value(self, size: Mapping[str, float], config: Mapping, epochs: float) -> float:
        times = epochs if self.per_epoch else 1.0
        if self.term is None:
            return times
        if self.unit is None:
            return times * self.term.config_part(config)
        return times * self.term.size_part(size) * self.term.config_part(config) / self.unit

    def config_value(self, config: Mapping, epochs: float) -> float:
        """The column's configuration part (epochs included): what a graph's size part multiplies."""
        times = epochs if self.per_epoch else 1.0
        return times if self.term is None else times * self.term.config_part(config)

    def size_value(self, size: Mapping[str, float]) -> float:
        """The column's size part, in its unit (1 for a column without graph sizes)."""
        return 1.0 if self.term is None or self.unit is None else self.term.size_part(size) / self.unit


@dataclass(frozen=True)
class Design:
    """A method's prior as design columns: time [trial, epoch, overhead..., work..., once...], memory [base,
    memory...]. ``time_layout`` and ``memory_layout`` are the one place the columns are laid out; a new kind of
    prior term is a column kind there (and a part of the grammar, ``contract.cost``)."""

    prior: CostPrior
    has_epochs: bool  # the method trains for epochs (its configuration has ``max_epochs``)

    @property
    def time_layout(self) -> tuple[Column, ...]:
        return (
            Column(None, False, None),
            Column(None, True, None),
            *(Column(t, True, None) for t in self.prior.overhead),
            *(Column(t, True, WORK_UNIT) for t in self.prior.epoch),
            *(Column(t, False, WORK_UNIT) for t in self.prior.once),
        )

    @property
    def memory_layout(self) -> tuple[Column, ...]:
        return (Column(None, False, None), *(Column(t, False, MEMORY_UNIT) for t in self.prior.memory))

    @property
    def free_columns(self) -> int:
        """The leading time columns the records alone weigh: the trial's and the epoch's constants, the overheads."""
        return sum(column.unit is None for column in self.time_layout)

    @property
    def time_weights(self) -> np.ndarray:
        """The prior weight of each time column (NaN: the free columns, which the prior does not weigh)."""
        return np.array([column.weight for column in self.time_layout])

    @property
    def memory_weights(self) -> np.ndarray:
        return np.array([column.weight for column in self.memory_layout])

    def time_columns(
        self, sizes: Sequence[Mapping[str, float]], configs: Sequence[Mapping], epochs: np.ndarray
    ) -> np.ndarray:
        return _columns(self.time_layout, sizes, configs, epochs)

    def memory_columns(self, sizes: Sequence[Mapping[str, float]], configs: Sequence[Mapping]) -> np.ndarray:
        return _columns(self.memory_layout, sizes, configs, np.ones(len(configs)))

    def time_config_parts(self, config: Mapping, epochs: float) -> list[float]:
        return [column.config_value(config, epochs) for column in self.time_layout]

    def memory_config_parts(self, config: Mapping) -> list[float]:
        return [column.config_value(config, 1.0) for column in self.memory_layout]

    def time_size_parts(self, size: Mapping[str, float]) -> np.ndarray:
        return np.asarray([column.size_value(size) for column in self.time_layout])

    def memory_size_parts(self, size: Mapping[str, float]) -> np.ndarray:
        return np.asarray([column.size_value(size) for column in self.memory_layout])

    def work(self, size: Mapping[str, float], config: Mapping, epochs: float) -> float:
        """The prior's weighted work of one trial (giga multiply-adds): how large a graph is, to this method."""
        columns = self.time_columns([size], [config], np.array([epochs]))[0]
        return float(np.nansum(columns * self.time_weights))

    def held(self, size: Mapping[str, float], config: Mapping) -> float:
        """The prior's bytes at the peak (GiB)."""
        return float(np.nansum(self.memory_columns([size], [config])[0][1:] * self.memory_weights[1:]))


def _columns(
    layout: Sequence[Column], sizes: Sequence[Mapping[str, float]], configs: Sequence[Mapping], epochs: np.ndarray
) -> np.ndarray:
    rows = [[column.value(s, c, e) for column in layout] for s, c, e in zip(sizes, configs, epochs, strict=True)]
    return np.asarray(rows, dtype=float).reshape(len(rows), len(layout))


# ---- the three steps' solvers ---------------------------------------------------------


def _nonnegative_solve(
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


def _mean_solve(
    columns: np.ndarray,
    target: np.ndarray,
    offset: np.ndarray | None = None,
    prior: np.ndarray | None = None,
    strength: float = 0.0,
) -> np.ndarray:
    """``_nonnegative_solve`` with errors relative to the prediction (iteratively reweighted), not to the record.

    Seconds are a sum over a sweep's trials, so a trial's estimate should be its mean. Errors relative to the record
    are not: an over-estimate costs more than an under-estimate of the same factor, so they pull every estimate
    low, most where the records are fewest (the largest graphs), and flatten the growth with size. Errors relative
    to the prediction (a gamma model's weights) are unbiased for the mean under multiplicative noise."""
    theta = _nonnegative_solve(columns, target, offset, prior, strength)
    base = offset if offset is not None else 0.0
    for _ in range(MEAN_SOLVE_ROUNDS):
        predicted = np.maximum(base + columns @ theta, MIN_SCALE_SHARE * target)
        theta = _nonnegative_solve(columns, target, offset, prior, strength, scale=predicted)
    return theta


Solver = Callable[..., np.ndarray]  # _nonnegative_solve, or _mean_solve for time


def _shape_weights(
    columns: np.ndarray,
    weights: np.ndarray,
    target: np.ndarray,
    free: int,
    floor: float,
    solve: Solver = _nonnegative_solve,
) -> np.ndarray:
    """Step 1: the ``free`` leading columns (constants, overheads) on their own, the rest as the prior's weighted sum
    times one scale (at least ``floor``); the implied weight of every column."""
    weighted = columns[:, free:] @ weights[free:]
    theta = solve(np.column_stack([columns[:, :free], weighted]), target)
    if theta[-1] < floor:  # the records cannot tell the scale (or say less than a machine's peak allows)
        theta = np.append(solve(columns[:, :free], target, offset=floor * weighted), floor)
    return np.concatenate([theta[:free], theta[-1] * weights[free:]])


def _term_weights(
    columns: np.ndarray, target: np.ndarray, shape: np.ndarray, free: int, solve: Solver = _nonnegative_solve
) -> np.ndarray:
    """Step 2: every column's own weight, the size terms pulled toward the shape's."""
    prior = shape.copy()
    prior[:free] = math.nan  # the constants and overheads are the records' alone
    return solve(columns, target, prior=prior, strength=PRIOR_RECORDS)


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
    def learn(cls, configs: Sequence[Mapping], log_residual: np.ndarray) -> ConfigFactor:
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

    @classmethod
    def earliest(cls) -> EpochsModel:
        """Fits that stop at their first chance (best epoch 0, then patience): the fewest epochs a prior expects."""
        return cls((0.0,), 1.0, True)

    def expected_for(self, configs: Sequence[Mapping], has_epochs: bool) -> np.ndarray:
        """The epochs each configuration's fit is expected to run (one for a method without epochs)."""
        return np.array([self.expected(c) if has_epochs else 1.0 for c in configs])

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
class Weights:
    """What the records taught: time and memory column weights, the configuration factor, the time rescale; and
    the one prediction formula (``seconds``, ``peak_bytes``), which every price and every held-out check asks."""

    theta: np.ndarray
    mu: np.ndarray
    factor: ConfigFactor
    rescale: float  # mean measured / predicted over the records: a sweep's hours are a sum

    def seconds(self, columns: np.ndarray, configs: Sequence[Mapping]) -> np.ndarray:
        """Each row's seconds: the terms' sum (floored) times the configuration's factor, rescaled."""
        return np.maximum(columns @ self.theta, MIN_SECONDS) * self.factor(configs) * self.rescale

    def peaks_gib(self, columns: np.ndarray) -> np.ndarray:
        return np.maximum(columns @ self.mu, MIN_GIB)

    def peak_bytes(self, columns: np.ndarray) -> np.ndarray:
        return self.peaks_gib(columns) * MEMORY_UNIT

    def mean_config_parts(self, design: Design, configs: Sequence[Mapping], epochs: np.ndarray) -> np.ndarray:
        """The configurations' mean time configuration parts, factor and rescale in: ``mean_seconds`` of a graph."""
        parts = np.asarray([design.time_config_parts(c, e) for c, e in zip(configs, epochs, strict=True)])
        return (parts * (self.factor(configs) * self.rescale)[:, None]).mean(axis=0)

    def mean_seconds(self, size_parts: np.ndarray, mean_parts: np.ndarray) -> float:
        """A trial's mean seconds on a graph (``Design.time_size_parts``) over sampled configurations: the terms are
        products, so the size part factors out of the mean."""
        return float(size_parts @ (mean_parts * self.theta))


def work_floor(on_gpu: bool, threads: float) -> float:
    """Seconds per giga multiply-add a trial takes at least: a machine's peak, per CPU thread or per GPU."""
    return 1.0 / GPU_PEAK_GMACS if on_gpu else 1.0 / (CPU_PEAK_GMACS * max(1.0, threads))


def _learn_weights(
    design: Design,
    time_x: np.ndarray,
    memory_x: np.ndarray,
    seconds: np.ndarray,
    peaks: np.ndarray,
    configs: Sequence[Mapping],
    floor: float,
) -> Weights:
    """Steps 1-3 on one set of records (all of a method's, or all but one dataset's for the held-out errors)."""
    free = design.free_columns
    shape = _shape_weights(time_x, design.time_weights, seconds, free, floor, _mean_solve)
    factor = NO_FACTOR
    theta = _term_weights(time_x, seconds, shape, free, _mean_solve)
    for _ in range(2):  # the factor explains what the terms leave, then the terms are weighed again without it
        factor = ConfigFactor.learn(configs, np.log(seconds) - np.log(np.maximum(time_x @ theta, MIN_SECONDS)))
        theta = _term_weights(time_x, seconds / factor(configs), shape, free, _mean_solve)
    memory_shape = _shape_weights(memory_x, design.memory_weights, peaks, 1, MEMORY_FLOOR)
    mu = _term_weights(memory_x, peaks, memory_shape, 1)
    unscaled = Weights(theta, mu, factor, 1.0).seconds(time_x, configs)
    return Weights(theta, mu, factor, float(np.mean(seconds / unscaled)))


@dataclass
class MethodModel:
    method: str
    hardware: str
    memory_kind: str  # gpu or cpu bytes
    design: Design
    epochs: EpochsModel
    weights: Weights
    sigma_time: float
    sigma_memory: float
    datasets: tuple[str, ...]
    records: int
    calibration_records: int
    largest_work: float  # the prior's work of the largest recorded trial's graph (default configuration)
    largest_held: float
    held_out: list[float] = field(default_factory=list)  # measured / predicted time per held-out dataset
    default: Mapping = field(default_factory=dict)

    def expected_epochs(self, configs: Sequence[Mapping]) -> np.ndarray:
        return self.epochs.expected_for(configs, self.design.has_epochs)

    def seconds(
        self, sizes: Sequence[Mapping[str, float]], configs: Sequence[Mapping], epochs: np.ndarray | None = None
    ) -> np.ndarray:
        """Each trial's predicted seconds, its fit running ``epochs`` (default: as many as the model expects)."""
        epochs = self.expected_epochs(configs) if epochs is None else epochs
        return self.weights.seconds(self.design.time_columns(sizes, configs, epochs), configs)

    def peak_bytes(self, sizes: Sequence[Mapping[str, float]], configs: Sequence[Mapping]) -> np.ndarray:
        return self.weights.peak_bytes(self.design.memory_columns(sizes, configs))

    def distance(self, size: Mapping[str, float]) -> tuple[float, float]:
        """How far (in e-folds) a graph lies beyond the records' largest, in time work and in memory."""
        work = self.design.work(size, self.default, self.expected_epochs([self.default])[0])
        held = self.design.held(size, self.default)
        return (
            max(0.0, math.log(work / self.largest_work)) if work > 0 and self.largest_work > 0 else 0.0,
            max(0.0, math.log(held / self.largest_held)) if held > 0 and self.largest_held > 0 else 0.0,
        )


def interval(value: float, sigma: float, distance: float) -> tuple[float, float]:
    """The 80% interval of an estimate: centred on it in log space, wider the further it extrapolates."""
    spread = Z80 * math.sqrt(sigma**2 + (KAPPA * distance) ** 2)
    return value * math.exp(-spread), value * math.exp(spread)


def learn_method_model(
    costs: pd.DataFrame, sizes: Mapping[str, Size], families: Mapping[str, Family] | None = None
) -> MethodModel | None:
    """One method's model, learned from its trial costs (one hardware); None when none of its datasets has a size."""
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
    weights = _learn_weights(design, time_x, memory_x, seconds, peaks, configs, floor)
    groups = costs["dataset"].to_numpy()
    names = list(dict.fromkeys(groups))
    held_time, held_memory = [], []
    if len(names) >= 2:
        expected_x = design.time_columns(values, configs, epochs_model.expected_for(configs, has_epochs))
        for name in names:
            out = groups == name
            kept = [c for c, o in zip(configs, out, strict=True) if not o]
            part = _learn_weights(design, time_x[~out], memory_x[~out], seconds[~out], peaks[~out], kept, floor)
            predicted = part.seconds(expected_x[out], [c for c, o in zip(configs, out, strict=True) if o])
            held_time.append(float(seconds[out].sum() / predicted.sum()))
            held_memory.append(float(peaks[out].max() / part.peaks_gib(memory_x[out]).max()))
    default_epochs = epochs_model.expected_for([default], has_epochs)[0]
    works = [design.work(v, default, default_epochs) for v in values]
    helds = [design.held(v, default) for v in values]
    return MethodModel(
        method=method,
        hardware=hardware,
        memory_kind=memory_kind,
        design=design,
        epochs=epochs_model,
        weights=weights,
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
