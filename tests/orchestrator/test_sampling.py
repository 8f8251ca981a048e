"""The config sampler: a sweep cell's sequence starts at the defaults, is unique, prefix-stable and pinned."""

import pytest

from contract.space import ChoiceParam, FloatParam, IntParam, validate_config
from orchestrator.sampling import config_sequence, sequence_key, sequence_length
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


def _spaces():
    """Spaces that exhaust, repeat, collide with their default, or never run out: every path sequence_length takes."""
    from hypothesis import strategies as st

    choice_values = st.lists(st.sampled_from([0, 1, 2, 1.0, True, False, "a", "b", 0.5]), min_size=1, max_size=4)
    param = st.one_of(
        st.builds(ChoiceParam, st.sampled_from(["a", "b", "c"]), choice_values.map(tuple)),
        st.builds(
            lambda n, lo, w, log: IntParam(n, lo, lo + w, log),
            st.sampled_from(["a", "d"]),
            st.integers(1, 4),
            st.integers(0, 300),
            st.booleans(),
        ),
        st.builds(
            lambda n, lo, w, log: FloatParam(n, lo, lo + w, log),
            st.sampled_from(["e", "f"]),
            st.floats(0.001, 1.0),
            st.sampled_from([0.0, 1e-12, 0.5, 10.0]),
            st.booleans(),
        ),
    )
    defaults = st.dictionaries(
        st.sampled_from(["a", "b", "c", "d", "e", "f", "z"]), st.sampled_from([0, 1, 1.0, True, "a", 0.5, 3])
    )
    return st.tuples(defaults, st.lists(param, max_size=3).map(tuple), st.integers(0, 40))


def test_sequence_length_is_the_length_of_the_sequence():
    from hypothesis import given, settings

    @settings(max_examples=120, deadline=None, derandomize=True)
    @given(_spaces())
    def check(case):
        defaults, space, budget = case
        assert sequence_length(defaults, space, "m|d|10/10/80|0", budget) == len(
            config_sequence(defaults, space, "m|d|10/10/80|0", budget)
        )

    check()


def test_sequence_length_of_every_built_in_method_at_the_protocol_budget():
    from contract.descriptions import read_description
    from contract.families import load_families

    for family in load_families().values():
        for name, spec in read_description(family).items():
            key = sequence_key(name, "cora", "50/25/25", 0)
            assert sequence_length(spec.default_config, spec.search_space, key, 201) == len(
                config_sequence(spec.default_config, spec.search_space, key, 201)
            ), name
