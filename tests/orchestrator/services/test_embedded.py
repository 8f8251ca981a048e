"""Embedded services: a start-up that runs out of time says so, and the time is configurable; graphs reach
them as files in a directory of their own."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from orchestrator.services.client import ServiceUnavailable
from orchestrator.services.directory import ServiceDirectory, resolve_methods
from orchestrator.services.embedded import (
    SHARED_MEMORY,
    START_TIMEOUT_ENV,
    START_TIMEOUT_S,
    EmbeddedService,
    EmbeddedServices,
    start_timeout,
)
from tests.methods.helpers import tiny_bundle


def test_a_service_too_slow_to_start_is_named_as_stopped_by_the_orchestrator(monkeypatch, tmp_path):
    monkeypatch.setenv(START_TIMEOUT_ENV, "0.05")  # far less than any service's imports take
    service = EmbeddedService("gnn", log_dir=tmp_path)
    with pytest.raises(ServiceUnavailable) as err:
        service.start()
    message = str(err.value)
    assert "did not announce its port within 0.05 s, so the orchestrator stopped it" in message, message
    assert START_TIMEOUT_ENV in message and str(tmp_path / "gnn.log") in message
    assert not service.alive() and not os.path.exists(service.graph_dir)


@pytest.mark.parametrize("value", ["0", "-3", "nan", "inf", "soon"])
def test_a_start_timeout_that_is_not_a_positive_number_is_refused(monkeypatch, value):
    monkeypatch.setenv(START_TIMEOUT_ENV, value)
    with pytest.raises(ServiceUnavailable, match=f"{START_TIMEOUT_ENV}=.* must be a positive number of seconds"):
        start_timeout()


def test_the_start_timeout_defaults_and_is_read_from_the_environment(monkeypatch):
    monkeypatch.delenv(START_TIMEOUT_ENV, raising=False)
    assert start_timeout() == START_TIMEOUT_S
    monkeypatch.setenv(START_TIMEOUT_ENV, "600")
    assert start_timeout() == 600.0


def test_an_embedded_service_maps_graphs_from_its_own_directory_which_goes_when_it_stops():
    bundle, train, val = tiny_bundle()
    with EmbeddedServices() as embedded:
        directory = ServiceDirectory(resolve_methods(["mlp"]), embedded=embedded)
        replica = directory.acquire("mlp")
        try:
            graph_dir = Path(replica.service.graph_dir)
            assert stat.S_IMODE(graph_dir.stat().st_mode) == 0o700
            assert graph_dir.parent == SHARED_MEMORY or not os.access(SHARED_MEMORY, os.W_OK)
            assert replica.client.described().shared_graph_dir == str(graph_dir) == replica.client.graph_dir
            assert replica.client.ensure_graph(bundle).value and replica.client.graphs_received() == 1
            # The service maps the file (the stream leaves no such mapping), which the client has removed.
            assert f"{graph_dir}/{bundle.graph_hash} (deleted)" in Path(f"/proc/{replica.pid}/maps").read_text()
            assert not list(graph_dir.iterdir())
            fit = replica.client.fit("mlp", bundle.graph_hash, train, val, {"max_epochs": 2}, seed=0, time_limit=None)
            assert replica.client.predict(fit.value.model_handle, bundle.num_nodes).value.shape == (48, 3)
        finally:
            directory.release(replica)
            directory.close()
    assert not graph_dir.exists()
