"""Embedded services: a start-up that runs out of time says so, and the time is configurable; graphs reach
them as files in a directory of their own, which a later orchestrator removes if its own was killed."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from contract.settings import SettingError
from orchestrator.services.client import ServiceUnavailable
from orchestrator.services.directory import ServiceDirectory, resolve_methods
from orchestrator.services.embedded import (
    GRAPH_DIR_NAME,
    SHARED_MEMORY,
    START_TIMEOUT_ENV,
    START_TIMEOUT_S,
    EmbeddedService,
    EmbeddedServices,
    remove_orphaned_graph_dirs,
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
    with pytest.raises(SettingError, match=f"{START_TIMEOUT_ENV}=.*: must be a number in \\[0.001, 86400\\]"):
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


def test_graph_dirs_of_a_killed_orchestrator_are_removed_and_live_ones_kept(tmp_path):
    """An orchestrator killed with -9 leaves its services' graph directories (and a graph file if it was mid-attach);
    the next one removes those, never a directory of a live orchestrator or of a reused pid."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    me = psutil.Process()
    started = int(me.create_time())
    left = tmp_path / f"nodeground-gnn-{dead.pid}-{started}-abcd_123"
    reused = tmp_path / f"nodeground-node4all-{me.pid}-{started - 1}-efgh_456"  # this pid, another start: not us
    live = tmp_path / f"nodeground-gnn-{me.pid}-{started}-ijkl_789"
    foreign = tmp_path / "nodeground-notes"  # not a graph directory's name
    for path in (left, reused, live, foreign):
        path.mkdir()
    (left / ("0" * 64)).write_bytes(b"graph")
    assert sorted(remove_orphaned_graph_dirs(tmp_path)) == sorted([left, reused])
    assert live.is_dir() and foreign.is_dir() and not left.exists() and not reused.exists()


def test_an_embedded_service_s_graph_dir_names_its_orchestrator():
    service = EmbeddedService("gnn")
    service.start()
    try:
        match = GRAPH_DIR_NAME.fullmatch(Path(service.graph_dir).name)
        me = psutil.Process()
        assert match and int(match["pid"]) == me.pid and int(match["started"]) == int(me.create_time())
    finally:
        service.stop()
