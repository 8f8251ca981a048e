"""A plan spelled out trial by trial, as shard tasks recorded it before plan ids digested the plan's definition.

The reference the tests (and the shard-start benchmark, ``tests/bench/bench_shard.py``) compare today's
per-cell record against: every trial of every shard enumerated, each trial's shard by the rule of
``orchestrator.plan.shard_index``, the plan id a digest of every key in plan order.
"""

from __future__ import annotations

import hashlib

from orchestrator.plan import Plan, PlannedTrial, shard_index
from orchestrator.store import ShardPlan


def shard_of(trials: list[PlannedTrial], count: int) -> list[int]:
    """The shard of every planned trial (the rule of ``shard_index``, for a plan spelled out trial by trial)."""
    shards: list[int] = []
    first_of_cell: dict[tuple[str, str, int, str], int] = {}
    for position, trial in enumerate(trials):
        start = first_of_cell.setdefault((trial.dataset, trial.regime, trial.split, trial.method), position)
        shards.append(shard_index(start, count, len(trials)))
    return shards


def legacy_plan_id(trials: list[PlannedTrial]) -> str:
    """The plan id an older orchestrator recorded: a digest of every trial key, in plan order."""
    digest = hashlib.sha256()
    for trial in trials:
        digest.update(trial.key.encode())
        digest.update(b"\n")
    return digest.hexdigest()[:16]


def whole_plan_record(plan: Plan, index: int, count: int) -> ShardPlan:
    """Shard ``index`` of ``count``'s record, computed from every trial of the plan (as an older orchestrator did)."""
    every = list(plan.trials())
    shards = shard_of(every, count)
    counts = [0] * count
    for shard in shards:
        counts[shard] += 1
    keys = tuple(t.key for t, s in zip(every, shards, strict=True) if s == index)
    return ShardPlan(legacy_plan_id(every), count, index, tuple(counts), keys)
