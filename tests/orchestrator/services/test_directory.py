"""A dead replica's trial moves to an idle sibling at once, and back to the restarted replica only when none is
idle; the store ends with every trial once (0 lost, 0 duplicated).

The replicas are in-process gRPC servers standing in for embedded processes: stopping one is what a
`kill -9` looks like to the client (its calls end UNAVAILABLE). What is raced in real life (the restart against
the retry, the sibling's fit against the restart) is ordered here by events, never by sleeps, so no load can
reorder it (the real-process version: tests/integration/test_sweep_faults.py).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from contract.families import Family
from contract.wire import GraphBundle
from methods.sdk import ChoiceParam, Config, FitContext
from methods.sdk.service import MethodServicer, build_server
from orchestrator.services.directory import ServiceDirectory, resolve_methods
from orchestrator.store import Store
from orchestrator.sweep import Sweep, SweepPlan
from tests.conftest import HANG_S, wait_for
from tests.methods.helpers import Sleeper

LONG_S = 2.0  # the default configuration: the trial whose replica is killed mid-fit
BUSY_S = 8.0  # LongNap's sample: it keeps its replica busy until the killed trial runs again elsewhere


class Events:
    """What the fits and the restart wait for, set by the test or by each other."""

    def __init__(self) -> None:
        self.long_fit_started = threading.Event()  # the first long fit began (its replica is the victim)
        self.killed = threading.Event()  # the victim's server was stopped
        self.long_fit_again = threading.Event()  # the killed trial began again on some replica
        self.restart_may_end = threading.Event()  # the restart comes back only once this is set
        self.victim: MethodServicer | None = None  # the servicer the first long fit came to


EVENTS = Events()


class Nap(Sleeper):
    """The default fits for LONG_S (its first fit holds its replica until the replica is killed); the one sample is
    quick."""

    name = "nap"
    default_config: Config = {"seconds": LONG_S}
    search_space = (ChoiceParam("seconds", (LONG_S, 0.05)),)

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> Any:
        if config["seconds"] == LONG_S and not EVENTS.long_fit_started.is_set():
            EVENTS.long_fit_started.set()
            while not EVENTS.killed.wait(0.01):  # mid-fit until its server stops; then the cancel ends it
                ctx.check()
            ctx.check()
        elif config["seconds"] == LONG_S:
            EVENTS.long_fit_again.set()
        return super().fit(graph, train, val, config, ctx)


class LongNap(Nap):
    """As Nap, but the sample keeps its replica busy until the killed trial has begun again on another replica."""

    name = "longnap"
    search_space = (ChoiceParam("seconds", (LONG_S, BUSY_S)),)

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> Any:
        if config["seconds"] == BUSY_S:
            EVENTS.long_fit_again.wait(HANG_S)
            return graph.num_classes
        return super().fit(graph, train, val, config, ctx)


FAMILY = Family("naps", "nodeground/naps", __name__, ("nap", "longnap"))


class _Replica:
    """What the directory needs of an embedded service, served in this process."""

    def __init__(self, family: str, replica: int) -> None:
        self.family, self.replica = family, replica
        self.servicer = _Watched(family, [Nap, LongNap])
        self.server, port = build_server(self.servicer, "127.0.0.1:0")
        self.server.start()
        self.endpoint = f"127.0.0.1:{port}"
        self.start_seconds, self.started_at, self.pid = 0.0, "", None
        self.graph_dir = ""  # graphs come as streams
        self.stopped = False

    def alive(self) -> bool:
        return not self.stopped

    def stop(self) -> None:
        self.stopped = True
        self.server.stop(0).wait()


class _Watched(MethodServicer):
    """Tells the test which replica the first long fit came to."""

    def Fit(self, request, context):
        if request.config["seconds"].float_value == LONG_S and EVENTS.victim is None:
            EVENTS.victim = self
        return super().Fit(request, context)


class GatedRestarts:
    """Embedded services whose restart comes back only when the test lets it (``EVENTS.restart_may_end``), as an
    embedded process's start takes seconds (it imports torch first)."""

    def __init__(self) -> None:
        self.replicas: dict[str, list[_Replica]] = {}
        self.restarted = threading.Event()

    def start(self, family: str) -> _Replica:
        pool = self.replicas.setdefault(family, [])
        replica = _Replica(family, len(pool))
        pool.append(replica)
        return replica

    def restart(self, old: _Replica) -> _Replica:
        old.stop()
        EVENTS.restart_may_end.wait(HANG_S)
        fresh = _Replica(old.family, old.replica)
        pool = self.replicas[old.family]
        pool[pool.index(old)] = fresh
        self.restarted.set()
        return fresh

    def close(self) -> None:
        for pool in self.replicas.values():
            for replica in pool:
                if not replica.stopped:
                    replica.stop()


def _sweep_killing_the_long_fit(tmp_path, method: str, restart_at_once: bool):
    """Two replicas, two trials in flight; the replica of the long trial is stopped while that fit runs. The restart
    comes back at once (``restart_at_once``) or only after the sweep has ended; returns the records, the store,
    the victim, the services and whether the restart had come back when the sweep ended."""
    if restart_at_once:
        EVENTS.restart_may_end.set()
    services = GatedRestarts()
    plan = SweepPlan((method,), ("synthetic-tiny",), ("10/10/80",), (0,), budget=2)
    killed: list[str] = []

    def kill() -> None:
        assert EVENTS.long_fit_started.wait(HANG_S)
        victim = next(r for r in services.replicas["naps"] if r.servicer is EVENTS.victim)
        killed.append(victim.endpoint)
        victim.stop()
        EVENTS.killed.set()

    try:
        with Store(tmp_path / "r.sqlite") as store:
            directory = ServiceDirectory(
                resolve_methods([method], {"naps": FAMILY}),
                embedded=services,  # type: ignore[arg-type]
                replicas=2,
            )
            killer = threading.Thread(target=kill, daemon=True)
            killer.start()
            records = Sweep(plan, store, directory, parallel=2, warmup="none").run()
            restarted_before_the_end = services.restarted.is_set()
            EVENTS.restart_may_end.set()
            killer.join(HANG_S)
            wait_for(services.restarted.is_set, "the restart in the background")
            directory.close()
            frame = store.frame()
    finally:
        services.close()
    return records, frame, killed, services, restarted_before_the_end


def test_a_dead_replicas_trial_moves_to_the_idle_sibling_without_waiting_for_the_restart(tmp_path):
    records, frame, killed, services, restarted_before_the_end = _sweep_killing_the_long_fit(tmp_path, "nap", False)
    (victim,) = killed
    by_seconds = {r.config_json: r for r in records}
    long_trial = by_seconds['{"seconds": 2.0}']
    sibling = by_seconds['{"seconds": 0.05}'].endpoint
    assert long_trial.status == "ok" and long_trial.endpoint == sibling != victim, records
    assert not restarted_before_the_end, "the sweep waited for the restart"
    assert len(frame) == 2 and frame["trial_key"].is_unique and (frame["status"] == "ok").all()  # 0 lost, 0 twice


def test_with_no_idle_sibling_the_trial_waits_for_the_restarted_replica(tmp_path):
    records, frame, killed, services, _ = _sweep_killing_the_long_fit(tmp_path, "longnap", True)
    (victim,) = killed
    by_seconds = {r.config_json: r for r in records}
    long_trial, busy = by_seconds['{"seconds": 2.0}'], by_seconds['{"seconds": 8.0}']
    restarted = services.replicas["naps"][0 if services.replicas["naps"][0].endpoint != busy.endpoint else 1]
    assert long_trial.status == "ok" and long_trial.endpoint == restarted.endpoint not in (victim, busy.endpoint)
    assert len(frame) == 2 and frame["trial_key"].is_unique and (frame["status"] == "ok").all()


@pytest.fixture(autouse=True)
def _fresh_events():
    global EVENTS
    EVENTS = Events()
    yield
    EVENTS.killed.set()  # nothing left waiting on a failed test's events
    EVENTS.restart_may_end.set()
    EVENTS.long_fit_again.set()
