"""A hostile client against a real service process: header-only uploads, lying headers,
a thousand fits without Release. The service refuses what it cannot hold, keeps
answering health and Describe, and its RSS stays under a stated bound."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import psutil
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from contract.space import config_to_proto
from contract.v1 import method_service_pb2 as pb
from contract.v1 import method_service_pb2_grpc as pb_grpc
from contract.wire import MAX_MESSAGE_BYTES, TENSOR_ORDER, make_bundle
from orchestrator.services.client import MethodClient
from orchestrator.services.directory import ServiceDirectory, resolve_methods
from orchestrator.store import Store
from orchestrator.sweep import Sweep, SweepPlan
from tests.conftest import HANG_S, served, tiny_graph, wait_for

# The whole script may raise the service's RSS by at most this much over its warmed-up size
# (1,000 unreleased fits alone took +4.3 GB before models were capped).
RSS_BOUND_BYTES = 300 << 20
MAX_MODELS = 8
CHEAP = {"max_epochs": 1, "patience": 20, "hidden": 16, "num_layers": 1}
WIDE = {"max_epochs": 1, "patience": 20, "hidden": 512, "num_layers": 3}  # ~2 MiB of weights per fitted model


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[psutil.Process, str]]:
    # refusals after a 2 s slot wait; stalled streams kept open (their idle limit, 30 s by default, is a hang's here)
    idle = f"{4 * HANG_S:g}"
    with served(
        "gnn", "--upload-wait-seconds", "2", "--upload-idle-seconds", idle, NODEGROUND_MAX_MODELS=str(MAX_MODELS)
    ) as running:
        yield running


@pytest.fixture(scope="module")
def stubs(service):
    channel = grpc.insecure_channel(service[1], options=[("grpc.max_send_message_length", MAX_MESSAGE_BYTES)])
    yield pb_grpc.MethodServiceStub(channel), health_pb2_grpc.HealthStub(channel)
    channel.close()


def _header(num_nodes: int, num_features: int, num_edges: int, num_classes: int) -> pb.GraphHeader:
    shapes = {"features": [num_nodes, num_features], "edge_index": [2, num_edges], "labels": [num_nodes]}
    specs, offset = [], 0
    for name, dtype, _ in TENSOR_ORDER:
        nbytes = int(np.prod(shapes[name], dtype=object)) * (4 if dtype == "float32" else 8)
        specs.append(pb.TensorSpec(name=name, dtype=dtype, shape=shapes[name], offset=offset, nbytes=nbytes))
        offset += nbytes
    return pb.GraphHeader(
        graph_hash="0" * 64, num_nodes=num_nodes, num_classes=num_classes, tensors=specs, total_bytes=offset
    )


def _answers_quickly(stubs, stalled: list[grpc.Future] | None = None) -> None:
    """Health and Describe answer while uploads stall: ``stalled`` streams are still open after both answered (a
    starved service would answer only once they ended: told by order, not by a time a loaded machine can miss)."""
    stub, health = stubs
    status = health.Check(health_pb2.HealthCheckRequest(), timeout=HANG_S).status
    assert status == health_pb2.HealthCheckResponse.SERVING
    assert stub.Describe(pb.DescribeRequest(), timeout=HANG_S).family == "gnn"
    assert not any(f.done() for f in stalled or []), "health or Describe waited for the stalled uploads to end"


def _warm(endpoint: str) -> None:
    client = MethodClient(endpoint)
    x, e, y = tiny_graph(60)
    bundle = make_bundle(x, e, y, 3)
    client.ensure_graph(bundle)
    fit = client.fit("mlp", bundle.graph_hash, np.arange(0, 20), np.arange(20, 40), CHEAP, 0, None)
    client.predict(fit.value.model_handle, 60)
    client.release(fit.value.model_handle)
    client.close()


def test_header_only_and_lying_uploads_cost_nothing_and_health_still_answers(service, stubs):
    proc, endpoint = service
    stub, _ = stubs
    _warm(endpoint)
    before = proc.memory_info().rss
    release = threading.Event()

    def header_then_silence(header: pb.GraphHeader) -> Iterator[pb.GraphChunk]:
        yield pb.GraphChunk(header=header)
        release.wait(HANG_S)

    gib_header = _header(
        num_nodes=(1 << 30) // 8 // 4, num_features=4, num_edges=4, num_classes=2
    )  # ~1 GiB of features
    idle = [stub.UploadGraph.future(header_then_silence(gib_header), timeout=4 * HANG_S) for _ in range(10)]
    try:
        # refusals come after the 2 s slot wait; more than the upload cap allowed to stream would never be 8
        wait_for(lambda: sum(f.done() for f in idle) >= 8, "8 of 10 stalled uploads refused (the cap is 2)")
        time.sleep(0.5)
        refused = [f for f in idle if f.done()]
        assert len(refused) >= 8, "more than the upload cap were allowed to stream at once"
        for f in refused:
            assert f.exception().code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # compute threads are taken by idle streams; health has its own
        _answers_quickly(stubs, [f for f in idle if not f.done()])
        assert proc.memory_info().rss - before < 64 << 20, "a header-only upload allocated its declared size"
    finally:
        release.set()
    for f in idle:
        with pytest.raises(grpc.RpcError) as info:
            f.result(timeout=HANG_S)
        assert info.value.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INVALID_ARGUMENT)

    huge = _header(num_nodes=10**10, num_features=1, num_edges=0, num_classes=2)
    with pytest.raises(grpc.RpcError) as info:
        stub.UploadGraph(iter([pb.GraphChunk(header=huge)]), timeout=HANG_S)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "MiB" in info.value.details()
    classes = _header(num_nodes=60, num_features=5, num_edges=90, num_classes=2 * 10**7)
    with pytest.raises(grpc.RpcError) as info:
        stub.UploadGraph(iter([pb.GraphChunk(header=classes)]), timeout=HANG_S)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "num_classes" in info.value.details()
    _answers_quickly(stubs)
    assert proc.memory_info().rss - before < RSS_BOUND_BYTES


def test_a_thousand_fits_without_release_keep_memory_bounded(service, stubs):
    proc, endpoint = service
    stub, _ = stubs
    _warm(endpoint)
    x, e, y = tiny_graph(60)
    bundle = make_bundle(x, e, y, 3)
    MethodClient(endpoint).ensure_graph(bundle)
    request = pb.FitRequest(
        method="mlp",
        graph_hash=bundle.graph_hash,
        train_nodes=list(range(20)),
        val_nodes=list(range(20, 40)),
        config=config_to_proto(WIDE),
    )
    handles = [stub.Fit(request, timeout=HANG_S).model_handle for _ in range(50)]
    before = proc.memory_info().rss
    peak = before
    for i in range(950):
        handles.append(stub.Fit(request, timeout=HANG_S).model_handle)
        if i % 25 == 0:
            peak = max(peak, proc.memory_info().rss)
            assert peak - before < RSS_BOUND_BYTES, (
                f"RSS grew by {(peak - before) >> 20} MiB after {50 + i + 1} fits without Release"
            )
    peak = max(peak, proc.memory_info().rss)
    print(
        f"\n1,000 fits without Release: RSS {before / 2**20:.0f} MiB after 50 -> peak {peak / 2**20:.0f} MiB after "
        f"1,000 (bound +{RSS_BOUND_BYTES >> 20} MiB)"
    )
    assert peak - before < RSS_BOUND_BYTES
    with pytest.raises(grpc.RpcError) as info:
        list(stub.Predict(pb.PredictRequest(model_handle=handles[0]), timeout=HANG_S))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND and "cap" in info.value.details()
    assert len(list(stub.Predict(pb.PredictRequest(model_handle=handles[-1]), timeout=HANG_S))) >= 1
    _answers_quickly(stubs)


def _timed_sweep(plan: SweepPlan, service: tuple[psutil.Process, str], store: Path) -> tuple[list[str], float, float]:
    """The statuses of a sweep of ``plan`` on the served family, its wall seconds and the service's CPU seconds."""
    proc, endpoint = service
    directory = ServiceDirectory(resolve_methods(list(plan.methods)), endpoints={"gnn": [endpoint]})
    wall, cpu = time.perf_counter(), sum(proc.cpu_times()[:2])
    try:
        with Store(store) as opened:
            records = Sweep(plan, opened, directory).run()
    finally:
        directory.close()
    return [r.status for r in records], time.perf_counter() - wall, sum(proc.cpu_times()[:2]) - cpu


@pytest.mark.slow  # three sweeps beside a served family, one of them behind 16 stalled replies: about a minute
def test_sixteen_unread_predict_streams_leave_a_concurrent_sweeps_trials_ok(tmp_path):
    """Finding 7: another local client (embedded services listen on loopback without a token) fitted one model,
    opened 16 Predict streams on it and never read them; each blocked reply held one of the server's 8 threads
    until its deadline, and the sweep stored every trial ``timeout`` (reruns kept them)."""
    nodes, classes = 200_000, 10  # each reply 8 MB: far more than the flow-control windows hold unread
    ring = np.stack([np.arange(nodes), (np.arange(nodes) + 1) % nodes])
    big = make_bundle(np.ones((nodes, 1), np.float32), ring, np.arange(nodes) % classes, classes)
    plan = SweepPlan(("mlp",), ("synthetic-tiny",), ("10/10/80",), (0, 1), budget=3, time_limit=HANG_S / 4)
    with served("gnn") as service:
        endpoint = service[1]
        _timed_sweep(dataclasses.replace(plan, budget=1), service, tmp_path / "warm.sqlite")  # first calls
        quiet, quiet_wall, quiet_cpu = _timed_sweep(plan, service, tmp_path / "quiet.sqlite")
        neighbour = MethodClient(endpoint)
        neighbour.ensure_graph(big)
        fit = neighbour.fit("mlp", big.graph_hash, np.arange(0, 100), np.arange(100, 200), CHEAP, 0, HANG_S)
        channel = grpc.insecure_channel(endpoint, options=[("grpc.http2.bdp_probe", 0)])  # its windows stay small
        predict = pb_grpc.MethodServiceStub(channel).Predict
        unread = [predict(pb.PredictRequest(model_handle=fit.value.model_handle), timeout=HANG_S) for _ in range(16)]
        try:
            time.sleep(1.0)  # the replies are computed and stall on their unread windows
            loud, loud_wall, loud_cpu = _timed_sweep(plan, service, tmp_path / "loud.sqlite")
            still_open = sum(not call.done() for call in unread)
        finally:
            for call in unread:
                call.cancel()
            channel.close()
            neighbour.close()
    print(
        f"sweep of {len(loud)} trials on one gnn service: undisturbed {quiet_wall:.1f} s wall ({quiet_cpu:.1f} s of "
        f"the service's CPU); beside 16 unread Predict streams {loud_wall:.1f} s wall ({loud_cpu:.1f} s of its CPU), "
        f"{loud_wall / quiet_wall:.2f}x the wall time; {still_open} of the 16 calls still open on the neighbour's side"
    )
    assert quiet == loud == ["ok"] * len(quiet) and len(quiet) == 6
