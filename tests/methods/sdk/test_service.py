"""The method service over real gRPC: upload once, fit/predict/release, errors as status codes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import torch
from grpc_health.v1 import health_pb2, health_pb2_grpc

from contract.handover import SEALS, SOCKET_NAME, HandoverDesk, hand_over
from contract.v1 import method_service_pb2 as pb
from contract.v1 import method_service_pb2_grpc as pb_grpc
from contract.wire import GraphBundle, encode, make_bundle
from methods.gnn import GCN, MLP
from methods.sdk import Capabilities, ChoiceParam, Config, FitContext, FloatParam, InputRefused
from methods.sdk.caches import GraphCache
from methods.sdk.device import nvidia_driver_version
from methods.sdk.method import pick_device
from methods.sdk.service import MethodServicer
from tests.conftest import HANG_S, tiny_graph, wait_for
from tests.methods.helpers import Sleeper, in_process_service, tiny_bundle

QUICK = {"max_epochs": 20, "patience": 20}


class SleepMethod(Sleeper):
    name = "sleep"
    default_config: Config = {"seconds": 0.1}
    search_space = (FloatParam("seconds", 0.0, 60.0),)


class Narrow(MLP):
    name = "narrow"
    capabilities = Capabilities(max_classes=2)


class Raises(SleepMethod):
    """Raises in its fit: a declared refusal of the input, or a ValueError of its own code."""

    name = "raises"
    default_config: Config = {"what": "refused"}
    search_space = (ChoiceParam("what", ("refused", "bug")),)

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> Any:
        if config["what"] == "refused":
            raise InputRefused("this graph has no feature the decoder can read")
        raise ValueError("operands could not be broadcast together")  # a bug deep in the model, not the input


@pytest.fixture
def service():
    servicer = MethodServicer("test", [MLP, GCN, SleepMethod, Narrow, Raises])
    with in_process_service(servicer) as client:
        yield servicer, client


@pytest.fixture
def graph():
    x, e, y = tiny_graph(90)
    labels = y.copy()
    labels[60:] = -1  # test nodes hidden
    return make_bundle(x, e, labels, 3)


def test_describe_and_health(service):
    servicer, client = service
    specs = {s.name: s for s in client.describe()}
    assert set(specs) == {"mlp", "gcn", "sleep", "narrow", "raises"}
    gcn = specs["gcn"]
    assert gcn.kind == "supervised" and gcn.version and "torch" in gcn.library_versions
    assert gcn.default_config["hidden"] == 64 and {p.name for p in gcn.search_space} >= {
        "lr",
        "hidden",
        "norm",
        "residual",
    }
    health = health_pb2_grpc.HealthStub(client._channel).Check(
        health_pb2.HealthCheckRequest(service="nodeground.v1.MethodService")
    )
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    # The device as records will name it: a GPU's name and driver only where the service computes on one.
    expected = {"device": str(pick_device(True))} | ({"cuda_version": torch.version.cuda} if torch.version.cuda else {})
    if torch.cuda.is_available():
        expected |= {"device_name": torch.cuda.get_device_name(0)}
    assert expected.items() <= client.device().items()


@pytest.mark.parametrize(
    ("text", "version"),
    [
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
            "GCC version:  gcc 12\n",
            "535.104.05",
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.03  Release Build  (dvs-builder@U16)\n",
            "580.159.03",
        ),
        ("something else\n", ""),
    ],
)
def test_driver_version_from_the_kernel_module_when_nvml_is_absent(tmp_path, text, version):
    proc = tmp_path / "version"
    proc.write_text(text)
    assert nvidia_driver_version(proc, nvml="libnvidia-ml-absent.so.1") == version


def test_upload_once_then_fit_predict_release(service, graph):
    servicer, client = service
    assert client.ensure_graph(graph).value is True
    assert client.ensure_graph(graph).value is False  # held: not sent again
    fit = client.fit("gcn", graph.graph_hash, np.arange(0, 30), np.arange(30, 60), QUICK, seed=0, time_limit=None)
    assert fit.stats.seconds > 0 and fit.stats.peak_rss_bytes > 0 and fit.e2e_seconds >= fit.stats.seconds
    assert {"epochs", "best_epoch"} <= set(fit.value.info)
    predicted = client.predict(fit.value.model_handle, graph.num_nodes)
    assert predicted.value.shape == (90, 3)
    np.testing.assert_allclose(predicted.value.sum(axis=1), 1.0, atol=1e-5)
    assert client.release(fit.value.model_handle) is True
    with pytest.raises(grpc.RpcError) as err:
        client.predict(fit.value.model_handle, graph.num_nodes)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_same_seed_same_predictions(service, graph):
    _, client = service
    client.ensure_graph(graph)
    runs = []
    for _ in range(2):
        fit = client.fit("mlp", graph.graph_hash, np.arange(0, 30), np.arange(30, 60), QUICK, seed=3, time_limit=None)
        runs.append(client.predict(fit.value.model_handle, graph.num_nodes).value)
        client.release(fit.value.model_handle)
    np.testing.assert_array_equal(runs[0], runs[1])


@pytest.mark.parametrize(
    "method, train, config, code, message",
    [
        ("gcm", [0, 1], {}, grpc.StatusCode.INVALID_ARGUMENT, "unknown method"),
        ("gcn", [0, 500], {}, grpc.StatusCode.INVALID_ARGUMENT, "outside"),
        ("gcn", [0, 70], {}, grpc.StatusCode.INVALID_ARGUMENT, "hidden"),  # a test node: its label is -1
        ("gcn", [0, 1], {"hidden": "big"}, grpc.StatusCode.INVALID_ARGUMENT, "hidden"),
        ("gcn", [0, 1], {"lr": 9.0}, grpc.StatusCode.INVALID_ARGUMENT, "outside"),
        ("narrow", [0, 1], {}, grpc.StatusCode.INVALID_ARGUMENT, "at most 2 classes"),
        ("gcn", [0, 1, 30], {}, grpc.StatusCode.INVALID_ARGUMENT, "overlap"),  # node 30 is in val too
        ("gcn", [0, 1], {"max_epochs": -1}, grpc.StatusCode.INVALID_ARGUMENT, "max_epochs=-1 must be positive"),
        ("gcn", [0, 1], {"max_epochs": 0}, grpc.StatusCode.INVALID_ARGUMENT, "must be positive"),
        ("gcn", [0] * 1000, {}, grpc.StatusCode.INVALID_ARGUMENT, "train_nodes repeats node ids (999 duplicates)"),
    ],
)
def test_malformed_requests_get_invalid_argument(service, graph, method, train, config, code, message):
    _, client = service
    client.ensure_graph(graph)
    with pytest.raises(grpc.RpcError) as err:
        client.fit(method, graph.graph_hash, np.array(train), np.arange(30, 60), config, seed=0, time_limit=None)
    assert err.value.code() == code and message in err.value.details()


def test_a_fit_with_its_own_labels_on_a_graph_with_every_label_hidden_equals_the_fit_on_its_split_bundle(
    service, graph
):
    """One upload for every split: the fit's labels come with the request, and the fit sees exactly what it
    would on a bundle showing that split's labels (the same predictions), and the bundle's own labels never."""
    servicer, client = service
    x, e, y = tiny_graph(90)
    hidden = make_bundle(x, e, np.full(90, -1), 3)
    client.ensure_graph(hidden)
    client.ensure_graph(graph)
    assert servicer.graphs.received == 2 == client.graphs_received() and client.takes_fit_labels()
    train, val = np.arange(0, 30), np.arange(30, 60)
    runs = []
    for bundle, labels in ((graph, None), (hidden, y), (graph, y)):  # the last: the request's labels win
        fit = client.fit("mlp", bundle.graph_hash, train, val, QUICK, seed=3, time_limit=None, labels=labels)
        runs.append(client.predict(fit.value.model_handle, 90).value)
        client.release(fit.value.model_handle)
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])
    (view,) = servicer.graphs.get(hidden.graph_hash).cache["nodeground-split-views"].values()
    assert view.features is servicer.graphs.get(hidden.graph_hash).features  # shared, not copied
    assert set(np.flatnonzero(view.labels >= 0)) == set(range(60))  # train and val only


@pytest.mark.parametrize(
    "train_labels, val_labels, message",
    [([0, 1], [0] * 30, "train_labels has 2 entries for 30 train_nodes"), ([0] * 30, [3] * 30, "must lie in [0, 3)")],
)
def test_a_fit_s_labels_of_the_wrong_count_or_range_are_invalid_argument(service, train_labels, val_labels, message):
    from contract.space import config_to_proto
    from contract.v1 import method_service_pb2 as pb

    _, client = service
    x, e, _ = tiny_graph(90)
    hidden = make_bundle(x, e, np.full(90, -1), 3)
    client.ensure_graph(hidden)
    request = pb.FitRequest(
        method="mlp", graph_hash=hidden.graph_hash, train_nodes=list(range(30)), val_nodes=list(range(30, 60)),
        config=config_to_proto(QUICK), train_labels=train_labels, val_labels=val_labels,
    )  # fmt: skip
    with pytest.raises(grpc.RpcError) as err:
        client._stub.Fit(request, timeout=HANG_S)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and message in err.value.details()


@pytest.mark.parametrize("limit", [float("nan"), float("-inf"), float("inf"), -1.0])
def test_a_time_limit_that_is_not_a_finite_positive_number_is_refused(service, graph, limit):
    """0 is the proto's "no limit"; anything else must bound the fit, so NaN, inf and negatives are refused."""
    _, client = service
    client.ensure_graph(graph)
    stub = pb_grpc.MethodServiceStub(client._channel)  # the client itself never sends such a limit
    request = pb.FitRequest(
        method="sleep",
        graph_hash=graph.graph_hash,
        train_nodes=list(range(30)),
        val_nodes=list(range(30, 60)),
        time_limit_seconds=limit,
    )
    with pytest.raises(grpc.RpcError) as err:
        stub.Fit(request, timeout=HANG_S)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "time_limit_seconds" in err.value.details()


def test_a_graph_not_held_is_not_found_not_a_service_that_is_not_ready(service):
    _, client = service
    with pytest.raises(grpc.RpcError) as err:
        client.fit("mlp", "0" * 64, np.arange(3), np.arange(3, 6), {}, seed=0, time_limit=None)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND and "upload it first" in err.value.details()


@pytest.mark.parametrize(
    "what, code, message",
    [
        ("refused", grpc.StatusCode.INVALID_ARGUMENT, "raises: this graph has no feature"),
        ("bug", grpc.StatusCode.INTERNAL, "operands could not be broadcast"),
    ],
)
def test_only_a_declared_refusal_is_invalid_argument_any_other_value_error_is_the_method_failing(
    service, graph, what, code, message
):
    _, client = service
    client.ensure_graph(graph)
    with pytest.raises(grpc.RpcError) as err:
        client.fit("raises", graph.graph_hash, np.arange(30), np.arange(30, 60), {"what": what}, 0, None)
    assert err.value.code() == code and message in err.value.details()


def test_corrupt_upload_is_refused_and_service_stays_up(service, graph):
    _, client = service
    stub = pb_grpc.MethodServiceStub(client._channel)
    from contract.wire import encode

    chunks = list(encode(graph, chunk_bytes=256))
    chunks[0].header.graph_hash = "f" * 64
    with pytest.raises(grpc.RpcError) as err:
        stub.UploadGraph(iter(chunks))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "hash mismatch" in err.value.details()
    assert client.describe()


def test_time_limit_is_honoured_and_service_stays_healthy(service, graph):
    _, client = service
    client.ensure_graph(graph)
    with pytest.raises(grpc.RpcError) as err:
        client.fit(
            "sleep", graph.graph_hash, np.arange(30), np.arange(30, 60), {"seconds": 30.0}, seed=0, time_limit=0.5
        )
    # the service stopped the fit at its limit and said so; the client's own deadline (the limit plus a grace)
    # would have ended the call with gRPC's bare "Deadline Exceeded" instead
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert "the fit ran past its time limit" in err.value.details(), err.value.details()
    fit = client.fit(
        "sleep", graph.graph_hash, np.arange(30), np.arange(30, 60), {"seconds": 0.05}, seed=0, time_limit=HANG_S
    )
    assert fit.value.model_handle


def test_a_fit_behind_50_idle_upload_streams_gets_a_thread(graph):
    """Idle uploads (a header, then silence) wait on the upload pool: the Fit behind them runs at once.

    Before uploads had their own pool, each idle stream held one of the server's 8 worker threads
    and the Fit waited for the streams' slot waits to run out.
    """
    servicer = MethodServicer("test", [SleepMethod], upload_wait_seconds=HANG_S)
    bundle, train, val = graph, np.arange(0, 30), np.arange(30, 60)
    release = threading.Event()
    arrived: list[int] = []  # upload streams that reached the servicer, each holding an upload thread
    upload = servicer.UploadGraph

    def counted(request_iterator, context):
        arrived.append(1)
        return upload(request_iterator, context)

    servicer.UploadGraph = counted  # type: ignore[method-assign]

    def header_then_silence() -> Iterator[pb.GraphChunk]:
        yield pb.GraphChunk(header=next(encode(tiny_bundle(seed=1)[0])).header)
        release.wait(HANG_S)

    with in_process_service(servicer) as client:
        client.ensure_graph(bundle)
        arrived.clear()  # the graph's own upload
        stub = pb_grpc.MethodServiceStub(client._channel)
        idle = [stub.UploadGraph.future(header_then_silence(), timeout=HANG_S) for _ in range(50)]
        try:
            # every upload thread is taken (the streaming ones and as many waiting for a slot), so a Fit that
            # waited on the uploads' threads could not run: waited for, never slept for, so no load makes it vacuous
            threads = 2 * servicer.uploads.max_uploads
            wait_for(lambda: len(arrived) >= threads, f"{threads} idle upload streams holding the upload threads")
            started = time.perf_counter()
            fit = client.fit("sleep", bundle.graph_hash, train, val, {"seconds": 0.0}, 0, HANG_S)
            waited = time.perf_counter() - started
            predicted = client.predict(fit.value.model_handle, bundle.num_nodes, bundle.num_classes, timeout=HANG_S)
            print(f"fit behind 50 idle upload streams answered in {waited:.2f} s; idle still open: "
                  f"{sum(not f.done() for f in idle)}")  # fmt: skip
            assert predicted.value.shape == (bundle.num_nodes, bundle.num_classes)
            assert sum(not f.done() for f in idle) >= 48  # the streams are still there, waiting or streaming
        finally:
            release.set()
            for f in idle:
                f.cancel()


def test_predict_streams_no_one_reads_hold_no_fit_and_no_other_predict(graph, caplog):
    """Finding 7: a neighbour that opened 16 Predict streams and never read them held each reply's thread, all 8 of
    the shared pool, until its deadline: every Fit waited. Predict now has threads of its own, and a reply whose
    client takes no chunk gives its thread up to a Predict that waits (``methods.sdk.replies``)."""

    class Counted(MethodServicer):
        """Counts the Predict calls that took a thread."""

        started = 0

        def Predict(self, request: pb.PredictRequest, context: grpc.ServicerContext) -> Iterator[pb.PredictChunk]:
            Counted.started += 1
            yield from super().Predict(request, context)

    servicer = Counted("test", [SleepMethod])
    nodes, classes = 20_000, 10  # an 800 kB reply: more than the windows of a client that probes no bandwidth hold
    ring = np.stack([np.arange(nodes), (np.arange(nodes) + 1) % nodes])
    big = make_bundle(np.ones((nodes, 1), np.float32), ring, np.arange(nodes) % classes, classes)
    train, val = np.arange(0, 30), np.arange(30, 60)
    with in_process_service(servicer) as client:
        client.ensure_graph(big)
        client.ensure_graph(graph)
        handle = client.fit("sleep", big.graph_hash, train, val, {"seconds": 0.0}, 0, HANG_S).value.model_handle
        neighbour = grpc.insecure_channel(client.endpoint, options=[("grpc.http2.bdp_probe", 0)])  # windows stay small
        unread = [
            pb_grpc.MethodServiceStub(neighbour).Predict(pb.PredictRequest(model_handle=handle), timeout=HANG_S)
            for _ in range(16)
        ]
        try:
            wait_for(lambda: Counted.started >= 8, "8 of the unread streams holding a thread")  # all 8 of the pool
            fit = client.fit("sleep", graph.graph_hash, train, val, {"seconds": 0.0}, 0, HANG_S / 4)
            predicted = client.predict(fit.value.model_handle, graph.num_nodes, graph.num_classes, timeout=HANG_S / 4)
            assert predicted.value.shape == (graph.num_nodes, graph.num_classes)
            assert "the client took no chunk" in caplog.text and "another Predict waited for its thread" in caplog.text
        finally:
            for call in unread:
                call.cancel()
            neighbour.close()


def test_a_stalled_upload_is_cancelled_after_the_idle_limit_and_frees_its_slot_while_fits_are_served(graph, caplog):
    """One chunk, then silence: the stream holds the only upload slot until the idle limit, then the service cancels
    it (DEADLINE_EXCEEDED, logged), and the next upload takes the slot. A fit meanwhile is served."""
    idle = 1.0
    servicer = MethodServicer(
        "test", [SleepMethod], max_uploads=1, upload_idle_seconds=idle, upload_wait_seconds=HANG_S
    )
    release = threading.Event()
    stalled_bundle, later = tiny_bundle(seed=1)[0], tiny_bundle(seed=2)[0]

    def one_chunk_then_silence() -> Iterator[pb.GraphChunk]:
        yield next(encode(stalled_bundle, chunk_bytes=64))  # the header and the first 64 bytes
        release.wait(HANG_S)

    with in_process_service(servicer) as client:
        client.ensure_graph(graph)
        stub = pb_grpc.MethodServiceStub(client._channel)
        started = time.monotonic()
        stalled = stub.UploadGraph.future(one_chunk_then_silence(), timeout=HANG_S)
        try:
            fit = client.fit("sleep", graph.graph_hash, np.arange(30), np.arange(30, 60), {"seconds": 0.0}, 0, HANG_S)
            fitted_while_stalled = not stalled.done()
            with pytest.raises(grpc.RpcError) as err:
                stalled.result(HANG_S)
            cancelled_after = time.monotonic() - started
            assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert (
                f"no chunk for {idle:g} s" in err.value.details()
                and "NODEGROUND_UPLOAD_IDLE_SECONDS" in err.value.details()
            )
            assert cancelled_after >= idle and fit.value.model_handle
            assert client.ensure_graph(later).value  # the slot is free again
        finally:
            release.set()
    print(f"stalled upload cancelled {cancelled_after:.2f} s after it began (idle limit {idle:g} s); a fit was served "
          f"{'while it stalled' if fitted_while_stalled else 'meanwhile'}")  # fmt: skip
    assert any("cancelled: no chunk for" in r.getMessage() for r in caplog.records)  # the service names it too
    assert servicer.graphs.received == 2


class Spy(MethodServicer):
    """Records which call delivered each graph; ``describe_dir`` overrides the directory Describe names."""

    def __init__(self, *args: Any, describe_dir: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[str] = []
        self.describe_dir = describe_dir

    def UploadGraph(self, request_iterator, context):
        self.calls.append("UploadGraph")
        return super().UploadGraph(request_iterator, context)

    def AttachGraph(self, request, context):
        self.calls.append("AttachGraph")
        return super().AttachGraph(request, context)

    def Describe(self, request, context):
        reply = super().Describe(request, context)
        if self.describe_dir is not None:
            reply.shared_graph_dir = self.describe_dir
        return reply


def _fit_predict(client, graph) -> np.ndarray:
    fit = client.fit("gcn", graph.graph_hash, np.arange(0, 30), np.arange(30, 60), QUICK, seed=3, time_limit=None)
    return client.predict(fit.value.model_handle, graph.num_nodes).value


def _memfds() -> set[tuple[str, str]]:
    """The memfds this process holds open (client and in-process service alike), as (descriptor, name)."""
    links = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            links.add((fd, os.readlink(f"/proc/self/fd/{fd}")))
    return {link for link in links if link[1].startswith("/memfd:")}


def test_a_graph_handed_over_as_a_sealed_memfd_is_held_counted_and_fits_as_the_streamed_one(tmp_path, graph):
    attached = Spy("test", [GCN], shared_graph_dir=str(tmp_path))
    streamed = Spy("test", [GCN])
    before = _memfds()
    with in_process_service(attached, str(tmp_path)) as fast, in_process_service(streamed, str(tmp_path)) as slow:
        assert fast.described().shared_graph_dir == str(tmp_path) and not slow.described().shared_graph_dir
        assert fast.ensure_graph(graph).value and slow.ensure_graph(graph).value
        assert (attached.calls, streamed.calls) == (["AttachGraph"], ["UploadGraph"])
        assert fast.graphs_received() == 1 and not fast.ensure_graph(graph).value  # held: nothing sent again
        # Nothing lies in the directory but the service's socket, and the one memfd open is the held graph's mapping
        # (Python's mmap keeps a descriptor of what it maps): the client closed its own.
        assert [p.name for p in tmp_path.iterdir()] == [SOCKET_NAME] and len(_memfds() - before) == 1
        assert "/memfd:nodeground-" in Path("/proc/self/maps").read_text()
        np.testing.assert_array_equal(_fit_predict(fast, graph), _fit_predict(slow, graph))
    assert not list(tmp_path.iterdir())  # the stopped service removed its socket


def _payload_memfd(graph: GraphBundle, size: int | None = None, seals: int | None = None) -> int:
    """A memfd of ``graph``'s payload (cut or padded to ``size``) with ``seals`` added (default: the handover's)."""
    fd = os.memfd_create("test", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    data = b"".join(bytes(t) for t in graph.tensors())
    os.write(fd, data[:size].ljust(size or 0, b"\0") if size is not None else data)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS if seals is None else seals)
    return fd


def _regular_file(graph: GraphBundle, tmp_path: Path) -> int:
    path = tmp_path / "graph.bin"
    path.write_bytes(b"".join(bytes(t) for t in graph.tensors()))
    return os.open(path, os.O_RDONLY)


@pytest.mark.parametrize(
    "descriptor, message",
    [
        (lambda g, d: _regular_file(g, d), "not a memfd sealed against writes, shrinking and growing"),
        (lambda g, d: _payload_memfd(g, seals=0), "not a memfd sealed against writes, shrinking and growing"),
        (lambda g, d: _payload_memfd(g, seals=fcntl.F_SEAL_WRITE), "not a memfd sealed"),  # it could still shrink
        (lambda g, d: _payload_memfd(g, size=8), "the header announces"),
        (lambda g, d: _payload_memfd(g, size=g.nbytes + 8), "the header announces"),
        (lambda g, d: _payload_memfd(make_bundle(g.features * 2, g.edge_index, g.labels, 3)), "hash mismatch"),
    ],
)
def test_a_descriptor_the_service_cannot_trust_is_refused_and_the_service_stays_up(
    tmp_path, graph, descriptor, message
):
    from contract.wire import graph_header

    (tmp_path / "dir").mkdir()
    servicer = MethodServicer("test", [GCN], shared_graph_dir=str(tmp_path / "dir"))
    before = _memfds()
    fd = descriptor(graph, tmp_path)
    with in_process_service(servicer) as client:
        token = hand_over(str(tmp_path / "dir"), fd, HANG_S)
        os.close(fd)
        with pytest.raises(grpc.RpcError) as err:
            client._stub.AttachGraph(pb.AttachGraphRequest(header=graph_header(graph), handover=token), timeout=HANG_S)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and message in err.value.details()
        assert servicer.graphs.received == 0 and client.describe() and not _memfds() - before


def test_a_handover_without_exactly_one_descriptor_or_with_a_token_not_held_is_refused(tmp_path, graph):
    from contract.wire import graph_header

    (tmp_path / "dir").mkdir()
    servicer = MethodServicer("test", [GCN], shared_graph_dir=str(tmp_path / "dir"))
    with in_process_service(servicer) as client:
        with socket.socket(socket.AF_UNIX) as sock:  # no descriptor at all
            sock.connect(str(tmp_path / "dir" / SOCKET_NAME))
            sock.sendall(b"graph")
            assert sock.recv(256).startswith(b"error pass exactly one descriptor")
        token = hand_over(str(tmp_path / "dir"), fd := _payload_memfd(graph), HANG_S)
        os.close(fd)
        for unknown in ("", "0" * 32, token + "0"):
            with pytest.raises(grpc.RpcError) as err:
                client._stub.AttachGraph(pb.AttachGraphRequest(header=graph_header(graph), handover=unknown))
            assert err.value.code() == grpc.StatusCode.NOT_FOUND and "no graph was handed over" in err.value.details()
        client._stub.AttachGraph(pb.AttachGraphRequest(header=graph_header(graph), handover=token), timeout=HANG_S)
        with pytest.raises(grpc.RpcError) as err:  # taken: a token names one descriptor once
            client._stub.AttachGraph(pb.AttachGraphRequest(header=graph_header(graph), handover=token))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND and servicer.graphs.received == 1


def test_a_service_without_a_directory_names_none_and_takes_no_handover(service, graph):
    from contract.wire import graph_header

    _, client = service
    assert client.described().shared_graph_dir == ""
    with pytest.raises(grpc.RpcError) as err:
        client._stub.AttachGraph(pb.AttachGraphRequest(header=graph_header(graph), handover="x"), timeout=HANG_S)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_a_handed_over_graph_is_admitted_like_an_upload_and_no_descriptor_outlives_the_answer(tmp_path, graph):
    servicer = MethodServicer("test", [GCN], shared_graph_dir=str(tmp_path), max_upload_bytes=graph.nbytes // 2)
    before = _memfds()
    with in_process_service(servicer, str(tmp_path)) as client:
        with pytest.raises(grpc.RpcError) as err:
            client.ensure_graph(graph)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and not _memfds() - before


@pytest.mark.parametrize(
    "servicer_dir, describe_dir, client_dir, other_listener, calls",
    [
        ("", None, "mine", False, ["UploadGraph"]),  # the service offers no directory
        ("theirs", None, "mine", False, ["UploadGraph"]),  # it listens in another directory
        ("theirs", "mine", "mine", False, ["UploadGraph"]),  # it names the client's but no one listens there
        ("", "mine", "mine", True, ["AttachGraph", "UploadGraph"]),  # it takes no handover: UNIMPLEMENTED
        ("theirs", "mine", "mine", True, ["AttachGraph", "UploadGraph"]),  # another took the descriptor: NOT_FOUND
        ("mine", None, "", False, ["UploadGraph"]),  # the client was given no directory
    ],
)
def test_a_client_streams_where_the_service_cannot_take_its_handover(
    tmp_path, graph, servicer_dir, describe_dir, client_dir, other_listener, calls
):
    for name in ("mine", "theirs"):
        (tmp_path / name).mkdir()
    where = {name: str(tmp_path / name) for name in ("mine", "theirs")}
    servicer = Spy("test", [GCN], shared_graph_dir=where.get(servicer_dir, ""), describe_dir=where.get(describe_dir))
    other = HandoverDesk(where["mine"]) if other_listener else None
    before = _memfds()
    try:
        with in_process_service(servicer, where.get(client_dir, "")) as client:
            assert client.ensure_graph(graph).value
    finally:
        if other is not None:
            other.close()
    assert servicer.calls == calls and servicer.graphs.received == 1 and not _memfds() - before


def test_the_graph_count_counts_each_new_graph_once_whatever_the_threads():
    """Uploads are served on a pool of threads: the count Describe reports is taken under the cache's lock."""
    bundles = [tiny_bundle(seed=seed)[0] for seed in range(8)]
    cache = GraphCache(1 << 30)
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(cache.put, bundles * 50))  # every graph put 50 times, from 8 threads at once
    assert cache.received == len({b.graph_hash for b in bundles}) == 8
