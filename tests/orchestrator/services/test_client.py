"""The client's health watchdog: one thread per client, whatever the number of calls, and it still cancels a call
to a service that stopped answering."""

from __future__ import annotations

import threading
import time

import pytest

from methods.sdk import Config, FloatParam
from methods.sdk.service import MethodServicer
from orchestrator.services import client as client_module
from orchestrator.services.client import MethodClient, ServiceHung
from tests.conftest import HANG_S
from tests.methods.helpers import Sleeper, in_process_service, tiny_bundle


class Nap(Sleeper):
    name = "nap"
    default_config: Config = {"seconds": 0.0}
    search_space = (FloatParam("seconds", 0.0, 60.0),)


def test_one_watchdog_thread_watches_every_call_of_a_client(monkeypatch):
    started: list[threading.Thread] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        if thread.name.startswith("watchdog-"):
            started.append(thread)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    bundle, train, val = tiny_bundle()
    with in_process_service(MethodServicer("test", [Nap])) as client:
        client.ensure_graph(bundle)
        for _ in range(20):
            fit = client.fit("nap", bundle.graph_hash, train, val, {}, seed=0, time_limit=None)
            client.predict(fit.value.model_handle, bundle.num_nodes)
            client.release(fit.value.model_handle)
    assert len(started) == 1  # a thread per watched call was 40 here
    started[0].join(HANG_S)
    assert not started[0].is_alive()  # closing the client ends it


def test_the_watchdog_still_cancels_a_call_to_a_service_that_stopped_answering(monkeypatch):
    monkeypatch.setattr(client_module, "WATCHDOG_INTERVAL_S", 0.05)
    monkeypatch.setattr(MethodClient, "responsive", lambda self, timeout=0.0: False)  # health: no answer
    bundle, train, val = tiny_bundle()
    with in_process_service(MethodServicer("test", [Nap])) as client:
        client.ensure_graph(bundle)
        with pytest.raises(ServiceHung, match="stopped answering health checks .* during Fit; the call was cancelled"):
            client.fit("nap", bundle.graph_hash, train, val, {"seconds": 60.0}, seed=0, time_limit=None)


class Hung(MethodServicer):
    """HasGraph, Release and Describe wait for ``awake``: a service that went silent (stopped, hung, partitioned)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.asleep, self.awake = threading.Event(), threading.Event()

    def _silent(self, call, request, context):
        if self.asleep.is_set():
            self.awake.wait(HANG_S)
        return call(request, context)

    def HasGraph(self, request, context):
        return self._silent(super().HasGraph, request, context)

    def Release(self, request, context):
        return self._silent(super().Release, request, context)

    def Describe(self, request, context):
        return self._silent(super().Describe, request, context)


def test_a_short_call_to_a_silent_service_names_it_hung_as_soon_as_the_watchdog_would(monkeypatch):
    """HasGraph, Release and the Describe a trial asks once run blocking, unwatched: their deadline is the
    watchdog's silence (15 s), and running out of it is ServiceHung, as a watched call's would be (was: an
    RpcError after 30 s)."""
    assert client_module.SHORT_CALL_S == client_module.WATCHDOG_INTERVAL_S * client_module.WATCHDOG_MISSES == 15.0
    monkeypatch.setattr(client_module, "SHORT_CALL_S", 0.2)  # the same rule, scaled down
    bundle, train, val = tiny_bundle()
    servicer = Hung("test", [Nap])
    with in_process_service(servicer) as client:
        client.ensure_graph(bundle)
        fit = client.fit("nap", bundle.graph_hash, train, val, {}, seed=0, time_limit=None)
        servicer.asleep.set()
        try:
            for what, call in (
                ("HasGraph", lambda: client.ensure_graph(tiny_bundle(seed=1)[0])),
                ("Release", lambda: client.release(fit.value.model_handle)),
                ("Describe", lambda: MethodClient(client.endpoint).takes_fit_labels()),
            ):
                started = time.monotonic()
                with pytest.raises(ServiceHung, match=f"did not answer {what} for 0.2 s"):
                    call()
                print(f"{what}: named hung after {time.monotonic() - started:.2f} s (deadline 0.2 s)")
        finally:
            servicer.awake.set()
