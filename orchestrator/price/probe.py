"""The cost probe: each method timed on synthetic graphs of growing size, so a price holds beyond a store's graphs.

A store of a few small graphs cannot say how a method's cost grows: every one of its terms is small there and a
trial's fixed overhead dominates. The probe runs each method, through the same services a sweep uses, on
``PROBE_GRAPHS``: stochastic block models from 500 to 128,000 nodes whose degree and feature count vary apart
from their node count (so per-node, per-feature and per-arc terms can be told apart), two configurations (the
default and one sampled) under each label regime, every fit capped at ``PROBE_EPOCHS`` epochs (the records time
an epoch; the epochs a real fit runs come from real records). A method moves to the next, larger graph while its
probe stays within its budget: ``SUPERVISED_SECONDS`` of service time for a supervised method (15 of them: about
ten minutes on two cores), ``GFM_SECONDS`` for a GFM, whose fits are longer; it stops before a graph whose
predicted cost (the last graph's, scaled by the method's cost prior) would exceed what is left, or after a trial
that did not end ``ok``.

The records are ordinary trial records with ``protocol = calibration``: a rerun skips what is stored (the probe
resumes), ``plan --estimate`` learns from them, and ``show``, ``export`` and ``report`` never show them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from contract.cost import cost_prior
from contract.descriptions import MethodSpec
from contract.families import Family
from orchestrator.data.fetch import cache_dir
from orchestrator.data.synthetic import CalibrationGraph
from orchestrator.plan import SweepPlan
from orchestrator.price.model import Design, EpochsModel
from orchestrator.price.sizes import Size, size_values
from orchestrator.protocols import CALIBRATION
from orchestrator.records import STATUS_OK, STATUS_UNAVAILABLE

# Each graph asks about 1.5-4x the work of the one before (so a method grows as far as its budget allows), and
# degree and feature count move apart from the node count (so per-node, per-feature and per-arc terms separate).
PROBE_GRAPHS: tuple[CalibrationGraph, ...] = (
    CalibrationGraph(nodes=500, degree=4, features=32, classes=3),
    CalibrationGraph(nodes=1_000, degree=8, features=128, classes=5),
    CalibrationGraph(nodes=2_000, degree=4, features=512, classes=2),
    CalibrationGraph(nodes=4_000, degree=16, features=64, classes=7),
    CalibrationGraph(nodes=8_000, degree=8, features=256, classes=3),
    CalibrationGraph(nodes=16_000, degree=4, features=128, classes=10),
    CalibrationGraph(nodes=32_000, degree=12, features=64, classes=5),
    CalibrationGraph(nodes=64_000, degree=6, features=128, classes=2),
    CalibrationGraph(nodes=128_000, degree=8, features=64, classes=5),
)
PROBE_REGIMES = ("10/10/80", "50/25/25")
PROBE_CONFIGS = 2  # per regime: the default and one sampled configuration
PROBE_EPOCHS = 10
SUPERVISED_SECONDS = 36.0  # one supervised method's probe, in service seconds (15 methods: about 10 minutes)
GFM_SECONDS = 120.0  # one GFM's probe


def calibration_store() -> Path:
    """Where this machine keeps its probe's records (``$NODEGROUND_CACHE/calibration.sqlite``)."""
    return cache_dir() / "calibration.sqlite"


@dataclass
class ProbeProgress:
    """Where the probe of one method stands: the service seconds it spent and why it stopped growing."""

    method: str
    budget: float
    spent: float = 0.0
    graphs: list[str] = field(default_factory=list)  # probed, smallest first
    stopped: str = ""  # why it went no further ("" while it may)


def budget_of(spec: MethodSpec) -> float:
    return GFM_SECONDS if spec.kind == "gfm" else SUPERVISED_SECONDS


def probe_plan(methods: Sequence[str], graph: CalibrationGraph, time_limit: float) -> SweepPlan:
    """One step of the probe: these methods on one graph, both regimes, split 0, epochs capped."""
    return SweepPlan(
        methods=tuple(methods),
        datasets=(graph.name,),
        regimes=PROBE_REGIMES,
        splits=(0,),
        budget=PROBE_CONFIGS,
        time_limit=time_limit,
        protocol=CALIBRATION,
        epochs_cap=PROBE_EPOCHS,
    )


def prior_work(spec: MethodSpec, family: Family | None, graph: CalibrationGraph) -> float:
    """The method's work on ``graph`` by its cost prior (default configuration, capped epochs): to scale a cost."""
    config = dict(spec.default_config)
    design = Design(cost_prior(spec.name, family), "max_epochs" in config)
    size = Size(graph.nodes, graph.edges, graph.features, graph.classes, False)
    epochs = min(PROBE_EPOCHS, EpochsModel.earliest().expected(config)) if design.has_epochs else 1.0
    values = size_values(size, PROBE_REGIMES[0])
    return design.work(values, config, epochs) + 1e-9


def step_trials(records: pd.DataFrame, method: str, graph: CalibrationGraph) -> int:
    """How many of ``method``'s probe trials on ``graph`` a store holds with an outcome (not ``unavailable``)."""
    rows = records[(records["method"] == method) & (records["dataset"] == graph.name)]
    return int(rows["status"].ne(STATUS_UNAVAILABLE).sum())


def step_outcome(records: pd.DataFrame, method: str, graph: CalibrationGraph) -> tuple[float, bool]:
    """The service seconds of ``method``'s probe trials on ``graph`` in a store's records, and whether all were ok."""
    rows = records[(records["method"] == method) & (records["dataset"] == graph.name)]
    seconds = float((rows["fit_service_s"].fillna(0) + rows["predict_service_s"].fillna(0)).sum())
    return seconds, bool(len(rows)) and bool(rows["status"].eq(STATUS_OK).all())


def calibrate(
    specs: Mapping[str, MethodSpec],
    families: Mapping[str, Family],
    run_step: Callable[[SweepPlan], Mapping[str, str]],
    stored: Callable[[], pd.DataFrame],
    on_step: Callable[[CalibrationGraph, list[ProbeProgress]], None] = lambda graph, progress: None,
) -> list[ProbeProgress]:
    """Probe every method of ``specs`` (method -> its spec; ``families``: method -> its family) graph by graph.

    ``run_step`` runs one step's plan (a sweep against the services, its records stored) and names the methods it
    could not run, with why (a service not ready); ``stored`` reads the store's records back (method, dataset,
    status, fit_service_s, predict_service_s), so a resumed probe counts the budget earlier runs spent.
    """
    progress = {m: ProbeProgress(m, budget_of(spec)) for m, spec in specs.items()}
    previous: dict[str, CalibrationGraph] = {}
    for graph in PROBE_GRAPHS:
        active = [p for p in progress.values() if not p.stopped]
        going = []
        for p in active:
            last = previous.get(p.method)
            if last is not None:
                last_seconds, _ = step_outcome(stored(), p.method, last)
                scale = prior_work(specs[p.method], families.get(p.method), graph) / prior_work(
                    specs[p.method], families.get(p.method), last
                )
                if p.spent + last_seconds * scale > p.budget:
                    p.stopped = f"{graph.name} would take about {last_seconds * scale:,.0f} s of {p.budget:g} s"
                    continue
            going.append(p)
        if not going:
            break
        records = stored()
        pending = [p for p in going if step_trials(records, p.method, graph) < PROBE_CONFIGS * len(PROBE_REGIMES)]
        left_out: Mapping[str, str] = {}
        if pending:  # a resumed probe starts no service for a graph it has done
            limit = max(p.budget - p.spent for p in pending)
            left_out = run_step(probe_plan([p.method for p in pending], graph, max(limit, 1.0)))
            records = stored()
        for p in going:
            if p.method in left_out:
                p.stopped = f"not run: {left_out[p.method]}"
                continue
            seconds, ok = step_outcome(records, p.method, graph)
            p.spent += seconds
            p.graphs.append(graph.name)
            previous[p.method] = graph
            if not ok:
                p.stopped = f"a trial on {graph.name} did not end ok"
            elif p.spent >= p.budget:
                p.stopped = f"budget of {p.budget:g} s spent"
        on_step(graph, list(progress.values()))
    for p in progress.values():
        p.stopped = p.stopped or "every probe graph done"
    return list(progress.values())


def methods_to_probe(
    specs: Mapping[str, MethodSpec], families: Mapping[str, Family], stored: Callable[[], pd.DataFrame]
) -> list[str]:
    """The methods ``calibrate`` would still run a step of, found from the store alone (nothing runs): none when the
    probe is up to date, so a caller starts no service and says so in one line."""
    wanted: list[str] = []

    def dry_step(plan: SweepPlan) -> Mapping[str, str]:
        wanted.extend(plan.methods)
        return {m: "to probe" for m in plan.methods}  # left out, so each stops at its first step to run

    calibrate(specs, families, dry_step, stored)
    return list(dict.fromkeys(wanted))
