"""One memory-budget rule for every family: a fraction of the available memory, or the environment's bytes."""

from __future__ import annotations

import pytest
import torch

import methods.sdk.memory as memory
from methods.gnn import GCNII
from methods.sdk import ResourceError, require_memory

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def no_budget_override(monkeypatch):
    monkeypatch.delenv(memory.BUDGET_ENV, raising=False)


def test_the_budget_is_a_fraction_of_the_available_memory(monkeypatch):
    monkeypatch.setattr(memory, "available_memory_bytes", lambda device: 8 << 30)
    assert memory.memory_budget_bytes(CPU) == int(0.75 * (8 << 30)) == int(memory.BUDGET_FRACTION * (8 << 30))
    require_memory("m", 0.75 * (8 << 30), CPU, "all of it")  # at the budget: allowed
    with pytest.raises(
        ResourceError,
        match=(
            r"m: a bit more needs about 6\.0 GiB on cpu \(estimated\), over the memory budget of 6\.0 GiB \(75% of "
            r"the 8\.0 GiB free\)"
        ),
    ):
        require_memory("m", 0.75 * (8 << 30) + 1, CPU, "a bit more")


def test_the_environment_sets_the_budget_of_every_family(monkeypatch, multiclass):
    """A supervised method's check obeys NODEGROUND_MEMORY_BUDGET_BYTES as the in-context families' does."""
    bundle, _, _ = multiclass
    monkeypatch.setattr(memory, "available_memory_bytes", lambda device: 1 << 40)
    GCNII().check_resources(bundle, GCNII.default_config, CPU)
    monkeypatch.setenv(memory.BUDGET_ENV, "1000")
    with pytest.raises(ResourceError, match=rf"gcnii: .* over the memory budget of 1000 B \({memory.BUDGET_ENV}\)"):
        GCNII().check_resources(bundle, GCNII.default_config, CPU)
    monkeypatch.setenv(memory.BUDGET_ENV, "lots")
    with pytest.raises(ValueError, match=f"{memory.BUDGET_ENV}=.lots.: must be an integer in"):
        memory.memory_budget_bytes(CPU)


def test_named_parts_are_summed_listed_and_reported(monkeypatch):
    monkeypatch.setenv(memory.BUDGET_ENV, "3000")
    info: dict = {}
    require_memory("pfn", {"weights": 1024, "attention": 1024}, CPU, "in-context inference", info)
    assert info == {"memory_estimate_bytes": 2048, "memory_budget_bytes": 3000}
    with pytest.raises(
        ResourceError,
        match=(
            r"pfn: in-context inference needs about 4\.0 KiB on cpu \(estimated: weights 2\.0 KiB, attention 2\.0 "
            r"KiB\)"
        ),
    ):
        require_memory("pfn", {"weights": 2048, "attention": 2048}, CPU, "in-context inference", info)
    assert info["memory_estimate_bytes"] == 4096
