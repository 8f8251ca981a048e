"""The search-space types: configs checked against defaults and space, params and values through proto."""

import pytest

from contract.space import (
    EPOCHS_KEY,
    ChoiceParam,
    ConfigError,
    FloatParam,
    IntParam,
    capped_epochs,
    param_from_proto,
    param_to_proto,
    validate_config,
    value_from_proto,
    value_to_proto,
)

DEFAULTS = {"lr": 0.01, "hidden": 64, "norm": "none", "residual": False, "max_epochs": 100}
SPACE = (
    FloatParam("lr", 1e-4, 1e-1, log=True),
    IntParam("hidden", 8, 256, log=True),
    ChoiceParam("norm", ("none", "batch", "layer")),
    ChoiceParam("residual", (False, True)),
)


def test_validate_merges_over_defaults_and_coerces_exact_ints():
    cfg = validate_config({"lr": 0.05, "hidden": 32.0}, DEFAULTS, SPACE)
    assert cfg == {**DEFAULTS, "lr": 0.05, "hidden": 32}
    assert isinstance(cfg["hidden"], int)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"lr": "fast"}, "must be a number"),
        ({"lr": 5.0}, "outside"),
        ({"hidden": 3.5}, "must be an integer"),
        ({"norm": "group"}, "not one of"),
        ({"residual": 1}, "not one of"),
        ({"max_epochs": "ten"}, "must be int"),
        ({"max_epochs": -1}, "must be positive"),
        ({"max_epochs": 0}, "must be positive"),
        ({"dropout_rate": 0.1}, "unknown config key"),
    ],
)
def test_validate_refuses_wrong_types_ranges_and_keys(config, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(config, DEFAULTS, SPACE)


def test_params_and_values_round_trip_through_proto():
    for p in SPACE:
        assert param_from_proto(param_to_proto(p)) == p
    for v in (3, 2.5, "x", True, False):
        back = value_from_proto(value_to_proto(v))
        assert back == v and type(back) is type(v)


def test_capped_epochs_shortens_only_a_longer_integer_training_length():
    assert capped_epochs(DEFAULTS, 20) == {EPOCHS_KEY: 20}
    assert capped_epochs(DEFAULTS, 200) == {}
    assert capped_epochs({"lr": 0.1}, 20) == {}
    assert capped_epochs({EPOCHS_KEY: True}, 0) == {}
