"""What the service boundary costs: upload throughput, per-call overhead, GCN fit through the service.

Each figure is measured side by side in one run (service vs in-process) and
printed as a ratio, since absolute times on shared machines are noisy.
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np
import torch

from contract.wire import make_bundle
from methods.gnn import GCN, MLP
from methods.sdk.method import FitContext
from orchestrator.data.splits import make_split
from orchestrator.data.synthetic import sbm_graph
from orchestrator.services.client import MethodClient
from orchestrator.services.embedded import EmbeddedService
from orchestrator.sweep import hidden_label_bundle

THREADS = int(os.environ.get("NODEGROUND_THREADS", "1"))


def _median(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_upload(client: MethodClient) -> None:
    rng = np.random.default_rng(0)
    n, f = 100_000, 128
    bundle = make_bundle(
        rng.normal(size=(n, f)).astype(np.float32), rng.integers(0, n, (2, 1_000_000)), rng.integers(0, 5, n), 5
    )
    mb = bundle.nbytes / 2**20
    payload = b"".join(bytes(memoryview(t).cast("B")) for t in bundle.tensors())
    copy_s = _median(lambda: bytearray(payload), 5)
    upload_times = []
    for i in range(3):
        fresh = make_bundle(
            bundle.features, bundle.edge_index, np.roll(bundle.labels, i + 1), 5
        )  # new hash: a real upload
        start = time.perf_counter()
        assert client.ensure_graph(fresh).value
        upload_times.append(time.perf_counter() - start)
    upload_s = statistics.median(upload_times)
    print(
        f"upload {mb:.0f} MiB over loopback gRPC: {mb / upload_s:8.1f} MiB/s   in-memory copy: {mb / copy_s:8.1f} "
        f"MiB/s   ratio {upload_s / copy_s:.1f}x slower (includes sha256 verification on receipt)"
    )


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


def bench_gcn_fit(client: MethodClient) -> None:
    graph = sbm_graph("gcn50k", num_nodes=50_000, num_classes=5, num_features=64, avg_degree=10, seed=0)
    split = make_split("gcn50k", graph.y, "10/10/80", 0)
    bundle = hidden_label_bundle(graph, split)
    client.ensure_graph(bundle)
    config = {"max_epochs": 60, "patience": 300}
    resolved = GCN.resolve_config(config)
    method = GCN()

    def in_process() -> None:
        method.fit(bundle, split.train, split.val, resolved, FitContext(seed=0, device=torch.device("cpu")))

    def through_service() -> None:
        fit = client.fit("gcn", bundle.graph_hash, split.train, split.val, config, seed=0, time_limit=None)
        client.release(fit.value.model_handle)

    in_process(), through_service()
    local, remote = [], []
    for _ in range(3):  # interleaved, so drift in machine load hits both sides alike
        local.append(_median(in_process, 1))
        remote.append(_median(through_service, 1))
    lo, re = statistics.median(local), statistics.median(remote)
    print(
        f"GCN fit, 50k nodes, 60 epochs: service {re:6.2f} s   in-process {lo:6.2f} s   ratio {re / lo:.3f}x (target "
        "<= 1.10x)"
    )


def main() -> None:
    torch.set_num_threads(THREADS)
    os.environ["NODEGROUND_THREADS"] = str(THREADS)
    print(f"torch threads on both sides: {THREADS}")
    service = EmbeddedService("gnn")
    service.start()
    client = MethodClient(service.endpoint)
    try:
        client.wait_healthy(60)
        bench_upload(client)
        bench_call_overhead(client)
        bench_gcn_fit(client)
    finally:
        client.close()
        service.stop()


if __name__ == "__main__":
    main()
