"""The 15 supervised methods as data: manifests, defaults, search spaces, versions."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from contract.families import load_families
from contract.space import ChoiceParam, FloatParam, IntParam
from methods.families import method_classes

# The benchmark's definition (SPEC: the 15 supervised methods), checked against what the code declares.
EXPECTED = {
    "gnn": ["mlp", "gcn", "graphsage", "gat", "gatv2", "gin", "appnp", "jknet", "gcnii", "gprgnn", "fagcn"],
    "graphtransformer": ["polynormer", "sgformer", "nagphormer", "graphgps"],
}
STRONG_BASELINE_KNOBS = {"residual", "norm", "jk", "input_dropout"}


def all_methods() -> list:
    families = load_families()
    return [m for name in EXPECTED for m in method_classes(families[name])]


def test_families_host_the_fifteen_methods() -> None:
    families = load_families()
    for name, methods in EXPECTED.items():
        assert sorted(families[name].methods) == sorted(methods)  # read from the source, torch-free
        assert [m.name for m in method_classes(families[name])] == list(
            families[name].methods
        )  # the service hosts the same
    assert families["graphtransformer"].image == "nodeground/graphtransformer"
    assert families["graphtransformer"].module == "methods.graphtransformer"
    assert len(all_methods()) == 15


@pytest.mark.parametrize("method", all_methods(), ids=lambda m: m.name)
def test_defaults_and_space_are_consistent(method) -> None:
    dt.date.fromisoformat(method.version[:10])  # a frozen, dated definition (a suffix tells a second one that day)
    assert method.kind == "supervised" and method.description
    defaults = method.default_config
    for key in ("lr", "weight_decay", "max_epochs", "patience", "optimizer"):
        assert key in defaults, f"{method.name} lacks {key}"
    assert method.resolve_config(dict(defaults)) == defaults  # the default lies inside its own space
    names = [p.name for p in method.search_space]
    assert len(names) == len(set(names))
    for param in method.search_space:
        assert param.name in defaults, f"{method.name}: {param.name} has no default"
        if isinstance(param, ChoiceParam):
            assert len(param.values) >= 2
        elif isinstance(param, (FloatParam, IntParam)):
            assert param.low < param.high
    for key in ("lr", "weight_decay", "dropout"):
        assert key in names, f"{method.name} does not tune {key}"
    assert "hidden" in names


def test_stack_gnns_offer_the_strong_baseline_options() -> None:
    for method in all_methods():
        if method.name in ("mlp", "gcn", "graphsage", "gat", "gatv2", "gin"):
            assert STRONG_BASELINE_KNOBS <= {p.name for p in method.search_space}, method.name


def test_every_family_declares_the_kind_its_methods_have() -> None:
    """The manifest's kind is what `orchestrator methods list` shows without importing model code."""
    families = load_families()
    assert sorted(f.name for f in families.values() if f.kind == "supervised") == sorted(EXPECTED)
    for family in families.values():
        assert {m.kind for m in method_classes(family)} == {family.kind}, family.name
    with pytest.raises(RuntimeError, match="manifest says kind 'gfm'"):
        method_classes(dataclasses.replace(families["gnn"], kind="gfm"))


@pytest.mark.parametrize(
    "folder, family", [("gnn", "graph-nn"), ("graph_nn", "graph_nn"), ("graph-nn", "graph-nn"), ("Gnn", "Gnn")]
)
def test_a_family_is_named_by_its_folder_in_lowercase_letters_and_digits(tmp_path, folder, family) -> None:
    """One name serves as folder, Python module, image, compose, Swarm and Kubernetes service (a DNS label)."""
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "manifest.toml").write_text(f'family = "{family}"\n')
    with pytest.raises(ValueError, match="must be its folder's name, 2-40 lowercase letters and digits"):
        load_families(tmp_path)
    assert all(name.isalnum() and name.islower() for name in load_families())
