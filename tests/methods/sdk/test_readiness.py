"""A GFM service is healthy only while its weights verify: NOT_SERVING with the reason, then SERVING once fetched."""

from __future__ import annotations

import shutil
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from contract.families import load_families
from contract.v1 import method_service_pb2 as pb
from contract.weights import load_weights_catalog
from methods.families import method_classes
from methods.sdk import readiness as readiness_module
from methods.sdk.service import MethodServicer, build_server
from orchestrator.services.client import MethodClient, ServiceNotReady
from tests.conftest import HANG_S

GRAPHANY_IDS = ("graphany-arxiv", "graphany-cora", "graphany-product", "graphany-wisconsin")


@pytest.fixture
def graphany_service(weights, tmp_path, monkeypatch):
    """A real graphany service (gRPC on loopback) reading weights from an empty directory, re-checked every 0.2 s."""
    monkeypatch.setenv("NODEGROUND_WEIGHTS", str(tmp_path / "weights"))  # after `weights`, which names the mirror
    monkeypatch.setattr(readiness_module, "READINESS_POLL_S", 0.2)
    server, port = build_server(MethodServicer("graphany", method_classes(load_families()["graphany"])), "127.0.0.1:0")
    server.start()
    client = MethodClient(f"127.0.0.1:{port}")
    yield client, tmp_path / "weights"
    client.close()
    server.stop(0)


def _health(client: MethodClient) -> int:
    return (
        health_pb2_grpc.HealthStub(client._channel)
        .Check(health_pb2.HealthCheckRequest(service=""), timeout=HANG_S)
        .status
    )


def _copy(weights_ids, source, dest) -> None:
    for weights_id in weights_ids:
        entry = load_weights_catalog()[weights_id]
        (dest / entry.relative_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / entry.relative_path, dest / entry.relative_path)


def _wait_status(client: MethodClient, status: int) -> int:
    deadline = time.monotonic() + HANG_S
    while _health(client) != status and time.monotonic() < deadline:
        time.sleep(0.05)
    return _health(client)


def test_missing_weights_make_the_service_not_serving_and_it_says_which(graphany_service, graph):
    client, _ = graphany_service
    assert _health(client) == health_pb2.HealthCheckResponse.NOT_SERVING
    described = client._stub.Describe(pb.DescribeRequest(), timeout=HANG_S)
    assert [r.weights_id for r in described.not_ready] == list(GRAPHANY_IDS)
    assert all(r.method == "graphany" and "not found" in r.reason for r in described.not_ready)
    with pytest.raises(ServiceNotReady) as caught:  # the orchestrator learns why at once, not after a timeout
        client.wait_healthy(30)
    message = str(caught.value)
    assert "graphany not ready: weights graphany-arxiv not found at" in message
    assert "`orchestrator weights fetch graphany-arxiv graphany-cora graphany-product graphany-wisconsin`" in message
    assert "\n" not in message
    bundle, train, val = graph
    client.ensure_graph(bundle)
    with pytest.raises(grpc.RpcError) as refused:
        client.fit("graphany", bundle.graph_hash, train, val, {}, seed=0, time_limit=None)
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "not ready" in refused.value.details()


def test_weights_fetched_after_start_make_it_healthy_without_a_restart(graphany_service, weights, graph):
    client, directory = graphany_service
    _copy(GRAPHANY_IDS[:2], weights, directory)  # a partial fetch is still not ready
    time.sleep(0.5)
    assert [r.weights_id for r in client._stub.Describe(pb.DescribeRequest(), timeout=HANG_S).not_ready] == list(
        GRAPHANY_IDS[2:]
    )
    _copy(GRAPHANY_IDS[2:], weights, directory)
    assert _wait_status(client, health_pb2.HealthCheckResponse.SERVING) == health_pb2.HealthCheckResponse.SERVING
    client.wait_healthy(HANG_S)
    bundle, train, val = graph
    client.ensure_graph(bundle)
    fit = client.fit("graphany", bundle.graph_hash, train, val, {}, seed=0, time_limit=None)
    assert client.predict(fit.value.model_handle, bundle.num_nodes, 3).value.shape == (48, 3)


def test_weights_fetched_a_moment_before_a_client_asks_count_at_once(graphany_service, weights, monkeypatch):
    """A not-ready service re-verifies on every ask: `make weights` then `orchestrator run` at once must not be
    told "not ready" from a check made before the files arrived (the readiness poll only paces a ready service)."""
    client, directory = graphany_service
    monkeypatch.setattr(readiness_module, "READINESS_POLL_S", 3600.0)
    assert _health(client) == health_pb2.HealthCheckResponse.NOT_SERVING  # the last check: no weights
    _copy(GRAPHANY_IDS, weights, directory)
    assert not client._stub.Describe(pb.DescribeRequest(), timeout=HANG_S).not_ready
    assert _health(client) == health_pb2.HealthCheckResponse.SERVING
    client.wait_healthy(HANG_S)


def test_weights_that_fail_verification_make_it_not_serving(graphany_service, weights):
    client, directory = graphany_service
    _copy(GRAPHANY_IDS, weights, directory)
    assert _wait_status(client, health_pb2.HealthCheckResponse.SERVING) == health_pb2.HealthCheckResponse.SERVING
    path = directory / load_weights_catalog()["graphany-cora"].relative_path
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    assert (
        _wait_status(client, health_pb2.HealthCheckResponse.NOT_SERVING) == health_pb2.HealthCheckResponse.NOT_SERVING
    )
    (item,) = client._stub.Describe(pb.DescribeRequest(), timeout=HANG_S).not_ready
    assert item.weights_id == "graphany-cora" and "fail verification" in item.reason


def test_in_context_gfms_are_ready_without_weights_only_when_random_init_is_allowed(tmp_path, monkeypatch):
    monkeypatch.setenv("NODEGROUND_WEIGHTS", str(tmp_path / "weights"))
    (nodepfn,) = method_classes(load_families()["nodepfn"])
    monkeypatch.delenv("NODEGROUND_RANDOM_INIT_WEIGHTS", raising=False)
    assert list(nodepfn.weights_problems()) == ["nodepfn-epoch30"]
    monkeypatch.setenv("NODEGROUND_RANDOM_INIT_WEIGHTS", "1")
    assert nodepfn.weights_problems() == {}
    (gnn_mlp, *_) = method_classes(load_families()["gnn"])
    assert gnn_mlp.weights == () and gnn_mlp.weights_problems() == {}  # supervised methods read no weights
