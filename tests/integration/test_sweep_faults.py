"""Hostile replies, silent services and time limits: every trial ends as a record, the sweep never aborts or hangs.

Services here are real: gRPC servers on loopback (a misbehaving servicer for malformed replies) and
embedded service processes stopped with SIGSTOP.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import grpc
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
    TIME_LIMIT_S,
    Sleepy,
    one_torch_thread,  # noqa: F401  (autouse: in-process services, one thread)
)

# Every field of every reply a trial reads, malformed one way per mode: mode -> (status, what the error says).
# The mode is the trial's configuration; the servicer below turns the well-behaved reply into the bad one.
_FAILED, _NONFINITE, _OK = "failed", "nonfinite", "ok"
REPLIES: dict[str, tuple[str, str]] = {
    # FitResponse
    "handle": (_FAILED, "the fit returned no model handle"),
    "fit-no-stats": (_FAILED, "fit reply carries no stats"),
    "stats": (_FAILED, "fit stats are not finite, non-negative times"),
    "fit-seconds-inf": (_FAILED, "fit stats are not finite, non-negative times"),
    "fit-seconds-negative": (_FAILED, "fit stats are not finite, non-negative times"),
    "fit-rss-negative": (_FAILED, "fit stats are not finite, non-negative times"),
    "fit-gpu-negative": (_FAILED, "fit stats are not finite, non-negative times"),
    "fit-cpu-negative": (_FAILED, "fit stats are not finite, non-negative times"),
    "info": (_FAILED, "fit info 'epochs' carries no value"),
    # PredictChunk: class count, row placement, byte lengths, stats
    "short": (_FAILED, "prediction covers"),
    "classes": (_FAILED, "prediction has 4 classes; the graph has 3"),
    "huge-classes": (_FAILED, "prediction has 2147483647 classes; the graph has 3"),
    "zero-classes": (_FAILED, "prediction has 0 classes; the graph has 3"),
    "negative-classes": (_FAILED, "prediction has -3 classes; the graph has 3"),
    "class-change": (_FAILED, "has 2 classes, earlier ones 3"),
    "empty-stream": (_FAILED, "prediction covers 0 of"),
    "bytes-3": (_FAILED, "has 3 bytes of probabilities"),
    "bytes-plus-1": (_FAILED, "bytes of probabilities; 2 x 3 float32 are 24"),
    "bytes-minus-4": (_FAILED, "bytes of probabilities; 2 x 3 float32 are 24"),
    "gap": (_FAILED, "prediction chunk at row 1 does not continue row 0"),
    "overlap": (_FAILED, "prediction chunk at row 0 does not continue row 2"),
    "negative-offset": (_FAILED, "prediction chunk at row -1 does not continue row 0"),
    "negative-rows": (_FAILED, "has -1 rows"),
    "too-many-rows": (_FAILED, "has 301 rows; 300 remain"),
    "predict-no-stats": (_FAILED, "prediction carries no stats"),
    "predict-seconds-nan": (_FAILED, "predict stats are not finite, non-negative times"),
    "predict-rss-negative": (_FAILED, "predict stats are not finite, non-negative times"),
    # probabilities that decode but are not a distribution
    "nan": (_NONFINITE, "NaN or infinite"),
    "negative-probabilities": (_NONFINITE, "negative values"),
    "rows-off": (_NONFINITE, "do not sum to one"),
    # ReleaseResponse: the predictions were valid, so the trial stands with a warning
    "release-error": (_OK, "release failed: INTERNAL: release broke"),
    "release-false": (_OK, "answered released=false"),
}
MALFORMED = tuple(REPLIES)


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


def _chunk(offset: int, rows: int, classes: int, data: bytes, stats: pb.CallStats | None = None) -> pb.PredictChunk:
    return pb.PredictChunk(row_offset=offset, num_rows=rows, num_classes=classes, probabilities=data, stats=stats)


class HostileServicer(MethodServicer):
    """Serves ``Replies`` but sends what a broken or malicious image could send."""

    def Fit(self, request: pb.FitRequest, context: Any) -> pb.FitResponse:
        reply = super().Fit(request, context)
        mode = self.models.get(reply.model_handle).state
        if mode == "info":
            reply.info["epochs"].Clear()  # a value with no kind set
        elif mode == "handle":
            reply.model_handle = ""
        elif mode == "fit-no-stats":
            reply.ClearField("stats")
        elif mode == "stats":
            reply.stats.seconds = float("nan")
        elif mode == "fit-seconds-inf":
            reply.stats.seconds = float("inf")
        elif mode == "fit-seconds-negative":
            reply.stats.seconds = -1.0
        elif mode == "fit-rss-negative":
            reply.stats.peak_rss_bytes = -1
        elif mode == "fit-gpu-negative":
            reply.stats.peak_gpu_bytes = -(2**40)
        elif mode == "fit-cpu-negative":
            reply.stats.cpu_seconds = -0.5
        return reply

    def Predict(self, request: pb.PredictRequest, context: Any):
        model = self.models.get(request.model_handle)
        probs = model.method.predict(model.state, model.graph)
        n, c = probs.shape
        mode = model.state
        stats = pb.CallStats(seconds=0.01)
        two = probs[:2].tobytes()  # the first two rows, 24 bytes
        if mode == "short":
            yield from encode_probabilities(probs[:-1], stats)
        elif mode == "classes":
            yield from encode_probabilities(np.full((n, c + 1), 1.0 / (c + 1), dtype=np.float32), stats)
        elif mode == "huge-classes":  # would make a naive client allocate N x 2^31 floats
            yield _chunk(0, 1, 2**31 - 1, b"\0" * 16, stats)
        elif mode == "zero-classes":
            yield _chunk(0, n, 0, b"", stats)
        elif mode == "negative-classes":
            yield _chunk(0, n, -c, b"", stats)
        elif mode == "class-change":
            yield _chunk(0, 2, c, two)
            yield _chunk(2, n - 2, c - 1, probs[2:, : c - 1].tobytes(), stats)
        elif mode == "empty-stream":
            return
        elif mode == "bytes-3":  # not a multiple of 4: np.frombuffer itself would refuse it
            yield _chunk(0, n, c, b"\0\0\0", stats)
        elif mode == "bytes-plus-1":
            yield _chunk(0, 2, c, two + b"\0", stats)
        elif mode == "bytes-minus-4":
            yield _chunk(0, 2, c, two[:-4], stats)
        elif mode == "gap":
            yield _chunk(1, n - 1, c, probs[1:].tobytes(), stats)
        elif mode == "overlap":
            yield _chunk(0, 2, c, two)
            yield _chunk(0, n, c, probs.tobytes(), stats)
        elif mode == "negative-offset":
            yield _chunk(-1, n, c, probs.tobytes(), stats)
        elif mode == "negative-rows":
            yield _chunk(0, -1, c, b"", stats)
        elif mode == "too-many-rows":
            yield _chunk(0, n + 1, c, np.full((n + 1, c), 1.0 / c, dtype=np.float32).tobytes(), stats)
        elif mode == "predict-no-stats":
            yield _chunk(0, n, c, probs.tobytes())
        elif mode == "predict-seconds-nan":
            yield _chunk(0, n, c, probs.tobytes(), pb.CallStats(seconds=float("nan")))
        elif mode == "predict-rss-negative":
            yield _chunk(0, n, c, probs.tobytes(), pb.CallStats(seconds=0.01, peak_rss_bytes=-5))
        elif mode == "nan":
            yield from encode_probabilities(np.full((n, c), np.nan, dtype=np.float32), stats)
        elif mode == "negative-probabilities":
            bad = probs.copy()
            bad[0] = [-0.5, 1.0, 0.5]
            yield from encode_probabilities(bad, stats)
        elif mode == "rows-off":
            yield from encode_probabilities(probs * 2, stats)
        else:
            yield from encode_probabilities(probs, stats)

    def Release(self, request: pb.ReleaseRequest, context: Any) -> pb.ReleaseResponse:
        model = self.models.get(request.model_handle)
        mode = model.state if model is not None else None
        reply = super().Release(request, context)
        if mode == "release-error":
            context.abort(grpc.StatusCode.INTERNAL, "release broke")
        if mode == "release-false":
            return pb.ReleaseResponse(released=False)
        return reply


HOSTILE = Family("hostile", "nodeground/hostile", "tests.integration.test_sweep_faults", ("replies",))


@pytest.fixture
def fast_watchdog(monkeypatch):
    """Declare a service hung after about a second of silence (the default is about 15 s)."""
    monkeypatch.setattr(client_module, "WATCHDOG_INTERVAL_S", 0.2)
    monkeypatch.setattr(client_module, "WATCHDOG_PROBE_TIMEOUT_S", 0.3)
    monkeypatch.setattr(client_module, "WATCHDOG_MISSES", 3)


def test_malformed_replies_are_failed_trials_and_the_sweep_goes_on(tmp_path):
    """Each malformed reply (every field of every reply a trial reads, byte lengths included) is that trial's
    recorded outcome with its reason; not one of them stops the sweep."""
    server, port = build_server(HostileServicer("hostile", [Replies]), "127.0.0.1:0")
    server.start()
    plan = SweepPlan(("replies",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=len(REPLIES) + 1)
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
    assert by_mode["ok"].status == "ok" and not by_mode["ok"].extra_json
    for mode, (status, reason) in REPLIES.items():
        record = by_mode[mode]
        assert record.status == status, (mode, record.status, record.error)
        if status == _FAILED:
            assert record.error.startswith("malformed reply: ") and reason in record.error, (mode, record.error)
        elif status == _NONFINITE:
            assert reason in record.error, (mode, record.error)
        else:  # a failed release after a valid predict: scored, with the warning on the record
            assert record.test_primary is not None and reason in json.loads(record.extra_json)["release_warning"]


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
        records = sweep.run()  # without the watchdog the stopped fit would wait out its time limit (an hour)
        directory.close()
        services = store.services_frame()
    assert [r.status for r in records] == ["ok", "ok", "ok"]  # the second trial met the stopped service, then ran again
    assert stopped[0].poll() is not None  # the stopped process was ended, not left behind
    assert len(services) == 2 and services["pid"].iloc[1] != stopped[0].pid  # a fresh replica took over


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
            with pytest.raises(client_module.ServiceUnavailable):  # a hang here would be the test's timeout
                Sweep(plan, store, directory).run()  # it cannot even be described: refused before any trial
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

    shorter, longer_limit = TIME_LIMIT_S / 2, TIME_LIMIT_S * 1.5
    try:
        first = sweep(TIME_LIMIT_S)
        assert [r.status for r in first] == ["timeout", "ok"] and first[0].time_limit_s == TIME_LIMIT_S
        assert sweep(TIME_LIMIT_S) == [] and sweep(shorter) == []  # the same or a smaller limit keeps the outcome
        longer = sweep(longer_limit)
        assert [(r.trial_key, r.status, r.time_limit_s) for r in longer] == [
            (first[0].trial_key, "timeout", longer_limit)
        ]
        assert sweep(longer_limit) == []
    finally:
        server.stop(0)
