"""Warm-up: when a replica comes up (a start, a restart, a remote endpoint first dialled) it runs one tiny
fit+predict per method on a small built-in graph; its start and warm-up seconds go to the store's ``services``
table, so first-call costs (imports, CUDA context, checkpoint loading) are charged to no trial.

A warm-up call that runs past its limit on the client's side (the service did not stop at its own) leaves the
service computing, as a trial's would: an embedded replica is then replaced (``Warmups.replace``, the directory's
``recover``) before it runs a trial, and the fresh one runs trials without a warm-up of its own (another would
likely run past the limit again). Without that, the next trial queued behind the stuck call and was stored
``timeout`` without having run.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np

from contract.space import capped_epochs
from contract.wire import BundleError, GraphBundle, make_bundle
from orchestrator.services.client import MethodClient, Replica, ServiceUnavailable, client_deadline
from orchestrator.services.directory import timestamp
from orchestrator.store import ServiceRecord

WARMUP_EPOCHS = 2  # a warm-up fit trains at most this many epochs (contract.space.capped_epochs)
WARMUP_TIME_LIMIT_S = 120.0
WARMUP_MODES = ("all", "embedded", "none")


def warmup_bundle() -> tuple[GraphBundle, np.ndarray, np.ndarray]:
    """A 60-node, 3-class built-in graph for warm-up fits: train 0-19, validation 20-39, the rest hidden."""
    from orchestrator.data.synthetic import sbm_graph

    graph = sbm_graph("warmup", num_nodes=60, num_classes=3, num_features=8, avg_degree=4.0, seed=0)
    labels = graph.y.astype(np.int64).copy()
    labels[40:] = -1
    return make_bundle(graph.x, graph.edge_index, labels, graph.num_classes), np.arange(0, 20), np.arange(20, 40)


@dataclass
class Warmups:
    """The replicas of a sweep as they come up (the directory's ``on_ready``): each one's ``ServiceRecord``, warmed
    up first as ``mode`` says, queued in ``records`` for the sweep's one writer."""

    methods: Sequence[str]  # the plan's methods, in the plan's order
    mode: str = "embedded"  # which replicas get warm-up fits: all, embedded (processes this sweep started), none
    records: queue.SimpleQueue[ServiceRecord] = field(default_factory=queue.SimpleQueue)
    deferred: list[Replica] | None = None  # replicas that came up while describing: warmed once all are ready
    # Brings a replica back in place (``Directory.recover``): an embedded one left computing by its warm-up.
    replace: Callable[[Replica], bool] | None = None
    _bundle: tuple | None = None
    _replacing: set[int] = field(default_factory=set)  # replicas being replaced for their warm-up: not warmed again

    def warm_all(self, replicas: list[Replica]) -> None:
        """Warm up the replicas that came up while deferred, all at once (the bundle built before, not by each)."""
        if replicas and self._bundle is None:
            self._bundle = warmup_bundle()
        all_at_once(self.on_ready, replicas, "warmup")

    def on_ready(self, replica: Replica) -> None:
        """Measure a fresh replica's warm-up (never raises: a failed warm-up is recorded, the sweep goes on)."""
        if self.deferred is not None:
            self.deferred.append(replica)
            return
        service = ServiceRecord(
            endpoint=replica.endpoint,
            family=replica.family,
            source=replica.source,
            pool=replica.pool,
            started_at=replica.started_at or timestamp(),
            start_seconds=replica.start_seconds,
            pid=replica.pid,
        )
        wanted = [m for m in self.methods if m in replica.methods]
        if id(replica) in self._replacing:
            service.warmup_error = "not warmed up: the warm-up of the service it replaced ran past its time limit"
        elif self.mode == "all" or (self.mode == "embedded" and replica.source == "embedded"):
            service.warmup_seconds, service.warmup_methods, service.warmup_error, stuck = self._warm(
                replica.client, wanted
            )
            if stuck and replica.source == "embedded" and self.replace is not None:
                service.warmup_error = f"{service.warmup_error}; {self._replaced(replica)}"
        self.records.put(service)

    def _replaced(self, replica: Replica) -> str:
        """Replace a replica its warm-up left computing (the fresh one records itself, unwarmed); what happened."""
        assert self.replace is not None
        self._replacing.add(id(replica))
        try:
            back = self.replace(replica)
        finally:
            self._replacing.discard(id(replica))
        return "replaced by a fresh service" if back else "its replacement did not start"

    def _warm(self, client: MethodClient, methods: list[str]) -> tuple[float, str, str | None, bool]:
        """(seconds, methods, what failed, whether a call ran past its limit on the client's side)."""
        if self._bundle is None:
            self._bundle = warmup_bundle()
        bundle, train, val = self._bundle
        started = time.perf_counter()
        errors = []
        stuck = False
        try:
            hosted = {s.name: s for s in client.describe()}
            client.ensure_graph(bundle)
            for method in methods:
                spec = hosted.get(method)
                if spec is None:
                    errors.append(f"{method}: not hosted")
                    continue
                config = {**spec.default_config, **capped_epochs(spec.default_config, WARMUP_EPOCHS)}
                try:
                    fit = client.fit(method, bundle.graph_hash, train, val, config, 0, WARMUP_TIME_LIMIT_S)
                    try:
                        client.predict(
                            fit.value.model_handle, bundle.num_nodes, bundle.num_classes, timeout=WARMUP_TIME_LIMIT_S
                        )
                    finally:
                        client.release(fit.value.model_handle)
                except grpc.RpcError as exc:
                    errors.append(f"{method}: {exc.code().name}: {exc.details()}")
                    if client_deadline(exc):
                        stuck = True
                        break  # the service is still computing: any further call would queue behind it
                except (BundleError, ServiceUnavailable) as exc:
                    errors.append(f"{method}: {exc}")
        except grpc.RpcError as exc:
            errors.append(f"{exc.code().name}: {exc.details()}")
        except ServiceUnavailable as exc:
            errors.append(str(exc))
        return time.perf_counter() - started, ",".join(methods), "; ".join(errors) or None, stuck


def all_at_once(work: Callable[[Any], None], items: list[Any], name: str) -> None:
    """``work`` on every item, each in its own thread (service starts and warm-ups overlap: the slowest one is the
    wait, not their sum); the first item's exception, in order, is raised once all have ended. An interrupt (Ctrl-C)
    does not wait for them: what they started is stopped with the sweep's services."""
    if len(items) <= 1:
        for item in items:
            work(item)
        return
    pool = ThreadPoolExecutor(max_workers=len(items), thread_name_prefix=name)
    try:
        futures = [pool.submit(work, item) for item in items]
        wait(futures)
        for future in futures:
            future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
