"""The configuration sequence of a (method, dataset, regime, split): default first, then unique samples.

Draws come from a counter-based generator (sha256 of key, draw number and
parameter name), so every machine and every library version draws the same
sequence, and a budget of K is always a prefix of a budget of K' > K.

Planning the protocol (about 10,000 cells of up to 201 configurations) needs each
cell's length, not its configurations: ``sequence_length`` gives it from one
parameter's draws where that provably equals the sequence's length.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator
from typing import Any

from contract.space import ChoiceParam, Config, FloatParam, IntParam, Param

MAX_ATTEMPTS_PER_CONFIG = 200  # a small space runs out of unique configs; then the sequence ends
SAMPLER = "nodeground-sample-v1"  # the draws' scheme: every draw hashes it, and a plan id digests it


def sequence_key(method: str, dataset: str, regime: str, split: int) -> str:
    return f"{method}|{dataset}|{regime}|{split}"


def _stream(key: str) -> Callable[[int, bytes], float]:
    """Cell ``key``'s draws: draw ``d`` of parameter ``p`` (UTF-8) is the first 8 bytes, little-endian, of
    sha256("<SAMPLER>|<key>|<d>|<p>"), as a number in [0, 1). The prefix is encoded once per
    cell: planning the protocol draws a few million numbers."""
    prefix, sha256, from_bytes = f"{SAMPLER}|{key}|".encode(), hashlib.sha256, int.from_bytes

    def uniform(draw: int, param: bytes) -> float:
        return from_bytes(sha256(b"%s%d|%s" % (prefix, draw, param)).digest()[:8], "little") / 2.0**64

    return uniform


def _sample_param(param: Param, u: float) -> Any:
    if isinstance(param, ChoiceParam):
        return param.values[min(int(u * len(param.values)), len(param.values) - 1)]
    if isinstance(param, IntParam):
        if param.log:
            lo, hi = math.log(param.low - 0.5 if param.low > 0.5 else param.low), math.log(param.high + 0.5)
            value = round(math.exp(lo + u * (hi - lo)))
        else:
            value = param.low + int(u * (param.high - param.low + 1))
        return min(max(value, param.low), param.high)
    if isinstance(param, FloatParam):
        if param.log:
            return math.exp(math.log(param.low) + u * (math.log(param.high) - math.log(param.low)))
        return param.low + u * (param.high - param.low)
    raise TypeError(f"unknown parameter type {type(param).__name__}")


def config_sequence(defaults: Config, space: tuple[Param, ...], key: str, budget: int) -> list[Config]:
    """The first ``budget`` configurations: the default, then unique samples (full configs)."""
    if budget <= 0:
        return []
    return [dict(defaults), *({**defaults, **sampled} for sampled in _new_draws(defaults, space, key, budget))]


def _new_draws(defaults: Config, space: tuple[Param, ...], key: str, budget: int) -> Iterator[Config]:
    """The sampled values of configurations 1..budget-1, each unlike every configuration before it.

    Every sampled configuration is the defaults with each space parameter drawn, so two of them are
    equal as canonical JSON exactly when their drawn values are, and one equals the defaults exactly
    when the defaults hold every space parameter at the drawn value: comparing the JSON of the drawn
    values alone decides what comparing whole configurations would (at a fraction of the cost).
    """
    names = list(dict.fromkeys(p.name for p in space))
    seen = {json.dumps([defaults[n] for n in names])} if all(n in defaults for n in names) else set()
    uniform, encoded = _stream(key), [(p, p.name, p.name.encode()) for p in space]
    draw, produced = 0, 1
    while produced < budget and space:
        for _ in range(MAX_ATTEMPTS_PER_CONFIG):
            draw += 1
            sampled = {name: _sample_param(p, uniform(draw, raw)) for p, name, raw in encoded}
            code = json.dumps(list(sampled.values()))
            if code not in seen:
                break
        else:
            return  # the space is exhausted
        seen.add(code)
        produced += 1
        yield sampled


_ABSENT = object()


def sequence_length(defaults: Config, space: tuple[Param, ...], key: str, budget: int) -> int:
    """``len(config_sequence(defaults, space, key, budget))``, mostly without drawing whole configurations.

    When one parameter (a float, or the widest integer range) draws pairwise different values on
    draws 1..budget-1, all different from its default, every one of those draws is a new
    configuration at its first attempt, so the sequence is exactly ``budget`` long. Otherwise (a
    small space that may run out, a repeated value) the draws are made and counted.
    """
    if budget <= 1 or not space:
        return min(max(budget, 0), 1)
    probe = _probe(space)
    if probe is not None:
        uniform, raw = _stream(key), probe.name.encode()
        values = {_sample_param(probe, uniform(draw, raw)) for draw in range(1, budget)}
        if len(values) == budget - 1 and defaults.get(probe.name, _ABSENT) not in values:
            return budget
    return 1 + sum(1 for _ in _new_draws(defaults, space, key, budget))


def _probe(space: tuple[Param, ...]) -> Param | None:
    """The parameter most likely to draw distinct values: a float, else the widest integer range (a name used once)."""
    names = [p.name for p in space]
    single = [p for p in space if names.count(p.name) == 1]
    floats = [p for p in single if isinstance(p, FloatParam) and p.low < p.high]
    if floats:
        return floats[0]
    ints = [p for p in single if isinstance(p, IntParam)]
    return max(ints, key=lambda p: p.high - p.low, default=None)
