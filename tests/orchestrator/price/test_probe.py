"""The cost probe's loop: graph after graph while a method's budget lasts, resumable, never blocked by one family."""

from __future__ import annotations

import pandas as pd

from contract.families import load_families
from orchestrator.cli.specs import plan_specs
from orchestrator.price import (
    PROBE_CONFIGS,
    PROBE_EPOCHS,
    PROBE_GRAPHS,
    PROBE_REGIMES,
    SUPERVISED_SECONDS,
    calibrate,
    methods_to_probe,
)
from orchestrator.protocols import CALIBRATION

TRIALS = PROBE_CONFIGS * len(PROBE_REGIMES)


class FakeProbe:
    """Runs a step by writing its trials' rows: each method's trial costs ``per_node[method]`` s per 1,000 nodes."""

    def __init__(self, per_node: dict[str, float], not_ready: frozenset[str] = frozenset()) -> None:
        self.per_node, self.not_ready = per_node, not_ready
        self.rows: list[dict] = []
        self.steps: list[tuple[str, tuple[str, ...]]] = []

    def run(self, plan) -> dict[str, str]:
        assert plan.protocol == CALIBRATION and plan.epochs_cap == PROBE_EPOCHS and plan.splits == (0,)
        (name,) = plan.datasets
        self.steps.append((name, plan.methods))
        nodes = next(g.nodes for g in PROBE_GRAPHS if g.name == name)
        for method in plan.methods:
            if method in self.not_ready:
                continue
            seconds = self.per_node[method] * nodes / 1000 / TRIALS
            self.rows += [{"method": method, "dataset": name, "status": "ok", "fit_service_s": seconds,
                           "predict_service_s": 0.0}] * TRIALS  # fmt: skip
        return {m: "weights missing" for m in plan.methods if m in self.not_ready}

    def stored(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=["method", "dataset", "status", "fit_service_s", "predict_service_s"])


def _probe(fake: FakeProbe, methods=("mlp", "gcn")):
    families = load_families()
    owners = {m: f for f in families.values() for m in f.methods}
    return calibrate(plan_specs(methods, {}), {m: owners[m] for m in methods}, fake.run, fake.stored)


def test_a_method_grows_while_its_budget_lasts_and_a_cheap_one_probes_every_graph():
    fake = FakeProbe({"mlp": 0.01, "gcn": 2.0})
    progress = {p.method: p for p in _probe(fake)}
    assert len(progress["mlp"].graphs) == len(PROBE_GRAPHS) and progress["mlp"].stopped == "every probe graph done"
    gcn = progress["gcn"]
    assert 2 <= len(gcn.graphs) < len(PROBE_GRAPHS) and gcn.spent <= SUPERVISED_SECONDS
    assert "would take about" in gcn.stopped  # stopped before a graph its budget could not pay for


def test_a_resumed_probe_runs_nothing_it_has_stored():
    fake = FakeProbe({"mlp": 0.01, "gcn": 2.0})
    first = _probe(fake)
    steps = len(fake.steps)
    again = _probe(fake)
    assert len(fake.steps) == steps  # every step found in the store: no service is asked for anything
    assert [(p.method, p.graphs, round(p.spent, 6)) for p in again] == [
        (p.method, p.graphs, round(p.spent, 6)) for p in first
    ]


def test_a_family_that_is_not_ready_is_named_and_the_others_go_on():
    fake = FakeProbe({"mlp": 0.01, "graphany": 0.01}, not_ready=frozenset({"graphany"}))
    progress = {p.method: p for p in _probe(fake, ("mlp", "graphany"))}
    assert progress["graphany"].stopped == "not run: weights missing" and progress["graphany"].graphs == []
    assert len(progress["mlp"].graphs) == len(PROBE_GRAPHS)


def test_the_probe_graphs_grow_and_vary_degree_and_features_apart_from_nodes():
    nodes = [g.nodes for g in PROBE_GRAPHS]
    assert nodes == sorted(nodes) and nodes[0] == 500 and nodes[-1] == 128_000
    assert len({g.degree for g in PROBE_GRAPHS}) >= 4 and len({g.features for g in PROBE_GRAPHS}) >= 4


def test_what_is_left_to_probe_is_found_without_running_anything():
    families = load_families()
    owners = {m: f for f in families.values() for m in f.methods}
    specs, of = plan_specs(("mlp", "gcn"), {}), {m: owners[m] for m in ("mlp", "gcn")}
    fake = FakeProbe({"mlp": 0.01, "gcn": 2.0})
    assert methods_to_probe(specs, of, fake.stored) == ["mlp", "gcn"] and fake.steps == []
    _probe(fake, ("mlp",))
    steps = len(fake.steps)
    assert methods_to_probe(specs, of, fake.stored) == ["gcn"]
    _probe(fake)
    assert methods_to_probe(specs, of, fake.stored) == [] and len(fake.steps) > steps  # up to date: nothing to run
