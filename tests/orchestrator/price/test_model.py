"""A method's cost model: a prior of the right shape, learned where records say more, with intervals that hold."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from contract.cost import OVERHEAD_PART
from contract.families import load_families
from orchestrator.price import (
    KAPPA,
    PROBE_GRAPHS,
    Z80,
    EpochsModel,
    Size,
    interval,
    learn_cost_model,
    learn_method_model,
    size_values,
    trial_costs,
)
from tests.orchestrator.price.helpers import SMALL, gcn_law, records, size_of


def test_without_the_probe_the_prior_still_makes_cost_grow_with_the_work():
    """Three tiny graphs cannot tell how cost grows: the ridge of old priced gcn flat (a slope of 0.003). Now the
    prior's shape carries it, so a 40 times larger graph costs more, and its interval says the price is far out."""
    model = learn_cost_model(records(SMALL)).methods["gcn"]
    config = {"hidden": 64, "num_layers": 2, "max_epochs": 500, "patience": 50}
    small, large = (size_values(size_of(name), "10/10/80") for name in ("wisconsin", "minesweeper"))
    assert model.seconds([large], [config])[0] > 2 * model.seconds([small], [config])[0]
    assert model.peak_bytes([large], [config])[0] > model.peak_bytes([small], [config])[0]
    assert model.distance(large)[0] > 1 and model.distance(small)[0] == 0


def test_a_term_the_records_cannot_tell_apart_keeps_the_prior_weight():
    """Every probe graph here has one feature count: nodes x features and nodes x hidden^2 move together, so the
    records alone could give either all the weight; the prior holds their ratio where the records say nothing."""
    fixed = [g for g in PROBE_GRAPHS if g.features == 128]
    frame = records([g.name for g in fixed], calibration=True)
    model = learn_cost_model(frame).methods["gcn"]
    theta = model.weights.theta
    weights = model.design.time_weights
    names = [t.name for t in model.design.prior.epoch]
    free = model.design.free_columns
    feature, dense = names.index("nodes*features*hidden") + free, names.index("nodes*hidden*hidden*num_layers") + free
    assert theta[feature] > 0 and theta[dense] > 0
    assert 0.2 < (theta[feature] / theta[dense]) / (weights[feature] / weights[dense]) < 5


def test_an_interval_contains_its_estimate_and_widens_with_extrapolation():
    for sigma in (0.0, 0.1, 0.7):
        for distance in (0.0, 1.0, 5.0):
            low, high = interval(84_890.0, sigma, distance)
            assert low <= 84_890.0 <= high
    narrow, wide = interval(1.0, 0.2, 0.0), interval(1.0, 0.2, 3.0)
    assert wide[1] > narrow[1] and wide[0] < narrow[0]
    assert math.isclose(math.log(wide[1]), Z80 * math.hypot(0.2, KAPPA * 3.0))


def test_epochs_are_what_early_stopping_leaves():
    model = EpochsModel.learn(
        [{"max_epochs": 500, "patience": 50}] * 3, [{"best_epoch": 10}, {"best_epoch": 30}, {"best_epoch": 460}], {}
    )
    assert model.expected({"max_epochs": 500, "patience": 50}) == pytest.approx((61 + 81 + 500) / 3)
    assert model.expected({"max_epochs": 100, "patience": 300}) == 100
    assert model.expected({"depth": 3}) == 1.0  # no epochs key: one pass
    prior = EpochsModel.learn([], [], {"max_epochs": 500})
    assert prior.from_prior and prior.expected({"max_epochs": 500, "patience": 50}) == 101


def overhead_law(size: Size, regime: str, config: dict, epochs: float) -> tuple[float, float]:
    """gcn's law plus what a CPU framework pays per layer and epoch whatever the graph (5 ms here)."""
    seconds, peak = gcn_law(size, regime, config, epochs)
    return seconds + epochs * 0.005 * config["num_layers"], peak


def test_a_per_layer_overhead_is_weighed_by_the_records_alone():
    """A framework's fixed calls per layer and epoch are no graph's work: the family's ``overhead`` gives them a
    column that no prior weight pulls on, and the fit finds the 5 ms the records hold; without it the same records
    fit worse (the calls are charged to work terms that grow with depth and with the graph)."""
    frame = pd.concat([records(SMALL, overhead_law), records([g.name for g in PROBE_GRAPHS], overhead_law, 1, True)])
    costs = trial_costs(frame)
    sizes = {name: size_of(name) for name in costs["dataset"].unique()}
    family = load_families()["gnn"]
    plain = dataclasses.replace(family, cost={k: v for k, v in family.cost.items() if k != OVERHEAD_PART})
    errors = {}
    for name, fam in (("overhead", family), ("plain", plain)):
        model = learn_method_model(costs, sizes, {"gnn": fam})
        assert model is not None
        values = [size_values(sizes[d], r) for d, r in zip(costs["dataset"], costs["regime"], strict=True)]
        epochs = np.array([float(i["epochs"]) for i in costs["info"]])
        predicted = model.seconds(values, list(costs["config"]), epochs)
        errors[name] = float(np.sqrt(np.mean(np.log(predicted / costs["seconds"].to_numpy()) ** 2)))
        if name == "overhead":
            assert model.design.free_columns == 3 and 0.6 < model.weights.theta[2] / 0.005 < 1.5, model.weights.theta
    assert errors["overhead"] < 0.11 < errors["plain"], errors  # the records' noise is 10%
