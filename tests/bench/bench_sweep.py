"""Sweep engine throughput and orchestrator overhead per trial, with a trivial method.

What is measured:
- the method, ``const``, returns class-prior-like constant probabilities: its fit and predict cost
  microseconds, so a sweep's time is the harness's own cost (gRPC calls, scoring, scheduling, store);
- it is served by real service processes (this module with ``--serve``), one per replica;
- the sweep: ``const`` on synthetic-tiny (300 nodes), 2 regimes x 5 splits x 20 configurations =
  200 trials, with ``--parallel`` 1, 2 and 4 (as many replicas), each on a fresh store;
- against it: the same 200 fits+predicts called in-process, and the same plus the orchestrator's scoring;
- per trial, for the serial sweep: wall time, the RPCs' end-to-end time (HasGraph/upload, Fit, Predict as
  recorded; Release timed apart), scoring (metrics) and the store write (one WAL transaction, synchronous=NORMAL),
  both timed inside the run (``Sweep.timing``), and what remains in the sweep's own thread: scheduling
  (planning, dataset load, hand-off to the worker, progress callbacks).
  "Orchestrator overhead" = scheduling + record write (target < 5 ms);
- the orchestrator's CPU per trial in the serial sweep: this process's CPU time (every thread: planning, the
  client side of the RPCs, scoring, the store, progress) over the trials; the method's fit and predict run in
  the service processes, so they are not in it (target <= 3 ms).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from contract.families import Family
from contract.wire import GraphBundle
from methods.sdk import Capabilities, Config, FitContext, FloatParam, Method

REPO = Path(__file__).resolve().parents[2]
READY = "BENCH_LISTENING"
TRIALS_PER_CELL = 20
PARALLEL = (1, 2, 4)
ORCHESTRATOR_CPU_TARGET_MS = 3.0


class Constant(Method):
    """Predicts the same distribution for every node (``smoothing`` mixes a one-hot on class 0 with uniform)."""

    name = "const"
    version = "bench"
    capabilities = Capabilities(uses_gpu=False)
    default_config: Config = {"smoothing": 0.5}
    search_space = (FloatParam("smoothing", 0.01, 1.0),)

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> Any:
        ctx.check()
        probs = np.full(graph.num_classes, float(config["smoothing"]) / graph.num_classes)
        probs[0] += 1.0 - float(config["smoothing"])
        return probs.astype(np.float32)

    def predict(self, state: Any, graph: GraphBundle) -> np.ndarray:
        return np.broadcast_to(state, (graph.num_nodes, state.size)).copy()


FAMILY = Family("bench", "", "tests.bench.bench_sweep", ("const",))


def serve() -> None:
    """Host ``const`` on a free port (a child of the bench; it exits with it)."""
    import signal
    import threading

    from methods.sdk.service import MethodServicer, build_server

    server, port = build_server(MethodServicer("bench", [Constant]), "127.0.0.1:0")
    server.start()
    print(f"{READY} {port}", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    stopped.wait()
    server.stop(0)


def stop_services(procs: list[subprocess.Popen], grace: float = 10.0) -> None:
    """Stop every child whatever state it is in: SIGTERM, then SIGKILL for any still alive after ``grace`` s."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def start_services(count: int, procs: list[subprocess.Popen]) -> list[str]:
    """Start ``count`` services, appending each to ``procs`` as it starts (so the caller can stop them all)."""
    env = {**os.environ, "NODEGROUND_PARENT_PID": str(os.getpid()), "PYTHONPATH": str(REPO)}
    for _ in range(count):
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "tests.bench.bench_sweep", "--serve"],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
            )
        )
    endpoints = []
    for proc in procs:
        line = proc.stdout.readline().decode()
        assert line.startswith(READY), f"bench service did not start: {line!r}"
        endpoints.append(f"127.0.0.1:{int(line.split()[1])}")
    return endpoints


def _plan():
    from orchestrator.sweep import SweepPlan

    return SweepPlan(("const",), ("synthetic-tiny",), ("10/10/80", "50/25/25"), (0, 1, 2, 3, 4), budget=TRIALS_PER_CELL)


def run_sweep(endpoints: list[str], parallel: int, store_path: Path):
    from orchestrator.services.directory import ServiceDirectory, resolve_methods
    from orchestrator.store import Store
    from orchestrator.sweep import Sweep

    directory = ServiceDirectory(
        resolve_methods(["const"], {"bench": FAMILY}), endpoints={"bench": endpoints[:parallel]}
    )
    with Store(store_path) as store:
        sweep = Sweep(_plan(), store, directory, parallel=parallel, warmup="none")
        for method in sweep.plan.methods:
            sweep.spec(method)
        start, cpu = time.perf_counter(), time.process_time()
        records = sweep.run()  # planning (sampling, keys), dataset load, trials, store writes
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    directory.close()
    return records, wall, sweep.timing, cpu


def in_process(trials) -> tuple[float, float]:
    """Seconds per trial for fit+predict in-process, and for fit+predict+scoring (the sweep's own work minus transport
    and store)."""
    import torch

    from orchestrator.data.registry import load_dataset
    from orchestrator.data.splits import graph_split
    from orchestrator.records import TrialRecord
    from orchestrator.run_trial import TrialRunner, hidden_label_bundle

    graph = load_dataset("synthetic-tiny")
    prepared = {}
    for t in trials:
        if (t.regime, t.split) not in prepared:
            split = graph_split(graph, t.regime, t.split)
            prepared[(t.regime, t.split)] = (split, hidden_label_bundle(graph, split))
    method = Constant()
    ctx = FitContext(seed=0, device=torch.device("cpu"))

    def calls(score: bool) -> float:
        start = time.perf_counter()
        for t in trials:
            split, bundle = prepared[(t.regime, t.split)]
            probs = method.predict(
                method.fit(bundle, split.train, split.val, Constant.resolve_config(t.config), ctx), bundle
            )
            if score:
                record = TrialRecord(t.key, "const", "bench", "bench", "supervised", graph.name, "", graph.task_type,
                                     graph.num_classes, t.regime, t.split, t.index, t.index == 0, "{}", "", t.split,
                                     "ok")  # fmt: skip
                TrialRunner._score(probs, graph, split, record)
        return (time.perf_counter() - start) / len(trials)

    calls(True)  # warm caches
    return calls(False), calls(True)


def release_seconds(endpoint: str) -> float:
    """A Release round trip (a trial's fourth call; not among the recorded per-call times)."""
    from orchestrator.services.client import MethodClient

    client = MethodClient(endpoint)
    try:
        start = time.perf_counter()
        for _ in range(100):
            client.release("no-such-handle")
        return (time.perf_counter() - start) / 100
    finally:
        client.close()


def main() -> None:
    os.environ.setdefault("NODEGROUND_THREADS", "1")
    procs: list[subprocess.Popen] = []
    try:
        endpoints = start_services(max(PARALLEL), procs)
        with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
            tmp_path = Path(tmp)
            from orchestrator.services.client import MethodClient

            counter = MethodClient(endpoints[0])
            received = counter.graphs_received()
            run_sweep(endpoints, 1, tmp_path / "warm.sqlite")  # imports, dataset cache, first connections
            uploads = counter.graphs_received() - received
            counter.close()
            rows = {}
            for parallel in PARALLEL:
                records, wall, timing, cpu = run_sweep(endpoints, parallel, tmp_path / f"p{parallel}.sqlite")
                assert len(records) == 2 * 5 * TRIALS_PER_CELL and all(r.status == "ok" for r in records), {
                    r.error for r in records
                }
                rows[parallel] = (records, wall, timing, cpu)
            n = len(rows[1][0])
            trials = _planned(endpoints[0], tmp_path)
            local_fit, local_scored = in_process(trials)
            print(
                f"trivial method `const` on synthetic-tiny (300 nodes): {n} trials per sweep (2 regimes x 5 splits x "
                f"{TRIALS_PER_CELL} configs), "
                f"one service process per replica, {os.cpu_count()} CPU(s)"
            )
            print(
                f"in-process, the same {n} fit+predict calls: {1 / local_fit:9.0f} trials/s ({local_fit * 1e3:.3f} "
                f"ms/trial); plus the orchestrator's scoring (val+test metrics): {1 / local_scored:6.0f} trials/s "
                f"({local_scored * 1e3:.2f} ms/trial)"
            )
            print(
                f"graph uploads in the first sweep (2 regimes x 5 splits of one graph, counted by the service): "
                f"{uploads} (one per (regime, split) before the shared bundle: 10)"
            )
            for parallel, (records, wall, _, _) in rows.items():
                print(
                    f"sweep --parallel {parallel}: {n / wall:7.1f} trials/s  ({wall * 1e3 / n:6.2f} ms/trial wall, "
                    f"{len({r.endpoint for r in records})} replica(s) used)"
                )
            records, wall, timing, cpu = rows[1]
            rpc = float(np.mean([r.upload_e2e_s + r.fit_e2e_s + r.predict_e2e_s for r in records]))
            release = release_seconds(endpoints[0])
            job, score, write = timing.job_s / n, timing.score_s / n, timing.write_s / n
            scheduling = (timing.wall_s - timing.job_s - timing.write_s) / n
            print(
                f"serial sweep, per trial (measured inside the run): wall {timing.wall_s / n * 1e3:.2f} ms = trial "
                f"worker {job * 1e3:.2f} ms [RPCs HasGraph+Fit+Predict {rpc * 1e3:.2f}, Release ~{release * 1e3:.2f}, "
                f"scoring {score * 1e3:.2f}, rest {(job - rpc - release - score) * 1e3:.2f}] + store write "
                f"{write * 1e3:.2f} ms + scheduling (planning, dataset, hand-off, progress) {scheduling * 1e3:.2f} ms"
            )
            print(f"store write cost: {write * 1e3:.2f} ms per trial record (own transaction, WAL, synchronous=NORMAL)")
            print(
                f"orchestrator overhead per trial (scheduling + record write): {(scheduling + write) * 1e3:.2f} ms "
                f"(target < 5 ms); scoring, reported apart: {score * 1e3:.2f} ms"
            )
            print(
                f"orchestrator CPU per trial, serial sweep (all its threads; fit and predict run in the service): "
                f"{cpu / n * 1e3:.2f} ms (target <= {ORCHESTRATOR_CPU_TARGET_MS:.0f} ms): "
                f"{'OK' if cpu / n * 1e3 <= ORCHESTRATOR_CPU_TARGET_MS else 'OVER'}"
            )
    finally:
        stop_services(procs)


def _planned(endpoint: str, tmp_path: Path):
    from orchestrator.services.directory import ServiceDirectory, resolve_methods
    from orchestrator.store import Store
    from orchestrator.sweep import Sweep

    directory = ServiceDirectory(resolve_methods(["const"], {"bench": FAMILY}), endpoints={"bench": [endpoint]})
    with Store(tmp_path / "plan.sqlite") as store:
        trials = Sweep(_plan(), store, directory, warmup="none").planned_trials()
    directory.close()
    return trials


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main()
