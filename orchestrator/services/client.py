"""A typed client for one method service endpoint, timing every call end to end."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from methods.sdk.space import Config, Param, config_from_proto, config_to_proto, param_from_proto
from methods.sdk.wire import MAX_MESSAGE_BYTES, GraphBundle, decode_probabilities, encode
from nodeground.v1 import method_service_pb2 as pb
from nodeground.v1 import method_service_pb2_grpc as pb_grpc

_KIND_NAMES = {pb.METHOD_KIND_SUPERVISED: "supervised", pb.METHOD_KIND_GFM: "gfm"}


class ServiceUnavailable(RuntimeError):
    """The endpoint does not answer (not started, crashed, or unreachable)."""


@dataclass(frozen=True)
class MethodSpec:
    """A method as its service describes it; the orchestrator samples from this copy."""

    name: str
    version: str
    family: str
    kind: str
    default_config: Config
    search_space: tuple[Param, ...]
    max_classes: int = 0
    library_versions: dict[str, str] = field(default_factory=dict)


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


def spec_from_proto(info: pb.MethodInfo) -> MethodSpec:
    return MethodSpec(
        name=info.name,
        version=info.version,
        family=info.family,
        kind=_KIND_NAMES.get(info.kind, "supervised"),
        default_config=config_from_proto(info.default_config),
        search_space=tuple(param_from_proto(p) for p in info.search_space),
        max_classes=info.capabilities.max_classes,
        library_versions=dict(info.library_versions),
    )


class MethodClient:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._channel = grpc.insecure_channel(
            endpoint,
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ],
        )
        self._stub = pb_grpc.MethodServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def wait_healthy(self, timeout: float) -> None:
        """Block until health says SERVING; ServiceUnavailable after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                reply = self._health.Check(health_pb2.HealthCheckRequest(service=""), timeout=min(2.0, max(0.1, deadline - time.monotonic())))
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
                last = f"health status {reply.status}"
            except grpc.RpcError as exc:
                last = exc.details() or exc.code().name
            time.sleep(0.05)
        raise ServiceUnavailable(f"method service at {self.endpoint} did not become healthy within {timeout:.0f} s ({last})")

    def describe(self, timeout: float = 30.0) -> list[MethodSpec]:
        reply = self._stub.Describe(pb.DescribeRequest(), timeout=timeout)
        return [spec_from_proto(m) for m in reply.methods]

    def device(self, timeout: float = 30.0) -> dict[str, str]:
        """The device the service computes on and what it is (name, driver and CUDA versions), as it describes it."""
        reply = self._stub.Describe(pb.DescribeRequest(), timeout=timeout)
        fields = {"device": reply.device, "device_name": reply.device_name, "driver_version": reply.driver_version, "cuda_version": reply.cuda_version}
        return {k: v for k, v in fields.items() if v}

    def ensure_graph(self, bundle: GraphBundle, timeout: float | None = None) -> CallResult:
        """Upload the bundle unless the service already holds it; the value says whether it uploaded."""
        start = time.perf_counter()
        held = self._stub.HasGraph(pb.HasGraphRequest(graph_hash=bundle.graph_hash), timeout=30.0).held
        if not held:
            self._stub.UploadGraph(encode(bundle), timeout=timeout)
        return CallResult(not held, time.perf_counter() - start)

    def fit(self, method: str, graph_hash: str, train: np.ndarray, val: np.ndarray, config: Config, seed: int, time_limit: float | None) -> CallResult:
        request = pb.FitRequest(
            method=method,
            graph_hash=graph_hash,
            train_nodes=train.astype(np.int32).tolist(),
            val_nodes=val.astype(np.int32).tolist(),
            config=config_to_proto(config),
            seed=seed,
            time_limit_seconds=time_limit or 0.0,
        )
        # The gRPC deadline is a little longer than the service's own limit, so the
        # service normally answers DEADLINE_EXCEEDED itself and stays healthy.
        timeout = time_limit + 10.0 if time_limit else None
        start = time.perf_counter()
        reply = self._stub.Fit(request, timeout=timeout)
        return CallResult(reply, time.perf_counter() - start, reply.stats)

    def predict(self, handle: str, num_nodes: int, timeout: float | None = None) -> CallResult:
        start = time.perf_counter()
        probs, stats = decode_probabilities(self._stub.Predict(pb.PredictRequest(model_handle=handle), timeout=timeout), num_nodes)
        return CallResult(probs, time.perf_counter() - start, stats)

    def release(self, handle: str) -> bool:
        return self._stub.Release(pb.ReleaseRequest(model_handle=handle), timeout=30.0).released
