"""The client's health watchdog: one thread per client, whatever the number of calls, and it still cancels a call
to a service that stopped answering."""

from __future__ import annotations

import threading

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
