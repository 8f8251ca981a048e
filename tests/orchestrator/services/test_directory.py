"""A dead replica's trial moves to an idle sibling at once, and back to the restarted replica only when none is
idle; the store ends with every trial once (0 lost, 0 duplicated).

The replicas are in-process gRPC servers standing in for embedded processes: stopping one is what a
`kill -9` looks like to the client (its calls end UNAVAILABLE), and its restart takes a few seconds,
as an embedded service's start does (the real-process version: tests/integration/test_sweep_faults.py).
"""

from __future__ import annotations

import threading
import time

import pytest

from contract.families import Family
from methods.sdk import ChoiceParam, Config
from methods.sdk.service import MethodServicer, build_server
from orchestrator.services.directory import ServiceDirectory, resolve_methods
from orchestrator.store import Store
from orchestrator.sweep import Sweep, SweepPlan
from tests.conftest import HANG_S
from tests.methods.helpers import Sleeper

LONG_S = 2.0  # the trial whose replica is killed mid-fit
RESTART_S = 4.0  # how long the killed replica takes to come back


class Nap(Sleeper):
    """The default fits for LONG_S, checking its deadline; the one sample is quick."""

    name = "nap"
    default_config: Config = {"seconds": LONG_S}
    search_space = (ChoiceParam("seconds", (LONG_S, 0.05)),)


class LongNap(Nap):
    """As Nap, but the sample keeps its replica busy far longer than the restart takes."""

    name = "longnap"
    search_space = (ChoiceParam("seconds", (LONG_S, RESTART_S + 4.0)),)


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
    """Tells the test which replica began the long fit."""

    long_fit_started = threading.Event()

    def Fit(self, request, context):
        if request.config["seconds"].float_value == LONG_S and not _Watched.long_fit_started.is_set():
            _Watched.long_fit_started.set()
        return super().Fit(request, context)


class SlowRestarts:
    """Embedded services whose restart takes RESTART_S (an embedded process imports torch first)."""

    def __init__(self) -> None:
        self.replicas: dict[str, list[_Replica]] = {}
        self.restarted_at: list[float] = []

    def start(self, family: str) -> _Replica:
        pool = self.replicas.setdefault(family, [])
        replica = _Replica(family, len(pool))
        pool.append(replica)
        return replica

    def restart(self, old: _Replica) -> _Replica:
        old.stop()
        time.sleep(RESTART_S)
        fresh = _Replica(old.family, old.replica)
        pool = self.replicas[old.family]
        pool[pool.index(old)] = fresh
        self.restarted_at.append(time.monotonic())
        return fresh

    def close(self) -> None:
        for pool in self.replicas.values():
            for replica in pool:
                if not replica.stopped:
                    replica.stop()


def _sweep_killing_the_long_fit(tmp_path, method: str):
    """Two replicas, two trials in flight; the replica of the long trial is stopped once that fit began."""
    _Watched.long_fit_started.clear()
    services = SlowRestarts()
    plan = SweepPlan((method,), ("synthetic-tiny",), ("10/10/80",), (0,), budget=2)
    killed: list[tuple[str, float]] = []

    def kill() -> None:
        assert _Watched.long_fit_started.wait(HANG_S)
        time.sleep(0.3)  # mid-fit
        victim = next(r for r in services.replicas["naps"] if r.servicer._compute.locked())
        killed.append((victim.endpoint, time.monotonic()))
        victim.stop()

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
            ended = time.monotonic()
            killer.join(HANG_S)
            deadline = time.monotonic() + HANG_S
            while not services.restarted_at and time.monotonic() < deadline:  # the restart in the background
                time.sleep(0.1)
            directory.close()
            frame = store.frame()
    finally:
        services.close()
    return records, frame, killed, services, ended


def test_a_dead_replicas_trial_moves_to_the_idle_sibling_without_waiting_for_the_restart(tmp_path):
    records, frame, killed, services, ended = _sweep_killing_the_long_fit(tmp_path, "nap")
    ((victim, killed_at),) = killed
    by_seconds = {r.config_json: r for r in records}
    long_trial = by_seconds['{"seconds": 2.0}']
    sibling = by_seconds['{"seconds": 0.05}'].endpoint
    assert long_trial.status == "ok" and long_trial.endpoint == sibling != victim, records
    assert services.restarted_at and ended < services.restarted_at[0], "the sweep waited for the restart"
    assert len(frame) == 2 and frame["trial_key"].is_unique and (frame["status"] == "ok").all()  # 0 lost, 0 twice


def test_with_no_idle_sibling_the_trial_waits_for_the_restarted_replica(tmp_path):
    records, frame, killed, services, _ = _sweep_killing_the_long_fit(tmp_path, "longnap")
    ((victim, _),) = killed
    by_seconds = {r.config_json: r for r in records}
    long_trial, busy = by_seconds['{"seconds": 2.0}'], by_seconds['{"seconds": 8.0}']
    restarted = services.replicas["naps"][0 if services.replicas["naps"][0].endpoint != busy.endpoint else 1]
    assert long_trial.status == "ok" and long_trial.endpoint == restarted.endpoint not in (victim, busy.endpoint)
    assert len(frame) == 2 and frame["trial_key"].is_unique and (frame["status"] == "ok").all()


@pytest.fixture(autouse=True)
def _no_leftover_event():
    yield
    _Watched.long_fit_started.clear()
