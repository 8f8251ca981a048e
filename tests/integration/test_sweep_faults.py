"""Hostile replies, silent services and time limits: every trial ends as a record, the sweep never aborts or hangs.

Services here are real: gRPC servers on loopback (a misbehaving servicer for malformed replies) and
embedded service processes stopped with SIGSTOP.
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import numpy as np
import pytest

from contract.families import Family
from contract.v1 import method_service_pb2 as pb
from contract.wire import GraphBundle, encode_probabilities
from methods.sdk import Capabilities, ChoiceParam, Config, FitContext, Method
from methods.sdk.service import MethodServicer, build_server
from orchestrator.services import client as client_module
from orchestrator.services.directory import ServiceDirectory, resolve_methods
from orchestrator.services.embedded import EmbeddedService, EmbeddedServices
from orchestrator.store import Store
from orchestrator.sweep import Progress, Sweep, SweepPlan
from tests.orchestrator.test_sweep_engine import FAMILY as ENGINE_FAMILY
from tests.orchestrator.test_sweep_engine import (
    Sleepy,
    one_torch_thread,  # noqa: F401  (autouse: in-process services, one thread)
)

MALFORMED = ("short", "classes", "huge-classes", "info", "stats")


class Replies(Method):
    """A well-behaved method; the servicer below corrupts its replies, one way per configuration."""

    name = "replies"
    version = "test"
    capabilities = Capabilities(uses_gpu=False)
    default_config: Config = {"mode": "ok"}
    search_space = (ChoiceParam("mode", ("ok", *MALFORMED)),)

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> Any:
        return str(config["mode"])

    def predict(self, state: Any, graph: GraphBundle) -> np.ndarray:
        return np.full((graph.num_nodes, graph.num_classes), 1.0 / graph.num_classes, dtype=np.float32)


class HostileServicer(MethodServicer):
    """Serves ``Replies`` but sends what a broken or malicious image could send."""

    def Fit(self, request: pb.FitRequest, context: Any) -> pb.FitResponse:
        reply = super().Fit(request, context)
        mode = self.models.get(reply.model_handle).state
        if mode == "info":
            reply.info["epochs"].Clear()  # a value with no kind set
        if mode == "stats":
            reply.stats.seconds = float("nan")
        return reply

    def Predict(self, request: pb.PredictRequest, context: Any):
        model = self.models.get(request.model_handle)
        probs = model.method.predict(model.state, model.graph)
        stats = pb.CallStats(seconds=0.01)
        if model.state == "short":
            yield from encode_probabilities(probs[:-1], stats)
        elif model.state == "classes":
            yield from encode_probabilities(
                np.full((len(probs), probs.shape[1] + 1), 1.0 / (probs.shape[1] + 1), dtype=np.float32), stats
            )
        elif model.state == "huge-classes":  # would make a naive client allocate N x 2^31 floats
            yield pb.PredictChunk(
                row_offset=0, num_rows=1, num_classes=2**31 - 1, probabilities=b"\0" * 16, stats=stats
            )
        else:
            yield from encode_probabilities(probs, stats)


HOSTILE = Family("hostile", "nodeground/hostile", "tests.integration.test_sweep_faults", ("replies",))


@pytest.fixture
def fast_watchdog(monkeypatch):
    """Declare a service hung after about a second of silence (the default is about 15 s)."""
    monkeypatch.setattr(client_module, "WATCHDOG_INTERVAL_S", 0.2)
    monkeypatch.setattr(client_module, "WATCHDOG_PROBE_TIMEOUT_S", 0.3)
    monkeypatch.setattr(client_module, "WATCHDOG_MISSES", 3)


def test_malformed_replies_are_failed_trials_and_the_sweep_goes_on(tmp_path):
    server, port = build_server(HostileServicer("hostile", [Replies]), "127.0.0.1:0")
    server.start()
    plan = SweepPlan(("replies",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=10)
    try:
        with Store(tmp_path / "r.sqlite") as store:
            directory = ServiceDirectory(
                resolve_methods(["replies"], {"hostile": HOSTILE}), endpoints={"hostile": f"127.0.0.1:{port}"}
            )
            records = Sweep(plan, store, directory).run()
            directory.close()
            stored = store.frame()
    finally:
        server.stop(0)
    by_mode = {json.loads(r.config_json)["mode"]: r for r in records}
    assert set(by_mode) == {"ok", *MALFORMED} and len(stored) == len(records)  # every trial recorded
    assert by_mode["ok"].status == "ok"
    expected = {
        "short": "prediction covers",
        "classes": "prediction has 4 classes; the graph has 3",
        "huge-classes": "prediction has 2147483647 classes; the graph has 3",
        "info": "fit info 'epochs' carries no value",
        "stats": "fit stats are not a finite, non-negative time",
    }
    for mode, reason in expected.items():
        assert by_mode[mode].status == "failed" and by_mode[mode].error.startswith("malformed reply: "), (
            mode,
            by_mode[mode].error,
        )
        assert reason in by_mode[mode].error, (mode, by_mode[mode].error)


@pytest.mark.slow  # waits out the health watchdog and a restart: about a minute
def test_a_stopped_embedded_service_is_declared_hung_restarted_and_its_trial_rerun(tmp_path, fast_watchdog):
    plan = SweepPlan(("mlp",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=3)
    with EmbeddedServices() as embedded, Store(tmp_path / "r.sqlite") as store:
        directory = ServiceDirectory(resolve_methods(["mlp"]), embedded=embedded)
        stopped = []

        def stop_after_first(record):
            if not stopped:
                stopped.append(embedded.services["gnn"].process)
                os.kill(stopped[0].pid, signal.SIGSTOP)

        sweep = Sweep(plan, store, directory, progress=Progress(on_trial=stop_after_first))
        started = time.monotonic()
        records = sweep.run()
        elapsed = time.monotonic() - started
        directory.close()
        services = store.services_frame()
    assert [r.status for r in records] == ["ok", "ok", "ok"]  # the second trial met the stopped service, then ran again
    assert stopped[0].poll() is not None  # the stopped process was ended, not left behind
    assert len(services) == 2 and services["pid"].iloc[1] != stopped[0].pid  # a fresh replica took over
    assert elapsed < 120


@pytest.mark.slow  # waits out the watchdog and the recovery back-off: about a minute
def test_a_silent_remote_service_gives_unavailable_rows_that_a_rerun_completes(tmp_path, fast_watchdog):
    service = EmbeddedService("gnn")  # a service this sweep did not start: it cannot restart it, only wait
    service.start()
    plan = SweepPlan(("mlp",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=2)
    try:
        with Store(tmp_path / "r.sqlite") as store:
            directory = ServiceDirectory(resolve_methods(["mlp"]), endpoints={"gnn": service.endpoint})
            directory.recovery_timeout = 1.0
            os.kill(service.pid, signal.SIGSTOP)
            started = time.monotonic()
            with pytest.raises(client_module.ServiceUnavailable):
                Sweep(plan, store, directory).run()  # it cannot even be described: refused before any trial
            assert time.monotonic() - started < 60
            directory.close()
            os.kill(service.pid, signal.SIGCONT)
            directory = ServiceDirectory(resolve_methods(["mlp"]), endpoints={"gnn": service.endpoint})
            directory.recovery_timeout = 1.0
            stop_once = []

            def stop_after_first(record):
                if not stop_once:
                    stop_once.append(True)
                    os.kill(service.pid, signal.SIGSTOP)

            first = Sweep(plan, store, directory, progress=Progress(on_trial=stop_after_first)).run()
            directory.close()
            assert [r.status for r in first] == ["ok", "unavailable"]
            assert "stopped answering" in first[1].error
            os.kill(service.pid, signal.SIGCONT)
            directory = ServiceDirectory(resolve_methods(["mlp"]), endpoints={"gnn": service.endpoint})
            second = Sweep(plan, store, directory).run()
            directory.close()
            frame = store.frame()
    finally:
        os.kill(service.pid, signal.SIGCONT)
        service.stop()
    assert [r.trial_key for r in second] == [first[1].trial_key]  # the infrastructure outcome was retried
    assert len(frame) == 2 and (frame["status"] == "ok").all()


def test_a_timeout_is_retried_only_by_a_rerun_with_a_longer_time_limit(tmp_path):
    servicer = MethodServicer("test", [Sleepy])
    server, port = build_server(servicer, "127.0.0.1:0")
    server.start()
    path = tmp_path / "r.sqlite"

    def sweep(limit: float) -> list:
        with Store(path) as store:
            directory = ServiceDirectory(
                resolve_methods(["sleepy"], {"test": ENGINE_FAMILY}), endpoints={"test": f"127.0.0.1:{port}"}
            )
            records = Sweep(
                SweepPlan(("sleepy",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=2, time_limit=limit),
                store,
                directory,
            ).run()
            directory.close()
            return records

    try:
        first = sweep(0.5)
        assert [r.status for r in first] == ["timeout", "ok"] and first[0].time_limit_s == 0.5
        assert sweep(0.5) == [] and sweep(0.3) == []  # the same or a smaller limit keeps the outcome
        longer = sweep(1.0)
        assert [(r.trial_key, r.status, r.time_limit_s) for r in longer] == [(first[0].trial_key, "timeout", 1.0)]
        assert sweep(1.0) == []
    finally:
        server.stop(0)
