"""The random-init structure switch: a preset name, a JSON object, or a one-line refusal."""

from __future__ import annotations

import pytest

from contract.weights import WeightsError
from methods.sdk.frozen import ARCH_ENV, TINY_ARCH, arch_overrides


@pytest.mark.parametrize("raw,expected", [("", {}), ("tiny", TINY_ARCH), (' {"nlayers": 2} ', {"nlayers": 2})])
def test_the_random_structure_is_a_preset_or_json(monkeypatch, raw, expected):
    monkeypatch.setenv(ARCH_ENV, raw)
    assert arch_overrides() == expected


@pytest.mark.parametrize("raw", ["small", "[1, 2]", "{nlayers: 2"])
def test_anything_else_is_refused_in_one_line_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv(ARCH_ENV, raw)
    with pytest.raises(WeightsError, match=f"^{ARCH_ENV}=.* is neither tiny nor a JSON object") as err:
        arch_overrides()
    assert "\n" not in str(err.value)
