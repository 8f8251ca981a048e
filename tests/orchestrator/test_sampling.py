"""The config sampler: a sweep cell's sequence starts at the defaults, is unique, prefix-stable and pinned."""

import pytest

from contract.space import ChoiceParam, validate_config
from orchestrator.sampling import config_sequence
from tests.contract.test_space import DEFAULTS, SPACE


def test_sequence_starts_with_default_is_unique_in_range_and_prefix_stable():
    long = config_sequence(DEFAULTS, SPACE, "gcn|cora|10/10/80|0", 40)
    short = config_sequence(DEFAULTS, SPACE, "gcn|cora|10/10/80|0", 5)
    assert long[0] == DEFAULTS
    assert long[:5] == short
    assert len({tuple(sorted(c.items())) for c in long}) == 40
    for c in long:
        validate_config(c, DEFAULTS, SPACE)  # every sampled config is valid


def test_sequences_depend_on_the_cell_key():
    a = config_sequence(DEFAULTS, SPACE, "gcn|cora|10/10/80|0", 6)
    b = config_sequence(DEFAULTS, SPACE, "gcn|cora|10/10/80|1", 6)
    assert a[0] == b[0] and a[1:] != b[1:]


def test_small_space_ends_when_exhausted():
    space = (ChoiceParam("norm", ("none", "batch")),)
    seq = config_sequence(DEFAULTS, space, "k", 10)
    assert [c["norm"] for c in seq] == ["none", "batch"]


def test_pinned_first_sample():
    # Pins the sampler's stream: any machine, any library version, the same draw.
    first = config_sequence(DEFAULTS, SPACE, "pinned", 2)[1]
    assert first == {
        "lr": pytest.approx(0.0020423326828859613, rel=1e-12),
        "hidden": 8,
        "norm": "none",
        "residual": True,
        "max_epochs": 100,
    }
