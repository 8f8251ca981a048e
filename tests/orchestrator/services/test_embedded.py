"""Embedded services: a start-up that runs out of time says so, and the time is configurable; graphs reach
them as sealed memfds passed in a directory of their own, which a later orchestrator removes if its own was killed,
and what a fit reads is what was checked whatever anyone does to the payload afterwards."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import grpc
import numpy as np
import psutil
import pytest

from contract.handover import SOCKET_NAME
from contract.settings import SettingError
from contract.wire import make_bundle
from orchestrator.services.client import MethodClient, ServiceUnavailable
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
from tests.conftest import HANG_S, REPO, wait_for
from tests.methods.helpers import tiny_bundle
from tests.methods.napping_service import FIT_STARTED_ENV


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


def test_an_embedded_service_maps_graphs_handed_over_in_its_own_directory_which_goes_when_it_stops():
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
            # The service maps the memfd (the stream leaves no such mapping); the directory holds only its socket.
            assert f"/memfd:nodeground-{bundle.graph_hash[:16]}" in Path(f"/proc/{replica.pid}/maps").read_text()
            assert [p.name for p in graph_dir.iterdir()] == [SOCKET_NAME]
            fit = replica.client.fit("mlp", bundle.graph_hash, train, val, {"max_epochs": 2}, seed=0, time_limit=None)
            assert replica.client.predict(fit.value.model_handle, bundle.num_nodes).value.shape == (48, 3)
        finally:
            directory.release(replica)
            directory.close()
    assert not graph_dir.exists()


def test_graph_dirs_of_a_killed_orchestrator_are_removed_and_live_ones_kept(tmp_path):
    """An orchestrator killed with -9 leaves its services' graph directories (with their sockets); the next one
    removes those, never a directory of a live orchestrator or of a reused pid."""
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


def _spoil(graph_dir: Path, bundle, how: str) -> tuple[int, int]:
    """Do to every payload of a graph this process has handed over, and can still reach, what a process of its user
    could: ``how`` rewrites the features (valid values, a silently other graph), the edges (ids out of range), or
    truncates it. What it reaches: a file in the service's directory, and a memfd open here (also reopened through
    /proc, as another process would). How many writes went through, and how many were refused."""
    offsets = {"features": 0, "edges": bundle.features.nbytes}
    data = {"features": bytes(bundle.features.nbytes), "edges": np.int64(10**12).tobytes()}
    targets = [p for p in graph_dir.iterdir() if p.is_file() and not p.is_symlink()]
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:nodeground"):
                targets.append(Path(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    written = refused = 0
    for path in targets:
        try:
            with open(path, "r+b", buffering=0) as file:
                if how == "truncate":
                    file.truncate(0)
                else:
                    file.seek(offsets[how])
                    file.write(data[how])
            written += 1
        except PermissionError:
            refused += 1
    return written, refused


@pytest.fixture(scope="module")
def gcn_replica():
    with EmbeddedServices() as embedded:
        directory = ServiceDirectory(resolve_methods(["gcn"]), embedded=embedded)
        replica = directory.acquire("gcn")
        try:
            yield replica
        finally:
            directory.release(replica)
            directory.close()


@pytest.mark.parametrize("how", ["features", "edges", "truncate"])
def test_a_payload_rewritten_or_truncated_after_the_check_changes_nothing_a_fit_sees(gcn_replica, monkeypatch, how):
    """The attack of issue #44: the handed-over payload rewritten (to other valid values, or edges out of range) or
    truncated right after the service checked it. The fit sees the checked graph (the same predictions as the same
    features and edges streamed), and the service stays up."""
    bundle, train, val = tiny_bundle(seed={"features": 11, "edges": 12, "truncate": 13}[how])
    labels = np.where(bundle.labels >= 0, bundle.labels, 0)  # every label as the orchestrator knows them
    hidden = np.full(bundle.num_nodes, -1)
    handed = make_bundle(bundle.features, bundle.edge_index, hidden.copy(), bundle.num_classes)
    hidden[np.setdiff1d(np.arange(bundle.num_nodes), np.concatenate([train, val]))[0]] = 0  # another hash, same fit
    streamed = make_bundle(bundle.features, bundle.edge_index, hidden, bundle.num_classes)
    client = gcn_replica.client
    outcomes = []
    attach_call = MethodClient._unary

    def then_spoil(self, method, request, timeout, what):
        reply = attach_call(self, method, request, timeout, what)
        if what == "AttachGraph":
            outcomes.append(_spoil(Path(client.graph_dir), handed, how))
        return reply

    monkeypatch.setattr(MethodClient, "_unary", then_spoil)
    assert client.ensure_graph(handed).value
    stream_client = MethodClient(gcn_replica.endpoint)  # no directory: it streams
    try:
        stream_client.ensure_graph(streamed)
        predictions = []
        for one, graph in ((client, handed), (stream_client, streamed)):
            try:
                fit = one.fit("gcn", graph.graph_hash, train, val, {"max_epochs": 5}, 0, HANG_S, labels)
            except grpc.RpcError as exc:
                pytest.fail(f"the fit on the {how}-spoiled graph failed: {exc.code().name}: {exc.details()}")
            predictions.append(one.predict(fit.value.model_handle, graph.num_nodes, graph.num_classes).value)
        np.testing.assert_array_equal(*predictions, err_msg=f"the fit saw the {how}-spoiled payload")
    finally:
        stream_client.close()
    assert gcn_replica.service.alive() and client.describe()
    print(f"{how}: writes that went through and were refused after the check: {outcomes}")
    assert len(outcomes) == 1 and outcomes[0][0] == 0 and outcomes[0][1] >= 1


# An orchestrator (this script) that starts an embedded napping service and, in the main thread, a fit that never
# checks for cancellation (a GFM's long step): it prints the service's pid once the fit is sent.
ORPHANING_ORCHESTRATOR = """
import sys
from orchestrator.services.client import MethodClient
from orchestrator.services.embedded import EmbeddedService
from tests.methods.helpers import tiny_bundle

class Napping(EmbeddedService):
    def command(self):
        return [sys.executable, "-m", "tests.methods.napping_service"]

service = Napping("test")
service.start()
client = MethodClient(service.endpoint, graph_dir=service.graph_dir)
client.wait_healthy(float(sys.argv[1]))
bundle, train, val = tiny_bundle()
client.ensure_graph(bundle)
print(service.pid, flush=True)
client.fit("stubborn", bundle.graph_hash, train, val, {"seconds": 10 * float(sys.argv[1])}, 0, None)
"""


def test_an_embedded_service_whose_orchestrator_is_killed_mid_fit_exits_on_its_own(tmp_path):
    """kill -9 of the orchestrator mid-fit: the service's lifeline notices and stops it on time, although the fit
    never checks for cancellation (before, the process lived until that fit ended). The measured time is printed."""
    marker = tmp_path / "fit-started"
    orchestrator = subprocess.Popen(
        [sys.executable, "-c", ORPHANING_ORCHESTRATOR, str(HANG_S)], stdout=subprocess.PIPE, text=True,
        cwd=REPO, env={**os.environ, FIT_STARTED_ENV: str(marker)},
    )  # fmt: skip
    service = None
    try:
        service = psutil.Process(int(orchestrator.stdout.readline()))
        wait_for(marker.exists, "the fit's start")
        orchestrator.kill()
        killed = time.monotonic()
        orchestrator.wait(HANG_S)
        wait_for(lambda: not service.is_running() or service.status() == psutil.STATUS_ZOMBIE, "the service's exit")
        print(f"the service exited {time.monotonic() - killed:.2f} s after its orchestrator was killed mid-fit")
    finally:
        orchestrator.kill()
        if service is not None and service.is_running():
            service.kill()


def test_the_thread_rule_one_thread_a_service_one_service_a_core(monkeypatch):
    """With nothing set a service computes on one thread and a local sweep runs one per core (one with a GPU); a set
    NODEGROUND_THREADS is inherited, and a SLURM task shares its CPUs among the services it runs at once."""
    from orchestrator.services.embedded import default_parallel, service_threads, usable_cores

    assert service_threads(4, {}) == 1
    assert service_threads(4, {"NODEGROUND_THREADS": "3"}) is None  # the children inherit it
    assert service_threads(2, {"SLURM_CPUS_PER_TASK": "8"}) == 4
    assert default_parallel(gpus=0) == usable_cores() == len(os.sched_getaffinity(0))
    assert default_parallel(gpus=2) == 1
    pools = {name: os.environ.get(name, "1") for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    assert EmbeddedService("gnn", threads=1)._thread_env() == {"NODEGROUND_THREADS": "1", **pools}
