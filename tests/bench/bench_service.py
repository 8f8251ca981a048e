"""What the service boundary costs: upload throughput, per-call overhead, an epoch through the service.

Each figure is measured side by side in one run (service vs in-process) and
printed as a ratio, since absolute times on shared machines are noisy.

An upload is measured in CPU, not wall time (which is load on a shared machine): MiB of a 64 MiB graph per
CPU second of both processes, the sender (this one) and the receiver, four ways one after the other in each
round: the stream (UploadGraph), the same-host handover (a sealed memfd and AttachGraph, what an embedded service
gets), raw gRPC of
the same bytes to a bare sink (``grpc_sink``: the transport alone, nothing checked or kept) and a copy into
new memory in this process. Each figure is the median over rounds (load on a shared machine comes in bursts
that a median passes over), each ratio one of two such medians. The handover's targets: at least 0.8x raw
gRPC, or at least 0.5x the copy. Each way of uploading has a service of its own, which keeps every graph it
is sent (its default cache holds 16) as in a sweep, so no upload pays for evicting another.

An epoch's cost through the service is differential: the service process's CPU
time for a fit of ``LONG`` epochs minus one of ``SHORT`` epochs, over the
difference, so what a fit pays once (model set-up, the call itself) cancels
out, as it does for the plain PyG loop timed the same way in this process.
Both sides use one torch thread; rounds are interleaved so that load on a
shared machine hits both alike. On a large graph the service comes out cheaper:
it keeps freed memory in its heap between epochs (``methods.sdk.allocator``),
while the plain loop, under glibc's defaults, faults its large tensors' pages
in again every epoch.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import numpy as np
import psutil
import torch

from contract.handshake import READY_PREFIX
from contract.wire import CHUNK_BYTES, MAX_MESSAGE_BYTES, GraphBundle, make_bundle, payload
from methods.gnn import MLP
from methods.sdk.caches import DEFAULT_MAX_GRAPHS
from methods.sdk.method import FitContext
from orchestrator.data.registry import load_dataset
from orchestrator.data.splits import make_split
from orchestrator.data.synthetic import sbm_graph
from orchestrator.run_trial import hidden_label_bundle
from orchestrator.services.client import MethodClient
from orchestrator.services.embedded import EmbeddedService
from tests.bench import grpc_sink
from tests.bench.bench_methods import CONFIGS, plain_epoch, plain_model

THREADS = int(os.environ.get("NODEGROUND_THREADS", "1"))


def _median(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# 48 MiB of features, 15.5 MiB of edges, 0.5 MiB of labels: 64 MiB of payload
UPLOAD_NODES, UPLOAD_FEATURES, UPLOAD_EDGES = 65_536, 192, 1_015_808
UPLOAD_ROUNDS = DEFAULT_MAX_GRAPHS - 1  # one graph a round per service and a round to warm up: it holds them all
RAW_TARGET, COPY_TARGET = 0.8, 0.5  # the handover's throughput per CPU second against raw gRPC, against a copy
STREAM, FILE, RAW, COPY = "stream (UploadGraph)", "same-host memfd (AttachGraph)", "raw gRPC to a bare sink", "copy"


def _cpu_clock(pid: int) -> int:
    """The kernel's CPU-time clock of process ``pid``, all its threads (``time.clock_gettime`` reads it).

    Nanoseconds, as ``time.process_time`` for this process: psutil's ``cpu_times`` come in 10 ms ticks, a
    fifth of what the receiver spends on a 64 MiB upload.
    """
    clock = ctypes.c_int()
    if ctypes.CDLL(None, use_errno=True).clock_getcpuclockid(pid, ctypes.byref(clock)):
        raise OSError(ctypes.get_errno(), f"no CPU clock for process {pid}")
    return clock.value


def _cpu_seconds(fn: Callable[[], object], other: int | None) -> float:
    """CPU seconds (user + system) that ``fn`` costs this process and the process of CPU clock ``other``."""
    mine, theirs = time.process_time(), time.clock_gettime(other) if other is not None else 0.0
    fn()
    return time.process_time() - mine + (time.clock_gettime(other) - theirs if other is not None else 0.0)


@contextlib.contextmanager
def _raw_sink() -> Iterator[tuple[Callable[[GraphBundle], None], int]]:
    """A call that streams a bundle's payload to the bare sink, in the upload's chunks, and the sink's CPU clock."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.bench.grpc_sink"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdin is not None and process.stdout is not None
    channel = None
    try:
        line = process.stdout.readline()
        if not line.startswith(READY_PREFIX):
            raise RuntimeError(f"the gRPC sink did not start: {line!r}")
        channel = grpc.insecure_channel(
            f"127.0.0.1:{line.split()[1]}", options=[("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
        )
        put = channel.stream_unary(grpc_sink.PATH)  # no serializers: each message is the bytes themselves

        def send(bundle: GraphBundle) -> None:
            chunks = (bytes(v[i : i + CHUNK_BYTES]) for v in payload(bundle) for i in range(0, len(v), CHUNK_BYTES))
            assert int.from_bytes(put(chunks), "little") == bundle.nbytes

        yield send, _cpu_clock(process.pid)
    finally:
        if channel is not None:
            channel.close()
        process.stdin.close()  # the sink serves until its stdin closes
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()


def _uploaded(client: MethodClient, bundle: GraphBundle) -> None:
    if not client.ensure_graph(bundle).value:
        raise RuntimeError("the service already held a graph meant to be uploaded")


def bench_upload() -> None:
    rng = np.random.default_rng(0)
    n = UPLOAD_NODES
    graph = make_bundle(
        rng.normal(size=(n, UPLOAD_FEATURES)).astype(np.float32),
        rng.integers(0, n, (2, UPLOAD_EDGES)),
        rng.integers(0, 5, n),
        5,
    )
    mib = graph.nbytes / 2**20
    whole = b"".join(payload(graph))
    with contextlib.ExitStack() as stack:
        services = {way: EmbeddedService("gnn") for way in (STREAM, FILE)}
        for service in services.values():
            stack.callback(service.stop)
            service.start()
        send_raw, sink = stack.enter_context(_raw_sink())
        streams = stack.enter_context(contextlib.closing(MethodClient(services[STREAM].endpoint)))
        files = MethodClient(services[FILE].endpoint, graph_dir=services[FILE].graph_dir)
        stack.enter_context(contextlib.closing(files))
        for client in (streams, files):
            client.wait_healthy(60)
        ways: dict[str, tuple[Callable[[GraphBundle], object], int | None]] = {
            STREAM: (lambda b: _uploaded(streams, b), _cpu_clock(services[STREAM].pid)),
            FILE: (lambda b: _uploaded(files, b), _cpu_clock(services[FILE].pid)),
            RAW: (send_raw, sink),
            COPY: (lambda b: bytearray(whole), None),
        }
        rounds: list[dict[str, float]] = []
        for round_ in range(UPLOAD_ROUNDS + 1):  # round 0 warms every way up
            spent = {}
            for index, (name, (way, other)) in enumerate(ways.items()):
                shift = 1 + round_ * len(ways) + index  # a graph the service does not hold: a real upload
                fresh = make_bundle(graph.features, graph.edge_index, np.roll(graph.labels, shift), 5)
                spent[name] = _cpu_seconds(lambda way=way, fresh=fresh: way(fresh), other)
            if round_:
                rounds.append(spent)
        if "/memfd:nodeground-" not in (Path("/proc") / str(services[FILE].pid) / "maps").read_text():
            raise RuntimeError("the service maps no handed-over memfd: the same-host path fell back to the stream")
    print(
        f"upload of a {mib:.0f} MiB graph, MiB per CPU second of sender + receiver (median of {UPLOAD_ROUNDS} rounds):"
    )
    rate = {name: mib / statistics.median(r[name] for r in rounds) for name in ways}
    for name, (_, other) in ways.items():
        alone = "" if other is not None else "   (a copy into new memory, this process alone)"
        print(f"  {name:30s} {rate[name]:8.1f}{alone}")
    met = []
    for against, target in ((RAW, RAW_TARGET), (COPY, COPY_TARGET)):
        ratio = rate[FILE] / rate[against]
        met.append(ratio >= target)
        print(f"same-host memfd / {against}: {ratio:.2f}x (target >= {target:.2f}x): {'OK' if met[-1] else 'UNDER'}")
    # Fresh memory is the swing factor: where first touches are dear, the copy pays them as the file does and
    # raw gRPC (reusing its buffers) does not; where they are cheap, the copy is a bare memcpy. One target or
    # the other holds the handover to what it must cost.
    print(f"same-host memfd, either target: {'OK' if any(met) else 'UNDER'}")
    print(f"stream / {RAW}: {rate[STREAM] / rate[RAW]:.2f}x")


def bench_call_overhead(client: MethodClient) -> None:
    graph = sbm_graph("tiny", num_nodes=200, num_classes=3, num_features=8, seed=0)
    split = make_split("tiny", graph.y, "10/10/80", 0)
    bundle = hidden_label_bundle(graph, split)
    client.ensure_graph(bundle)
    config = {"max_epochs": 1, "patience": 20, "hidden": 32}
    method = MLP()
    resolved = MLP.resolve_config(config)

    def in_process() -> None:
        state = method.fit(bundle, split.train, split.val, resolved, FitContext(seed=0, device=torch.device("cpu")))
        method.predict(state, bundle)

    def through_service() -> None:
        fit = client.fit("mlp", bundle.graph_hash, split.train, split.val, config, seed=0, time_limit=None)
        client.predict(fit.value.model_handle, graph.num_nodes)
        client.release(fit.value.model_handle)

    for _ in range(5):
        in_process(), through_service()
    local = _median(in_process, 50)
    remote = _median(through_service, 50)
    print(
        f"fit+predict on a 200-node graph: service {remote * 1e3:6.2f} ms   in-process {local * 1e3:6.2f} ms   "
        f"overhead {(remote - local) * 1e3:5.2f} ms per call pair (target < 20 ms)"
    )


# (graph, model, SHORT, LONG): epochs of the two fits whose difference is timed (a 50k-node epoch costs ~40x Cora's)
EPOCH_CASES = (("cora", "gcn", 20, 120), ("cora", "gat", 20, 120), ("sbm-50k", "gcn", 3, 13), ("sbm-50k", "gat", 3, 13))
EPOCH_ROUNDS = int(os.environ.get("BENCH_ROUNDS", 5))  # a ratio near 1 moves by +-5% a round on a loaded machine
EPOCH_TARGET = 1.03


def _service_fit_cpu(client: MethodClient, pid: int, name: str, bundle, split, epochs: int) -> float:
    """The service process's CPU seconds for one fit of ``epochs`` epochs (early stopping never triggers)."""
    _, overrides = CONFIGS[name]
    service = psutil.Process(pid)
    before = sum(service.cpu_times()[:2])
    fit = client.fit(name, bundle.graph_hash, split.train, split.val, {**overrides, "max_epochs": epochs,
                     "patience": 300}, seed=0, time_limit=None)  # fmt: skip
    spent = sum(service.cpu_times()[:2]) - before
    client.release(fit.value.model_handle)
    return spent


def _plain_fit_cpu(name: str, graph, split, epochs: int) -> float:
    """This process's CPU seconds for the plain PyG loop of ``epochs`` epochs: one step and one validation pass each."""
    start = time.process_time()
    x, ei, y = (torch.from_numpy(a) for a in (graph.x, graph.edge_index, graph.y))
    train, val = torch.from_numpy(split.train), torch.from_numpy(split.val)
    model, opt = plain_model(name, x.shape[1], graph.num_classes)
    for _ in range(epochs):
        plain_epoch(model, opt, x, ei, y, train, val)
    return time.process_time() - start


def bench_epoch_cpu(client: MethodClient, pid: int) -> None:
    graphs = {
        "cora": load_dataset("cora"),
        "sbm-50k": sbm_graph("sbm-50k", num_nodes=50_000, num_classes=5, num_features=64, avg_degree=10, seed=0),
    }
    worst = 0.0
    for graph_name, name, short, long in EPOCH_CASES:
        graph = graphs[graph_name]
        split = make_split(graph_name, graph.y, "10/10/80", 0)
        bundle = hidden_label_bundle(graph, split)
        client.ensure_graph(bundle)
        _service_fit_cpu(client, pid, name, bundle, split, short)  # warm: caches, allocator, first-call costs
        _plain_fit_cpu(name, graph, split, short)
        service, plain = [], []
        for _ in range(EPOCH_ROUNDS):
            service.append(
                (_service_fit_cpu(client, pid, name, bundle, split, long)
                 - _service_fit_cpu(client, pid, name, bundle, split, short)) / (long - short)
            )  # fmt: skip
            plain.append(
                (_plain_fit_cpu(name, graph, split, long) - _plain_fit_cpu(name, graph, split, short)) / (long - short)
            )
        s, p = statistics.median(service), statistics.median(plain)
        worst = max(worst, s / p)
        print(
            f"epoch CPU, {name.upper()} on {graph_name} ({graph.num_nodes} nodes): service {s * 1e3:7.2f} ms   "
            f"plain PyG {p * 1e3:7.2f} ms   ratio {s / p:.3f}x",
            flush=True,
        )
    verdict = "OK" if worst <= EPOCH_TARGET else "OVER"
    print(f"worst epoch ratio {worst:.3f}x (target <= {EPOCH_TARGET:.2f}x): {verdict}")


def main() -> None:
    torch.set_num_threads(THREADS)
    os.environ["NODEGROUND_THREADS"] = str(THREADS)
    print(f"torch threads on both sides: {THREADS}")
    bench_upload()
    service = EmbeddedService("gnn")
    service.start()
    client = MethodClient(service.endpoint)
    try:
        client.wait_healthy(60)
        bench_call_overhead(client)
        bench_epoch_cpu(client, service.pid)
    finally:
        client.close()
        service.stop()


if __name__ == "__main__":
    main()
