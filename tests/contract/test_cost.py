"""The cost prior's grammar (contract/cost.py): every family's prior well-formed, a malformed one refused in one line,
what each kind of factor counts, and the resource check's terms named from the prior."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.cost import (
    GENERIC_PRIOR,
    SIZE_NAMES,
    CostPrior,
    PriorError,
    Term,
    cost_prior,
    prior_problems,
    prior_table,
)
from contract.descriptions import read_description
from contract.families import Family, load_families


def test_every_family_declares_a_prior_over_sizes_and_its_own_configuration_keys():
    for family in load_families().values():
        specs = read_description(family) or {}
        for method in family.methods:
            prior = cost_prior(method, family)
            assert prior is not GENERIC_PRIOR, f"{family.name}: no [cost] in its manifest"
            assert prior.memory, f"{method}: a prior must say what the peak holds"
            if method in specs:
                assert prior.problems(specs[method].default_config) == []
            assert any("arcs" in t.factors or "edges" in t.factors for t in prior.memory)
            if family.kind == "supervised" and method != "mlp":  # message passing: at least linear in arcs
                assert any("arcs" in t.factors for t in prior.epoch + prior.once), method


@pytest.mark.parametrize(
    "table, message",
    [
        ({"epoch": {"nodes**hidden": 1}}, "must be names joined by '*'"),
        ({"epoch": {"nodes": -1}}, "must be a positive number"),
        ({"epoch": {"nodes": True}}, "must be a positive number"),
        ({"epochs": {"nodes": 1}}, "unknown part"),
        ({"epoch": "nodes"}, "must be a table"),
        ({"epoch": {"nodes*dropout>": 1}}, "key>number"),
        ({"epoch": {"nodes*dropout>low": 1}}, "key>number"),
        ({"overhead": "num_layers"}, "must be a list"),
        ({"overhead": ["nodes*num_layers"]}, "names a graph size"),
    ],
)
def test_a_malformed_prior_is_refused_in_one_line(table, message):
    family = Family("x", "nodeground/x", "methods.x", ("m",), cost=table)
    with pytest.raises(PriorError, match=message) as caught:
        cost_prior("m", family)
    assert "\n" not in str(caught.value) and "methods/x/manifest.toml" in str(caught.value)


def test_a_comparison_counts_a_term_where_the_configuration_runs_it_at_all():
    """A dropout draws a random number per element at any rate above 0, and none at 0 (torch skips it)."""
    term = Term.parse("nodes*features*input_dropout>0", 64, "here")
    assert [term.config_part({"input_dropout": p}) for p in (0.0, 0.05, 0.6)] == [0.0, 1.0, 1.0]
    assert term.config_part({}) == 0.0 and term.config_part({"input_dropout": "high"}) == 0.0
    assert term.config_keys() == {"input_dropout"}
    assert Term.parse("nodes*jk=lstm*num_layers>2", 1, "here").config_part({"jk": "lstm", "num_layers": 3}) == 1.0


def test_a_prior_names_sizes_and_configuration_keys_only():
    prior = CostPrior(epoch=(), once=(), memory=(), source="s")
    assert prior.problems({}) == []
    families = load_families()
    assert cost_prior("gat", families["gnn"]).problems({"hidden": 1}) != []  # heads, num_layers are gat's
    assert set(SIZE_NAMES) == {"nodes", "edges", "arcs", "features", "classes", "train"}


def test_the_manual_lists_every_familys_prior_as_the_manifests_declare_it():
    manual = (Path(__file__).resolve().parents[2] / "docs" / "estimate.md").read_text()
    assert prior_table() in manual, "docs/estimate.md is stale: paste contract.cost.prior_table() into it"


@pytest.mark.parametrize(
    "check, message",
    [
        ({"memory": "arcs"}, "must be a list"),
        ({"beyond": ["arcs"]}, "must be a list"),
        ({"memory": ["nodes*hidden"]}, "the memory part does not declare"),
        ({"memory": ["arcs"], "refuse": {}}, "must be a table of memory and beyond"),
        ({}, "counts no term"),
        ({"beyond": {"arcs*hidden": 0}}, "must be a positive number"),
    ],
)
def test_a_malformed_check_is_refused_in_one_line(check, message):
    family = Family("x", "nodeground/x", "methods.x", ("m",), cost={"memory": {"arcs": 40}, "m": {"check": check}})
    with pytest.raises(PriorError, match=message):
        cost_prior("m", family)
    assert prior_problems(family) and "[cost.m]" in prior_problems(family)[0]


def test_a_check_counts_the_priors_own_memory_terms_and_what_it_declares_beyond():
    """A term the check names from the memory part is that term (its weight is the prior's, so re-measuring it moves
    both); the terms beyond the prior are the check's alone."""
    check_table = {"memory": ["nodes*hidden"], "beyond": {"arcs*hidden*norm=batch": 8}}
    cost = {"memory": {"nodes * hidden": 48, "arcs": 40}, "check": check_table}
    family = Family("x", "nodeground/x", "methods.x", ("m",), cost=cost)
    check = cost_prior("m", family).check
    assert check is not None and check.counted == (Term(("nodes", "hidden"), 48.0),)
    size = dict.fromkeys(SIZE_NAMES, 10.0)
    assert check.bytes(size, {"hidden": 2, "norm": "batch"}) == 48 * 10 * 2 + 8 * 10 * 2
    assert check.bytes(size, {"hidden": 2, "norm": "none"}) == 48 * 10 * 2
    assert cost_prior("m", family).problems({"hidden": 1}) == [
        "methods/x/manifest.toml [cost]: arcs*hidden*norm=batch names ['norm'], neither a size (nodes, edges, arcs, "
        "features, classes, train) nor a configuration key"
    ]


def test_every_familys_prior_is_well_formed_where_the_family_is():
    """What `methods serve`, `methods new` and the family layout test ask (``prior_problems``): nothing, for every
    family of this checkout."""
    for family in load_families().values():
        specs = read_description(family) or {}
        assert prior_problems(family, {m: s.default_config for m, s in specs.items()}) == [], family.name
