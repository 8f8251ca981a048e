"""Search spaces and configurations as data.

A method states its default configuration and its search space here; the
service publishes both through Describe, and the orchestrator samples from the
published copy. Validation lives here too, so that a config of the wrong type
or out of range is refused with a clear message before any work starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from contract.errors import UserError
from contract.v1 import method_service_pb2 as pb

ConfigValue = int | float | str | bool
Config = dict[str, ConfigValue]


class ConfigError(ValueError, UserError):
    """A configuration does not fit the method's space (unknown key, wrong type, out of range)."""


@dataclass(frozen=True)
class FloatParam:
    name: str
    low: float
    high: float
    log: bool = False

    def check(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{self.name} must be a number, got {type(value).__name__} {value!r}")
        value = float(value)
        if not math.isfinite(value) or not (self.low <= value <= self.high):
            raise ConfigError(f"{self.name}={value} is outside [{self.low}, {self.high}]")
        return value


@dataclass(frozen=True)
class IntParam:
    name: str
    low: int
    high: int  # inclusive
    log: bool = False

    def check(self, value: Any) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{self.name} must be an integer, got {type(value).__name__} {value!r}")
        if not (self.low <= value <= self.high):
            raise ConfigError(f"{self.name}={value} is outside [{self.low}, {self.high}]")
        return value


@dataclass(frozen=True)
class ChoiceParam:
    name: str
    values: tuple[ConfigValue, ...]

    def check(self, value: Any) -> ConfigValue:
        for allowed in self.values:
            if type(allowed) is type(value) and allowed == value:
                return value
            if (
                isinstance(allowed, float)
                and isinstance(value, int)
                and not isinstance(value, bool)
                and allowed == value
            ):
                return float(value)
        raise ConfigError(f"{self.name}={value!r} is not one of {list(self.values)}")


Param = FloatParam | IntParam | ChoiceParam


# The default-config key a method reads as its training length in epochs (the SDK's
# ``TorchNodeClassifier`` does). A harness that exercises a method rather than scoring it
# (the sweep's warm-up, the conformance suite) shortens training through this key only.
EPOCHS_KEY = "max_epochs"


def capped_epochs(defaults: Config, cap: int) -> Config:
    """The config override that trains at most ``cap`` epochs; empty when the method has no such key."""
    value = defaults.get(EPOCHS_KEY)
    if isinstance(value, int) and not isinstance(value, bool) and value > cap:
        return {EPOCHS_KEY: cap}
    return {}


def validate_config(config: dict[str, Any], defaults: Config, space: tuple[Param, ...]) -> Config:
    """Merge ``config`` over ``defaults`` and check every value.

    Keys in the search space are checked against their domain; keys only in the
    defaults must keep the default's type, be finite, and keep its sign (a
    positive default such as ``max_epochs`` stays positive, a non-negative one
    non-negative). Unknown keys are refused.
    """
    by_name = {p.name: p for p in space}
    merged: Config = dict(defaults)
    for key, value in config.items():
        if key in by_name:
            merged[key] = by_name[key].check(value)
        elif key in defaults:
            merged[key] = _same_sign(key, defaults[key], _same_type(key, defaults[key], value))
        else:
            known = sorted(set(defaults) | set(by_name))
            raise ConfigError(f"unknown config key {key!r}; known keys: {', '.join(known)}")
    return merged


def _same_type(key: str, default: ConfigValue, value: Any) -> ConfigValue:
    if isinstance(default, bool) or isinstance(value, bool):
        if type(default) is not type(value):
            raise ConfigError(f"{key} must be {type(default).__name__}, got {type(value).__name__} {value!r}")
        return value
    if isinstance(default, float) and isinstance(value, (int, float)):
        return float(value)
    if isinstance(default, int) and isinstance(value, float) and value.is_integer():
        return int(value)
    if type(default) is not type(value):
        raise ConfigError(f"{key} must be {type(default).__name__}, got {type(value).__name__} {value!r}")
    return value


def _same_sign(key: str, default: ConfigValue, value: ConfigValue) -> ConfigValue:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if not math.isfinite(value):
        raise ConfigError(f"{key}={value} is not a finite number")
    if default > 0 and value <= 0:  # type: ignore[operator]
        raise ConfigError(f"{key}={value} must be positive (default {default})")
    if default >= 0 and value < 0:  # type: ignore[operator]
        raise ConfigError(f"{key}={value} must not be negative (default {default})")
    return value


# ---- proto conversion -------------------------------------------------------


def value_to_proto(value: ConfigValue) -> pb.Value:
    if isinstance(value, bool):
        return pb.Value(bool_value=value)
    if isinstance(value, int):
        return pb.Value(int_value=value)
    if isinstance(value, float):
        return pb.Value(float_value=value)
    if isinstance(value, str):
        return pb.Value(string_value=value)
    raise ConfigError(f"unsupported config value type {type(value).__name__}: {value!r}")


def value_from_proto(value: pb.Value) -> ConfigValue:
    kind = value.WhichOneof("kind")
    if kind is None:
        raise ConfigError("config value without a type")
    return getattr(value, kind)


def config_to_proto(config: dict[str, ConfigValue]) -> dict[str, pb.Value]:
    return {k: value_to_proto(v) for k, v in config.items()}


def config_from_proto(config: Any) -> Config:
    return {k: value_from_proto(v) for k, v in config.items()}


def param_to_proto(param: Param) -> pb.Param:
    if isinstance(param, FloatParam):
        return pb.Param(name=param.name, float_range=pb.FloatRange(low=param.low, high=param.high, log=param.log))
    if isinstance(param, IntParam):
        return pb.Param(name=param.name, int_range=pb.IntRange(low=param.low, high=param.high, log=param.log))
    return pb.Param(name=param.name, choice=pb.Choice(values=[value_to_proto(v) for v in param.values]))


def param_from_proto(param: pb.Param) -> Param:
    domain = param.WhichOneof("domain")
    if domain == "float_range":
        r = param.float_range
        if not (r.low <= r.high) or (r.log and r.low <= 0):
            raise ConfigError(f"search space {param.name}: bad float range [{r.low}, {r.high}] log={r.log}")
        return FloatParam(param.name, r.low, r.high, r.log)
    if domain == "int_range":
        r = param.int_range
        if not (r.low <= r.high) or (r.log and r.low <= 0):
            raise ConfigError(f"search space {param.name}: bad int range [{r.low}, {r.high}] log={r.log}")
        return IntParam(param.name, r.low, r.high, r.log)
    if domain == "choice":
        values = tuple(value_from_proto(v) for v in param.choice.values)
        if not values:
            raise ConfigError(f"search space {param.name}: empty choice")
        return ChoiceParam(param.name, values)
    raise ConfigError(f"search space parameter {param.name!r} has no domain")
