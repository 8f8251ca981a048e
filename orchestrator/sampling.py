"""The configuration sequence of a (method, dataset, regime, split): default first, then unique samples.

Draws come from a counter-based generator (sha256 of key, draw number and
parameter name), so every machine and every library version draws the same
sequence, and a budget of K is always a prefix of a budget of K' > K.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from contract.space import ChoiceParam, Config, FloatParam, IntParam, Param

MAX_ATTEMPTS_PER_CONFIG = 200  # a small space runs out of unique configs; then the sequence ends


def sequence_key(method: str, dataset: str, regime: str, split: int) -> str:
    return f"{method}|{dataset}|{regime}|{split}"


def _uniform(key: str, draw: int, param: str) -> float:
    digest = hashlib.sha256(f"nodeground-sample-v1|{key}|{draw}|{param}".encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2.0**64


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


def _canonical(config: Config) -> str:
    return json.dumps(config, sort_keys=True)


def config_sequence(defaults: Config, space: tuple[Param, ...], key: str, budget: int) -> list[Config]:
    """The first ``budget`` configurations: the default, then unique samples (full configs)."""
    if budget <= 0:
        return []
    sequence = [dict(defaults)]
    seen = {_canonical(defaults)}
    draw = 0
    while len(sequence) < budget and space:
        for _ in range(MAX_ATTEMPTS_PER_CONFIG):
            draw += 1
            config = dict(defaults)
            config.update({p.name: _sample_param(p, _uniform(key, draw, p.name)) for p in space})
            if _canonical(config) not in seen:
                break
        else:
            break  # the space is exhausted
        seen.add(_canonical(config))
        sequence.append(config)
    return sequence
