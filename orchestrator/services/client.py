"""A typed client for one method service endpoint, timing every call end to end.

Every call that computes or carries a graph (Fit, Predict, uploads) runs under a health watchdog: while any
call is in flight the service's health is probed every ``WATCHDOG_INTERVAL_S``; after ``WATCHDOG_MISSES``
probes in a row go unanswered (a stopped, hung or partitioned process) the call is
cancelled and ``ServiceHung`` raised, so no call waits on a silent service forever,
whatever its time limit. One watchdog thread serves all of a client's calls (a thread
per call cost a trivial trial a quarter of its orchestrator CPU). The calls that do no compute (HasGraph,
Release, the Describe a trial asks once) are served on the service's control threads, never queued behind a
fit, so they need no probe: their deadline is the watchdog's silence (``SHORT_CALL_S``), and one that runs out
is the same ``ServiceHung``, named as soon as the watchdog would name it.

A client given a directory of its own on this host (``graph_dir``; ``embedded`` makes one per service
it starts) hands a graph over as a sealed memfd (``contract.handover``) to a service that listens in that
same directory (AttachGraph) instead of streaming it; where the service listens elsewhere or nowhere, or
refuses the descriptor, it streams.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.experimental
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from contract import handover
from contract.descriptions import MethodSpec, spec_from_proto
from contract.errors import UserError
from contract.security import CA_ENV, Security
from contract.space import Config, config_to_proto
from contract.v1 import method_service_pb2 as pb
from contract.v1 import method_service_pb2_grpc as pb_grpc
from contract.weights import weights_dir
from contract.wire import (
    CHANNEL_OPTIONS,
    GraphBundle,
    decode_probabilities,
    encode,
    graph_header,
    payload,
)

WATCHDOG_INTERVAL_S = 5.0  # seconds between health probes while a call is in flight
WATCHDOG_PROBE_TIMEOUT_S = 5.0  # one probe's own deadline
WATCHDOG_MISSES = 3  # unanswered probes in a row that declare the service hung
# The calls that do no compute (HasGraph, Release) are bounded by this deadline alone, not watched: a blocking call
# needs no thread, where a watched one needs gRPC's for its future, and one such thread a trial was CPU to spare.
# It is the silence after which the watchdog names a service hung, so a short call names it as fast.
SHORT_CALL_S = WATCHDOG_INTERVAL_S * WATCHDOG_MISSES
SINGLE_THREADED_STREAMS = grpc.experimental.ChannelOptions.SingleThreadedUnaryStream
FIT_DEADLINE_GRACE_S = 10.0  # the gRPC deadline of a fit exceeds its time limit by this, so the service answers first
# What AttachGraph answers when the graph cannot be taken on this path and the stream will do: the service offers no
# handover (or predates it), or it does not hold the descriptor under the token (expired, or another listener's).
STREAM_INSTEAD = (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.NOT_FOUND)


class ServiceUnavailable(RuntimeError, UserError):
    """The endpoint does not answer (not started, crashed, or unreachable)."""


class ServiceNotReady(ServiceUnavailable):
    """The service answers but cannot fit: pretrained weights missing or failing verification.

    ``not_ready`` holds (method, weights id, reason) triples; the message names the
    weights and the command that fetches them, in one line.
    """

    def __init__(self, not_ready: list[tuple[str, str, str]]) -> None:
        self.not_ready = not_ready
        methods = list(dict.fromkeys(m for m, _, _ in not_ready))
        ids = list(dict.fromkeys(w for _, w, _ in not_ready))
        first = not_ready[0][2].split(";")[0]
        more = f" (and {len(ids) - 1} more: {', '.join(ids[1:])})" if len(ids) > 1 else ""
        super().__init__(
            f"{', '.join(methods)} not ready: {first}{more}; fetch them with "
            f"`orchestrator weights fetch {' '.join(ids)}` (into {weights_dir()}), then rerun"
        )

    @classmethod
    def combine(cls, errors: list[ServiceNotReady]) -> ServiceNotReady:
        """One error for every service found not ready."""
        return cls([item for error in errors for item in error.not_ready])


class ServiceHung(ServiceUnavailable):
    """The service stopped answering health checks while a call was in flight; the call was cancelled."""


@dataclass
class Replica:
    """One service process that trials run on, one trial at a time (its compute is serialised anyway).

    ``pool`` is the name the directory routes by (a method or family name); ``source`` is
    ``embedded`` (a local process the orchestrator started and can restart) or ``remote``
    (an endpoint given or discovered; it can only be waited for).
    """

    pool: str
    family: str
    endpoint: str
    client: MethodClient
    source: str
    methods: tuple[str, ...] = ()  # the sweep's methods routed to this pool
    service: Any = None  # the EmbeddedService behind an embedded replica
    start_seconds: float | None = None  # process start + imports + first health answer (embedded only)
    started_at: str = ""
    pid: int | None = None
    busy: bool = False
    down: bool = False


@dataclass
class CallResult:
    value: Any
    e2e_seconds: float
    stats: pb.CallStats | None = None


@dataclass(eq=False)
class _Watched:
    """One call in flight, as the watchdog sees it."""

    call: grpc.Future
    silent_since: float  # when the service last answered a probe (or the call started)
    misses: int = 0
    silence: float | None = None  # seconds without an answer when the watchdog cancelled the call


class _Watchdog:
    """Probes a service's health while any of its client's calls is in flight; cancels a call that saw
    ``WATCHDOG_MISSES`` unanswered probes in a row. One thread per client, started with its first call."""

    def __init__(self, responsive: Callable[[], bool], name: str) -> None:
        self._responsive, self._name = responsive, name
        self._calls: set[_Watched] = set()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    @contextmanager
    def watching(self, call: grpc.Future) -> Iterator[_Watched]:
        entry = _Watched(call, time.monotonic())
        with self._cond:
            self._calls.add(entry)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name=f"watchdog-{self._name}", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        try:
            yield entry
        finally:
            with self._cond:
                self._calls.discard(entry)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._calls or self._closed)  # idle: no probes
                if self._cond.wait_for(lambda: self._closed, timeout=WATCHDOG_INTERVAL_S):
                    return
                watched = list(self._calls)
            if watched:
                self._probe(watched)

    def _probe(self, watched: list[_Watched]) -> None:
        answered, now = self._responsive(), time.monotonic()
        for entry in watched:
            if answered:
                entry.misses, entry.silent_since = 0, now
                continue
            entry.misses += 1
            if entry.misses >= WATCHDOG_MISSES and entry.silence is None:
                entry.silence = now - entry.silent_since
                entry.call.cancel()


class MethodClient:
    def __init__(self, endpoint: str, security: Security | None = None, graph_dir: str = "") -> None:
        """``security``: TLS and token to dial with; by default as the environment says (contract.security).

        ``graph_dir``: a directory of this client's on this host that the service may read graphs from.
        """
        self.endpoint = endpoint
        self.graph_dir = graph_dir
        self.security = security or Security.from_env()
        self._connect()
        self._first_description: pb.DescribeResponse | None = None
        self._watchdog = _Watchdog(self.responsive, endpoint)
        # Graphs this client delivered, or the service said it held: a trial skips HasGraph for them. A graph
        # evicted since is answered NOT_FOUND by its fit, and the sweep then forgets and delivers it again.
        self.remembers_graphs = True
        self._held: set[str] = set()

    def _connect(self) -> None:
        """The transport: a channel to ``endpoint`` and the stubs on it. Every call below goes through ``_stub``
        (and ``_unary``, ``_short``, ``_watched``), so a client that answers in this process replaces only these."""
        # Predict's reply stream is read on the calling thread, not on a thread gRPC starts for each call
        self._channel = self.security.channel(self.endpoint, options=[*CHANNEL_OPTIONS, (SINGLE_THREADED_STREAMS, 1)])
        self._stub = pb_grpc.MethodServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def close(self) -> None:
        self._watchdog.close()
        self._channel.close()

    def wait_healthy(self, timeout: float) -> None:
        """Block until health says SERVING; ServiceUnavailable after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                reply = self._health.Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=min(2.0, max(0.1, deadline - time.monotonic()))
                )
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
                last = f"health status {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}"
                not_ready = self._stub.Describe(pb.DescribeRequest(), timeout=5.0).not_ready
                if not_ready:  # the service says why: waiting will not help
                    raise ServiceNotReady([(r.method, r.weights_id, r.reason) for r in not_ready])
            except grpc.RpcError as exc:
                last = exc.details() or exc.code().name
            time.sleep(0.05)
        hint = f"; if it serves TLS, set {CA_ENV}" if self.security.ca is None and "Socket closed" in last else ""
        raise ServiceUnavailable(
            f"method service at {self.endpoint} did not become healthy within {timeout:.0f} s ({last}){hint}"
        )

    def responsive(self, timeout: float = WATCHDOG_PROBE_TIMEOUT_S) -> bool:
        """Whether the process answers a health check at all (whatever its status)."""
        try:
            self._health.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
            return True
        except grpc.RpcError:
            return False

    @contextmanager
    def _watched(self, call: grpc.Future, what: str) -> Iterator[None]:
        """Run the body while the watchdog cancels ``call`` once the service stops answering health checks."""
        with self._watchdog.watching(call) as entry:
            try:
                yield
            except (grpc.RpcError, grpc.FutureCancelledError):  # a cancelled future raises the latter
                if entry.silence is not None:
                    raise ServiceHung(
                        f"the service at {self.endpoint} stopped answering health checks for {entry.silence:.0f} s "
                        f"during {what}; the call was cancelled"
                    ) from None
                raise

    def described(self, timeout: float = 30.0) -> pb.DescribeResponse:
        """The service's whole Describe reply (a submission bundle records it as given).

        ServiceUnavailable (one line) when it will not say (e.g. refused: no token).
        """
        try:
            return self._stub.Describe(pb.DescribeRequest(), timeout=timeout)
        except grpc.RpcError as exc:
            raise ServiceUnavailable(
                f"the service at {self.endpoint} refused Describe: {exc.code().name}: {exc.details()}"
            ) from None

    def describe(self, timeout: float = 30.0) -> list[MethodSpec]:
        """The methods the service hosts (ServiceUnavailable when it will not say)."""
        return [spec_from_proto(m) for m in self.described(timeout).methods]

    def device(self, timeout: float = 30.0) -> dict[str, str | int]:
        """The device the service computes on and what it is (name and memory, driver and CUDA versions, the CPU
        model, the threads it computes with and its kernels), as it describes it; what it leaves unsaid is left out."""
        reply = self.described(timeout)
        fields: dict[str, str | int] = {
            "device": reply.device,
            "device_name": reply.device_name,
            "driver_version": reply.driver_version,
            "cuda_version": reply.cuda_version,
            "cpu_model": reply.cpu_model,
            "compute_threads": int(reply.compute_threads),
            "device_memory_bytes": int(reply.device_memory_bytes),
            "kernels": reply.kernels,
        }
        return {k: v for k, v in fields.items() if v}

    def takes_fit_labels(self) -> bool:
        """Whether the service reads a fit's labels from the request (Describe's ``fit_labels``; asked once).

        Then one bundle with every label hidden serves every split of a graph; else each split is its own bundle.
        """
        return self._described_once().fit_labels

    def _described_once(self) -> pb.DescribeResponse:
        """Describe as first answered: what a service is built to take does not change while it runs."""
        if self._first_description is None:
            self._first_description = self._short(self._stub.Describe, pb.DescribeRequest(), "Describe")
        return self._first_description

    def _short(self, method: grpc.UnaryUnaryMultiCallable, request: Any, what: str) -> Any:
        """A call that does no compute, under ``SHORT_CALL_S``: ServiceHung once the service is silent that long."""
        try:
            return method(request, timeout=SHORT_CALL_S)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise
            raise ServiceHung(
                f"the service at {self.endpoint} did not answer {what} for {SHORT_CALL_S:g} s (a call its control "
                "threads answer at once); the call was cancelled"
            ) from None

    def graphs_received(self, timeout: float = 30.0) -> int:
        """How many graph uploads the service has held since it started (Describe's ``graphs_received``)."""
        return int(self._stub.Describe(pb.DescribeRequest(), timeout=timeout).graphs_received)

    def ensure_graph(self, bundle: GraphBundle, timeout: float | None = None) -> CallResult:
        """Upload the bundle unless the service holds it (or this client delivered it: ``remembers_graphs``); the
        value says whether it uploaded."""
        start = time.perf_counter()
        if self.remembers_graphs and bundle.graph_hash in self._held:
            return CallResult(False, time.perf_counter() - start)
        held = self._short(self._stub.HasGraph, pb.HasGraphRequest(graph_hash=bundle.graph_hash), "HasGraph").held
        if not held and not self._attached(bundle, timeout):
            self._unary(self._stub.UploadGraph, encode(bundle), timeout, "UploadGraph")
        self._held.add(bundle.graph_hash)
        return CallResult(not held, time.perf_counter() - start)

    def forget_graph(self, graph_hash: str) -> None:
        """The service answered that it does not hold this graph (evicted, restarted): ask it again next time."""
        self._held.discard(graph_hash)

    def _attached(self, bundle: GraphBundle, timeout: float | None) -> bool:
        """Hand the graph over as a sealed memfd where the service listens in this client's ``graph_dir``.

        False where the stream must carry it instead: no such directory here or there, no memfd on this
        platform or no memory for one, a service that does not take the descriptor (no one listening, a
        refusal) or that answers one of STREAM_INSTEAD. The memfd is closed once the call returns; a held
        graph keeps the service's mapping of it.
        """
        if not handover.SUPPORTED or not self.graph_dir or self._described_once().shared_graph_dir != self.graph_dir:
            return False
        try:
            fd = handover.sealed(payload(bundle), f"nodeground-{bundle.graph_hash[:16]}")
        except OSError:
            return False
        try:
            try:
                token = handover.hand_over(self.graph_dir, fd, SHORT_CALL_S)
            except OSError:
                return False
            request = pb.AttachGraphRequest(header=graph_header(bundle), handover=token)
            try:
                self._unary(self._stub.AttachGraph, request, timeout, "AttachGraph")
            except grpc.RpcError as exc:
                if exc.code() in STREAM_INSTEAD:
                    return False
                raise
            return True
        finally:
            os.close(fd)

    def _unary(
        self,
        method: grpc.UnaryUnaryMultiCallable | grpc.StreamUnaryMultiCallable,
        request: Any,
        timeout: float | None,
        what: str,
    ) -> Any:
        """One call with a single reply, under the watchdog."""
        call = method.future(request, timeout=timeout)
        with self._watched(call, what):
            return call.result()

    def fit(
        self,
        method: str,
        graph_hash: str,
        train: np.ndarray,
        val: np.ndarray,
        config: Config,
        seed: int,
        time_limit: float | None,
        labels: np.ndarray | None = None,
    ) -> CallResult:
        """One fit. ``labels`` (every node's, as the orchestrator knows them): the request carries those of
        ``train`` and ``val`` only, for a service that takes them (``takes_fit_labels``) and a graph uploaded
        with every label hidden; None: the held bundle's labels are the fit's."""
        request = pb.FitRequest(
            method=method,
            graph_hash=graph_hash,
            train_nodes=train.astype(np.int32).tolist(),
            val_nodes=val.astype(np.int32).tolist(),
            config=config_to_proto(config),
            seed=seed,
            time_limit_seconds=time_limit or 0.0,
        )
        if labels is not None:
            request.train_labels.extend(labels[train].astype(np.int32).tolist())
            request.val_labels.extend(labels[val].astype(np.int32).tolist())
        # The gRPC deadline is a little longer than the service's own limit, so the
        # service normally answers DEADLINE_EXCEEDED itself and stays healthy.
        timeout = time_limit + FIT_DEADLINE_GRACE_S if time_limit else None
        start = time.perf_counter()
        reply = self._unary(self._stub.Fit, request, timeout, "Fit")
        return CallResult(reply, time.perf_counter() - start, reply.stats)

    def predict(
        self, handle: str, num_nodes: int, num_classes: int | None = None, timeout: float | None = None
    ) -> CallResult:
        """All nodes' probabilities.

        BundleError when the reply does not cover ``num_nodes`` x ``num_classes`` (if given).
        """
        start = time.perf_counter()
        call = self._stub.Predict(pb.PredictRequest(model_handle=handle), timeout=timeout)
        with self._watched(call, "Predict"):
            probs, stats = decode_probabilities(call, num_nodes, num_classes)
        return CallResult(probs, time.perf_counter() - start, stats)

    def release(self, handle: str) -> bool:
        return self._short(self._stub.Release, pb.ReleaseRequest(model_handle=handle), "Release").released


def client_deadline(exc: grpc.RpcError) -> bool:
    """The deadline ran out on the client's side (the service never answered), not in the service: a service that
    did not stop at its own limit may still be computing, so an embedded one is replaced before it serves again."""
    return (
        exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED and (exc.details() or "").strip().lower() == "deadline exceeded"
    )
