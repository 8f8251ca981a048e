"""A method's resource check refuses exactly what its family's manifest declares (``[cost]``'s ``check``, read by
``contract.cost``): one memory model, which the price reads too, so re-measuring it cannot leave a copy stale.

Each check is asked at a budget just above the declared bytes (it must let the configuration through) and just
below (it must refuse), on graphs and configurations drawn from the method's search space; the declared bytes are
computed here from the manifest alone, so a check that counts anything else, a constant of its own included, fails.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import methods.sdk.memory as memory
from contract.cost import check_sizes, cost_prior
from contract.families import load_families
from contract.space import ChoiceParam, FloatParam, IntParam, validate_config
from contract.wire import GraphBundle, make_bundle
from methods.families import method_classes
from methods.sdk import ResourceError, TorchNodeClassifier

CPU = torch.device("cpu")
FAMILIES = load_families()
CONFIGS = 12  # drawn per method, after its default
RELATIVE = 1e-6  # a budget this much above or below the declared bytes


def checked_methods() -> list[tuple[str, type[TorchNodeClassifier]]]:
    """(family, class) of every method that overrides ``check_resources``."""
    found = []
    for name, family in FAMILIES.items():
        for cls in method_classes(family):
            if issubclass(cls, TorchNodeClassifier) and cls.check_resources is not TorchNodeClassifier.check_resources:
                found.append((name, cls))
    return found


CHECKED = checked_methods()


def graph(nodes: int, edges: int, features: int, classes: int, seed: int) -> GraphBundle:
    rng = np.random.default_rng(seed)
    pairs = rng.integers(0, nodes, size=(2, edges))
    edge_index = np.concatenate([pairs, pairs[::-1]], axis=1).astype(np.int64)
    x = rng.random((nodes, features), dtype=np.float32)
    return make_bundle(x, edge_index, rng.integers(0, classes, nodes).astype(np.int64), classes)


GRAPHS = [graph(40, 100, 12, 3, 0), graph(300, 50, 5, 2, 1), graph(120, 900, 30, 7, 2)]


def draw(cls: type[TorchNodeClassifier], rng: random.Random) -> dict:
    config = dict(cls.default_config)
    for param in cls.search_space:
        if isinstance(param, ChoiceParam):
            config[param.name] = rng.choice(param.values)
        elif isinstance(param, IntParam):
            config[param.name] = rng.randint(param.low, param.high)
        elif isinstance(param, FloatParam):
            config[param.name] = rng.uniform(param.low, param.high)
    return validate_config(config, cls.default_config, cls.search_space)


def declared(family: str, cls: type[TorchNodeClassifier], bundle: GraphBundle, config: dict) -> float:
    check = cost_prior(cls.name, FAMILIES[family]).check
    assert check is not None, f"{cls.name} checks its memory; methods/{family}/manifest.toml must declare its check"
    sizes = check_sizes(bundle.num_nodes, bundle.edge_index.shape[1], bundle.features.shape[1], bundle.num_classes)
    return check.bytes(sizes, config)


def refuses(cls: type[TorchNodeClassifier], bundle: GraphBundle, config: dict, budget: float) -> bool:
    memory.memory_budget_bytes = lambda device: int(budget)  # type: ignore[assignment]
    try:
        cls().check_resources(bundle, config, CPU)
    except ResourceError:
        return True
    return False


def test_the_methods_that_check_their_memory_are_found():
    names = {cls.name for _, cls in CHECKED}
    assert {"gat", "gatv2", "gcnii", "jknet", "fagcn", "polynormer", "sgformer", "nagphormer", "graphgps"} <= names


def test_a_declared_check_belongs_to_a_method_that_checks():
    """A ``check`` in a manifest is read by a method's resource check: none is declared for a method without one."""
    checked = {cls.name for _, cls in CHECKED}
    declared_for = {m for f in FAMILIES.values() for m in f.methods if cost_prior(m, f).check is not None}
    assert declared_for <= checked, declared_for - checked


@pytest.mark.parametrize(("family", "cls"), CHECKED, ids=[cls.name for _, cls in CHECKED])
def test_a_check_refuses_what_its_manifest_declares(family, cls, monkeypatch):
    monkeypatch.setattr(memory, "memory_budget_bytes", memory.memory_budget_bytes)  # restored after the test
    rng = random.Random(cls.name)
    wrong = []
    for bundle in GRAPHS:
        for config in [dict(cls.default_config), *(draw(cls, rng) for _ in range(CONFIGS))]:
            expected = declared(family, cls, bundle, config)
            above, below = expected * (1 + RELATIVE) + 1, expected * (1 - RELATIVE) - 1
            if refuses(cls, bundle, config, above) or (expected > 2 and not refuses(cls, bundle, config, below)):
                wrong.append(f"{bundle.num_nodes} nodes, {config}: declared {expected:,.0f} bytes")
    assert not wrong, f"{cls.name}'s check disagrees with methods/{family}/manifest.toml [cost] check:\n" + "\n".join(
        wrong[:3]
    )
