"""A sweep's plan as data: its cells, their trial counts, its shards and its trial keys, with no service and no dataset.

A cell is (dataset, regime, split, method); its trials are the method's configuration sequence
(``orchestrator.sampling``). Everything a plan needs is data on this disk: each method's version,
default configuration and search space from its family's committed description
(``contract.descriptions``), each dataset's identity from the catalog (``dataset_identity``). So
planning the paper's protocol (about two million trials) starts nothing and downloads nothing, and
every shard of a SLURM array computes the same partition on its own.

At that size the plan is kept per cell: a cell's length comes from ``sequence_length`` (one
parameter's draws in most cells), and configurations and keys are built only for the cells that
need them (a shard's own, or those a store already holds trials of). A shard's record of its plan
(``Store.write_plan``) is made the same way: the plan id digests the plan's definition
(``Plan.plan_id``), the shards' trial counts come from the cells, the keys are the shard's own, and the
definition itself is kept as data (``Plan.definition``), so a merge recomputes every shard's trials
(``plan_from_definition``) instead of believing the counts a store holds.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from contract.descriptions import (
    DescriptionError,
    MethodSpec,
    planning_identity,
    read_description,
    spec_from_dict,
    spec_to_dict,
)
from contract.errors import UserError
from contract.families import Family
from contract.space import capped_epochs
from orchestrator.data.registry import dataset_identity, is_catalog_task, known_content_hash
from orchestrator.data.splits import ALL_REGIMES, SPLIT_INDICES
from orchestrator.records import config_hash, trial_key
from orchestrator.sampling import SAMPLER, config_sequence, sequence_key, sequence_length
from orchestrator.store import PLAN_ID_PREFIX, ShardPlan, read_done
from orchestrator.trial_table.pretraining import excluded_by_pretraining, may_exclude

DEFAULT_TIME_LIMIT_S = 3600.0  # per fit and per predict, unless the plan says otherwise
MAX_TIME_LIMIT_S = 7 * 24 * 3600.0
MAX_BUDGET = 10_000  # trials per cell; the protocol uses 201
MAX_CELLS = 10_000_000  # a plan's cells: the paper's protocol has about 11,000
DEFINITION_FORMAT = 1  # of ``Plan.definition``


class ShardCountError(ValueError, UserError):
    """More shards than the plan has cells (a shard holds whole cells, so the rest would be empty)."""


class PlanDefinitionError(ValueError):
    """A recorded plan definition that is not one (damaged, or written by hand)."""


@dataclass(frozen=True)
class SweepPlan:
    methods: tuple[str, ...]
    datasets: tuple[str, ...]
    regimes: tuple[str, ...]
    splits: tuple[int, ...]
    budget: int
    # Seconds, per fit and per predict (docs/running.md#resuming-retries-and-failures).
    time_limit: float = DEFAULT_TIME_LIMIT_S
    shard: tuple[int, int] = (0, 1)  # (index, count): run only this slice of the plan's cells (shard_index)
    # The named protocol the trials belong to (``orchestrator.protocols``), recorded in each trial; None: a sweep of
    # the user's own choosing.
    protocol: str | None = None
    # Every configuration trains at most this many epochs (``contract.space.capped_epochs``): the cost probe's
    # trials, which measure an epoch's cost, not a method's result. Part of each configuration, so of its key.
    epochs_cap: int | None = None


@dataclass(frozen=True)
class PlannedTrial:
    """One slot of a cell's configuration sequence."""

    method: str
    dataset: str
    regime: str
    split: int
    index: int
    config: dict
    key: str


@dataclass(frozen=True)
class Cell:
    """One (dataset, regime, split, method) of a plan: how many trials it has and where the first one stands."""

    dataset: str
    regime: str
    split: int
    method: str
    trials: int
    start: int  # position of its first trial in the plan's order


def shard_index(start: int, count: int, total: int) -> int:
    """The shard of the cell whose first trial stands at ``start`` in a plan of ``total`` trials.

    ``floor(start * count / total)``: cells stay whole (a cell's trials share one graph upload and
    one selection), consecutive cells of one graph and split mostly share a shard (so few shards
    upload each graph), and shards get about equal trial counts. It depends only on the plan, so
    every array task computes the same partition.
    """
    return start * count // max(1, total)


@dataclass(frozen=True)
class Plan:
    """A sweep's cells in execution order (dataset, regime, split, method), with what builds their trials."""

    sweep: SweepPlan
    specs: Mapping[str, MethodSpec]
    identities: Mapping[str, str]  # dataset -> its part of the trial keys
    cells: tuple[Cell, ...]

    @property
    def total(self) -> int:
        return sum(cell.trials for cell in self.cells)

    def check_shards(self, count: int) -> int:
        """``count`` when the plan can be split into that many shards: 1 to its number of cells (a shard holds whole
        cells); ShardCountError otherwise, before anything of that size is made."""
        cells = max(1, len(self.cells))
        if not 1 <= count <= cells:
            raise ShardCountError(
                f"{count:,} shards: the plan has {len(self.cells):,} cell(s) and a shard holds whole cells, so it "
                f"splits into 1 to {cells:,} shards"
            )
        return count

    def shards(self, count: int) -> list[int]:
        """The shard of every cell, in cell order."""
        self.check_shards(count)
        total = self.total
        return [shard_index(cell.start, count, total) for cell in self.cells]

    def shard_cells(self, index: int, count: int) -> list[Cell]:
        return [cell for cell, shard in zip(self.cells, self.shards(count), strict=True) if shard == index]

    def shard_trials(self, count: int) -> tuple[int, ...]:
        """How many trials each of ``count`` shards holds."""
        counts = [0] * count
        for cell, shard in zip(self.cells, self.shards(count), strict=True):
            counts[shard] += cell.trials
        return tuple(counts)

    def plan_id(self) -> str:
        """A digest of the plan's definition, which determines every trial and key: equal in every shard of a
        sweep, different when any planned trial would differ, and computed without spelling out a trial.

        It digests the sampler's scheme, the budget, regimes and splits, each method's version, default and
        search space (``planning_identity``), each dataset's identity, every cell with its trial count in plan
        order, and, in the cells a checkpoint's pretraining may leave out (``may_exclude``), which configurations
        it does. The key format itself is this code's (``orchestrator.records.trial_key``).
        """
        digest = hashlib.sha256()

        def put(*parts: object) -> None:
            digest.update(json.dumps(parts).encode())
            digest.update(b"\n")

        sweep = self.sweep
        put(PLAN_ID_PREFIX, SAMPLER, sweep.budget, sweep.regimes, sweep.splits)
        if sweep.epochs_cap is not None:  # capped configurations are other configurations
            put("epochs_cap", sweep.epochs_cap)
        for method in sweep.methods:
            put("method", method, planning_identity(self.specs[method]))
        for dataset in sweep.datasets:
            put("dataset", dataset, self.identities[dataset])
        for cell in self.cells:
            put(cell.dataset, cell.regime, cell.split, cell.method, cell.trials)
            if may_exclude(cell.method, cell.dataset):
                configs = self._configs(cell)
                put(
                    "excluded",
                    [i for i, c in enumerate(configs) if excluded_by_pretraining(cell.method, c, cell.dataset)],
                )
        return PLAN_ID_PREFIX + digest.hexdigest()[:16]

    def shard_record(self, index: int, count: int, keys: Iterable[str]) -> ShardPlan:
        """What shard ``index`` of ``count`` records in its store before its first trial (``Store.write_plan``),
        given its trials' keys: with the plan's definition, from which a merge recomputes every shard's trials."""
        return ShardPlan(self.plan_id(), count, index, self.shard_trials(count), tuple(keys), self.definition())

    def definition(self) -> str:
        """What determines the plan's cells and keys, as JSON (``plan_from_definition`` makes the plan again): the
        sweep's methods, datasets, regimes, splits, budget and epoch cap, each method's spec, each dataset's identity.

        Self-contained, so a merge on another machine recomputes every shard's trials without the descriptions or
        the datasets; the plan id (which digests the same) says whether a definition is the one a shard ran.
        """
        sweep = self.sweep
        return json.dumps(
            {
                "format": DEFINITION_FORMAT,
                "methods": list(sweep.methods),
                "datasets": list(sweep.datasets),
                "regimes": list(sweep.regimes),
                "splits": list(sweep.splits),
                "budget": sweep.budget,
                "epochs_cap": sweep.epochs_cap,
                "specs": {m: spec_to_dict(self.specs[m]) for m in sweep.methods},
                "identities": {d: self.identities[d] for d in sweep.datasets},
            },
            sort_keys=True,
        )

    def _configs(self, cell: Cell) -> list[dict]:
        """The cell's configuration sequence, before any is left out for a checkpoint's pretraining."""
        spec = self.specs[cell.method]
        key = sequence_key(cell.method, cell.dataset, cell.regime, cell.split)
        return config_sequence(spec.default_config, spec.search_space, key, self.sweep.budget)

    def trials(self, cells: Iterable[Cell] | None = None) -> Iterator[PlannedTrial]:
        """The trials of ``cells`` (default: all), configurations and keys built now, in plan order."""
        for cell in self.cells if cells is None else cells:
            spec = self.specs[cell.method]
            configs = self._configs(cell)
            identity = self.identities[cell.dataset]
            cap = self.sweep.epochs_cap
            for index, config in enumerate(configs):
                if cap is not None:
                    config = {**config, **capped_epochs(config, cap)}
                if excluded_by_pretraining(cell.method, config, cell.dataset):
                    continue  # a checkpoint on its own pretraining graph is never run, so never selected
                key = trial_key(
                    cell.method, spec.version, cell.dataset, cell.regime, cell.split, config_hash(config), identity
                )
                yield PlannedTrial(cell.method, cell.dataset, cell.regime, cell.split, index, config, key)


def make_plan(sweep: SweepPlan, specs: Mapping[str, MethodSpec], identities: Mapping[str, str] | None = None) -> Plan:
    """Count every cell's trials; ``identities`` defaults to each dataset's ``dataset_identity`` (no data needed)."""
    identities = dict(identities) if identities is not None else {d: dataset_identity(d) for d in sweep.datasets}
    cells, start = [], 0
    for dataset in sweep.datasets:
        for regime in sweep.regimes:
            for split in sweep.splits:
                for method in sweep.methods:
                    spec = specs[method]
                    key = sequence_key(method, dataset, regime, split)
                    count = sequence_length(spec.default_config, spec.search_space, key, sweep.budget)
                    if may_exclude(method, dataset):  # a checkpoint is never run on its own pretraining graph
                        configs = config_sequence(spec.default_config, spec.search_space, key, sweep.budget)
                        count = sum(not excluded_by_pretraining(method, c, dataset) for c in configs)
                    cells.append(Cell(dataset, regime, split, method, count, start))
                    start += count
    return Plan(sweep, dict(specs), identities, tuple(cells))


def plan_from_definition(text: str) -> Plan:
    """The plan a recorded definition (``Plan.definition``) describes; PlanDefinitionError (one line) when it is not
    one, or describes more than a sweep can be (unknown regimes or splits, a budget or cell count past the limits)."""
    try:
        document = json.loads(text)
        if not isinstance(document, dict) or document.get("format") != DEFINITION_FORMAT:
            raise ValueError(f"format {document.get('format') if isinstance(document, dict) else None!r}")
        methods, datasets = _names(document["methods"]), _names(document["datasets"])
        regimes, splits = _names(document["regimes"]), document["splits"]
        budget, cap = document["budget"], document["epochs_cap"]
        if not set(regimes) <= set(ALL_REGIMES) or not all(type(s) is int and s in SPLIT_INDICES for s in splits):
            raise ValueError(f"regimes {regimes} or splits {splits}")
        if type(budget) is not int or not 1 <= budget <= MAX_BUDGET:
            raise ValueError(f"budget {budget!r}")
        if not (cap is None or (type(cap) is int and cap > 0)):
            raise ValueError(f"epoch cap {cap!r}")
        if len(methods) * len(datasets) * len(regimes) * len(splits) > MAX_CELLS:
            raise ValueError("more cells than any sweep")
        specs = {m: spec_from_dict(document["specs"][m]) for m in methods}
        identities = {d: _names([document["identities"][d]])[0] for d in datasets}
        sweep = SweepPlan(methods, datasets, tuple(regimes), tuple(splits), budget, epochs_cap=cap)
        return make_plan(sweep, specs, identities)
    except (ValueError, KeyError, TypeError, DescriptionError) as exc:
        raise PlanDefinitionError(f"not a plan definition ({str(exc)[:160]})") from None


def _names(value: object) -> tuple[str, ...]:
    """A list of distinct non-empty strings, as a tuple; ValueError otherwise."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) or len(set(value)) != len(value):
        raise ValueError(f"expected distinct names, got {str(value)[:80]}")
    return tuple(value)


def described_specs(methods: Sequence[str], families: Mapping[str, Family]) -> dict[str, MethodSpec]:
    """The methods whose family has a committed description, as it says (``families``: method -> family)."""
    by_family: dict[str, dict[str, MethodSpec] | None] = {}
    found = {}
    for method in methods:
        family = families[method]
        if family.name not in by_family:
            by_family[family.name] = read_description(family)
        described = by_family[family.name]
        if described is not None and method in described:
            found[method] = described[method]
    return found


@dataclass(frozen=True)
class StoredDone:
    """What a store already holds of a plan: per cell (in cell order), the planned trials a rerun would skip."""

    per_cell: list[int]
    unmatched_legacy: int  # rows keyed by a content hash this machine cannot match to the catalog without the data


def stored_done(path: Path, plan: Plan) -> StoredDone:
    """Count the plan's trials the store at ``path`` holds as done, reading it only, loading no dataset.

    Only the cells the store holds rows of are spelled out into keys. A row written before keys
    carried the catalog's identity (its key ends in the dataset's content hash) counts when this
    machine's cache knows that hash is the catalog task's content today; ``orchestrator run`` on the
    store upgrades such keys for good (``Sweep._upgrade_keys``).
    """
    identities, rows = plan.identities, read_done(path, plan.sweep.time_limit)
    contents = {d: known_content_hash(d) for d in plan.sweep.datasets if is_catalog_task(d)}
    keys, held, unmatched = set(), set(), 0
    for key, method, dataset, regime, split, content in rows:
        held.add((dataset, regime, int(split), method))
        identity = identities.get(dataset)
        if identity is not None and content and dataset in contents and key.endswith(f"|{content}"):
            if contents[dataset] == content:
                key = key[: -len(content)] + identity
            else:
                unmatched += contents[dataset] is None
        keys.add(key)
    per_cell = [
        sum(t.key in keys for t in plan.trials([cell]))
        if (cell.dataset, cell.regime, cell.split, cell.method) in held
        else 0
        for cell in plan.cells
    ]
    return StoredDone(per_cell, unmatched)
