"""A typed client for one method service endpoint, timing every call end to end.

Every call but Describe runs under a health watchdog: while the call is in flight
the service's health is probed every ``WATCHDOG_INTERVAL_S``; after ``WATCHDOG_MISSES``
probes in a row go unanswered (a stopped, hung or partitioned process) the call is
cancelled and ``ServiceHung`` raised, so no call waits on a silent service forever,
whatever its time limit.

A client given a directory of its own on this host (``graph_dir``; ``embedded`` makes one per service
it starts) hands a graph to a service that reads that same directory as a file there (AttachGraph)
instead of streaming it; where the service reads another or none, or does not find the file, it streams.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from contract.descriptions import MethodSpec, spec_from_proto
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
    shared_graph_path,
)

WATCHDOG_INTERVAL_S = 5.0  # seconds between health probes while a call is in flight
WATCHDOG_PROBE_TIMEOUT_S = 5.0  # one probe's own deadline
WATCHDOG_MISSES = 3  # unanswered probes in a row that declare the service hung
SHORT_CALL_S = 30.0  # deadline of the calls that do no compute (HasGraph, Release)
FIT_DEADLINE_GRACE_S = 10.0  # the gRPC deadline of a fit exceeds its time limit by this, so the service answers first
# What AttachGraph answers when the file cannot be taken on this path and the stream will do: the service offers no
# file path (or predates it), or the file is not where it looks (another filesystem under the same name).
STREAM_INSTEAD = (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.NOT_FOUND)


class ServiceUnavailable(RuntimeError):
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


class MethodClient:
    def __init__(self, endpoint: str, security: Security | None = None, graph_dir: str = "") -> None:
        """``security``: TLS and token to dial with; by default as the environment says (contract.security).

        ``graph_dir``: a directory of this client's on this host that the service may read graphs from.
        """
        self.endpoint = endpoint
        self.graph_dir = graph_dir
        self.security = security or Security.from_env()
        self._channel = self.security.channel(
            endpoint,
            options=CHANNEL_OPTIONS,
        )
        self._stub = pb_grpc.MethodServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self._first_description: pb.DescribeResponse | None = None

    def close(self) -> None:
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
    def _watched(self, call: grpc.Call, what: str) -> Iterator[None]:
        """Run the body while a watchdog cancels ``call`` once the service stops answering health checks."""
        done = threading.Event()
        fired: list[float] = []

        def watch() -> None:
            misses, silent_since = 0, time.monotonic()
            while not done.wait(WATCHDOG_INTERVAL_S):
                if self.responsive():
                    misses, silent_since = 0, time.monotonic()
                    continue
                misses += 1
                if misses >= WATCHDOG_MISSES and not done.is_set():
                    fired.append(time.monotonic() - silent_since)
                    call.cancel()
                    return

        thread = threading.Thread(target=watch, name=f"watchdog-{what}", daemon=True)
        thread.start()
        try:
            yield
        except (grpc.RpcError, grpc.FutureCancelledError):  # a cancelled future raises the latter
            if fired:
                raise ServiceHung(
                    f"the service at {self.endpoint} stopped answering health checks for {fired[0]:.0f} s during "
                    f"{what}; the call was cancelled"
                ) from None
            raise
        finally:
            done.set()

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

    def device(self, timeout: float = 30.0) -> dict[str, str]:
        """The device the service computes on and what it is (name, driver and CUDA versions), as it describes it."""
        reply = self.described(timeout)
        fields = {
            "device": reply.device,
            "device_name": reply.device_name,
            "driver_version": reply.driver_version,
            "cuda_version": reply.cuda_version,
        }
        return {k: v for k, v in fields.items() if v}

    def takes_fit_labels(self, timeout: float = 30.0) -> bool:
        """Whether the service reads a fit's labels from the request (Describe's ``fit_labels``; asked once).

        Then one bundle with every label hidden serves every split of a graph; else each split is its own bundle.
        """
        return self._described_once(timeout).fit_labels

    def _described_once(self, timeout: float) -> pb.DescribeResponse:
        """Describe as first answered: what a service is built to take does not change while it runs."""
        if self._first_description is None:
            self._first_description = self._stub.Describe(pb.DescribeRequest(), timeout=timeout)
        return self._first_description

    def graphs_received(self, timeout: float = 30.0) -> int:
        """How many graph uploads the service has held since it started (Describe's ``graphs_received``)."""
        return int(self._stub.Describe(pb.DescribeRequest(), timeout=timeout).graphs_received)

    def ensure_graph(self, bundle: GraphBundle, timeout: float | None = None) -> CallResult:
        """Upload the bundle unless the service already holds it; the value says whether it uploaded."""
        start = time.perf_counter()
        held = self._unary(
            self._stub.HasGraph, pb.HasGraphRequest(graph_hash=bundle.graph_hash), SHORT_CALL_S, "HasGraph"
        ).held
        if not held and not self._attached(bundle, timeout):
            self._unary(self._stub.UploadGraph, encode(bundle), timeout, "UploadGraph")
        return CallResult(not held, time.perf_counter() - start)

    def _attached(self, bundle: GraphBundle, timeout: float | None) -> bool:
        """Hand the graph over as a file in ``graph_dir`` where the service reads that very directory.

        False where the stream must carry it instead: no such directory here or there, a file that cannot be
        written (no room, the name taken), or a service that answers one of STREAM_INSTEAD. The file is removed
        once the call returns, whatever it answered; a held graph keeps its pages mapped in the service.
        """
        if not self.graph_dir or self._described_once(SHORT_CALL_S).shared_graph_dir != self.graph_dir:
            return False
        path = shared_graph_path(self.graph_dir, bundle.graph_hash)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            return False
        try:
            try:
                with open(fd, "wb") as file:
                    for part in payload(bundle):
                        file.write(part)
            except OSError:
                return False
            request = pb.AttachGraphRequest(header=graph_header(bundle))
            try:
                self._unary(self._stub.AttachGraph, request, timeout, "AttachGraph")
            except grpc.RpcError as exc:
                if exc.code() in STREAM_INSTEAD:
                    return False
                raise
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

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
        return self._unary(self._stub.Release, pb.ReleaseRequest(model_handle=handle), SHORT_CALL_S, "Release").released
