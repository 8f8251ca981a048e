"""The gRPC method service: hosts one family of methods behind the common proto.

Compute calls (upload decoding, fit, predict) run one at a time under a lock,
so that the time and memory each reports belong to that call alone; Describe,
HasGraph, Release and health run on their own small thread pool, so they answer
even while every compute thread is taken by long fits; upload streams run on a pool
of their own, so idle or stalled uploads never take a Fit's or a Predict's thread; and Predict
runs on a pool of its own whose replies a client that stops reading cannot hold
(``methods.sdk.replies``).

The servicer translates between gRPC and the methods; what it holds and admits is bounded by
``methods.sdk.caches`` (graphs, fitted models, split views) and ``methods.sdk.uploads`` (the upload gate, idle
streams); ``methods.sdk.readiness`` says whether weights verify (NOT_SERVING, ``not_ready``,
FAILED_PRECONDITION while not), ``methods.sdk.checks`` refuses a malformed request and ``methods.sdk.device``
reports the device and frees its memory.

Errors (the proto's status codes): a graph not held is NOT_FOUND, like a model handle
not held; a method that declines its input on purpose raises ``InputRefused`` and the
client gets INVALID_ARGUMENT; any other exception in a method's code is the method
failing, INTERNAL, whatever its type (a ``ValueError`` deep in a model is no verdict
on the request).

One upload per graph: a fit that carries its split's labels (``FitRequest.train_labels`` and
``val_labels``; Describe says ``fit_labels``) runs on a view of the held graph that shares its
features and edges and shows those labels only, so every split and regime of a graph uses the
one bundle uploaded with every label hidden. Describe's ``graphs_received`` counts the uploads
held since the service started.

Same host: a service given a directory (``shared_graph_dir``, from the process that started it) listens there
for graphs handed over as sealed memfds (``contract.handover``), says so in Describe and takes such a graph by
its token (AttachGraph), mapped instead of streamed; admission, the checks and the count are the upload's
(``_receive``). Without one, AttachGraph is UNIMPLEMENTED and the client streams.

Stopping (``stop``, on SIGTERM: ``methods.serve``): fits in flight are cancelled as the client's watchdog
cancels them (each ends at its next check, UNAVAILABLE) and new fits are refused.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from typing import Any

import grpc
import numpy as np
import torch
from grpc_health.v1 import health_pb2_grpc

from contract import settings
from contract.descriptions import KINDS, method_info
from contract.handover import HANDOVER_TTL_S, attach
from contract.security import Security
from contract.space import ConfigError, config_from_proto, value_to_proto
from contract.v1 import method_service_pb2 as pb
from contract.v1 import method_service_pb2_grpc as pb_grpc
from contract.weights import WeightsError
from contract.wire import CHANNEL_OPTIONS, BundleError, BundleTooLarge, GraphBundle, decode, encode_probabilities
from methods.sdk.caches import (
    DEFAULT_GRAPH_CACHE_BYTES,
    DEFAULT_MAX_GRAPHS,
    DEFAULT_MAX_MODELS,
    FittedModel,
    GraphCache,
    ModelCache,
    SplitViews,
)
from methods.sdk.checks import check_capabilities, check_time_limit, fit_nodes, hosted_method, split_labels
from methods.sdk.device import device_fields, free_gpu, library_versions
from methods.sdk.lifeline import watch_parent
from methods.sdk.memory import ResourceError
from methods.sdk.method import FitContext, FitInterrupted, InputRefused, Method, pick_device
from methods.sdk.probe import ResourceProbe
from methods.sdk.readiness import Readiness, ReadinessHealth
from methods.sdk.replies import ReplyDesk
from methods.sdk.uploads import (
    DEFAULT_MAX_UPLOAD_BYTES,
    DEFAULT_MAX_UPLOADS,
    DEFAULT_UPLOAD_IDLE_SECONDS,
    DEFAULT_UPLOAD_WAIT_SECONDS,
    IdleBoundedChunks,
    UploadGate,
    UploadIdle,
    handover_desk,
    prepend,
)

log = logging.getLogger("nodeground.service")

CONTROL_THREADS = 4  # health, Describe, HasGraph, Release: never queued behind compute


def describe_method(method: type[Method], family: str) -> pb.MethodInfo:
    """What Describe says of ``method``, encoded by the contract's one mapping (``contract.descriptions``)."""
    if method.kind not in KINDS:
        raise ValueError(f"{method.name}: kind {method.kind!r} is none of {', '.join(KINDS)}")
    caps = method.capabilities
    return method_info(
        method.name,
        method.version,
        family,
        method.kind,
        method.default_config,
        tuple(method.search_space),
        pb.Capabilities(
            max_classes=caps.max_classes,
            max_features=caps.max_features,
            max_nodes=caps.max_nodes,
            needs_gpu=caps.needs_gpu,
            uses_gpu=caps.uses_gpu,
            supports_binary=caps.supports_binary,
            supports_multiclass=caps.supports_multiclass,
        ),
        library_versions(),
        method.description,
    )


class MethodServicer(pb_grpc.MethodServiceServicer):
    """Implements nodeground.v1.MethodService for a set of ``Method`` classes."""

    def __init__(
        self,
        family: str,
        methods: Sequence[type[Method]],
        graph_cache_bytes: int = DEFAULT_GRAPH_CACHE_BYTES,
        max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
        max_uploads: int = DEFAULT_MAX_UPLOADS,
        upload_wait_seconds: float = DEFAULT_UPLOAD_WAIT_SECONDS,
        max_graphs: int = DEFAULT_MAX_GRAPHS,
        max_models: int = DEFAULT_MAX_MODELS,
        shared_graph_dir: str = "",
        upload_idle_seconds: float = DEFAULT_UPLOAD_IDLE_SECONDS,
    ) -> None:
        """``shared_graph_dir``: where this service listens for graphs handed over on this host ("" offers none; so
        does a directory the socket cannot be bound in, with a warning)."""
        self.family = family
        self.methods = {m.name: m for m in methods}
        self.graphs = GraphCache(graph_cache_bytes, max_graphs)
        self.models = ModelCache(max_models)
        self.uploads = UploadGate(max_upload_bytes, max_uploads, upload_wait_seconds)
        self._compute = threading.Lock()
        self.readiness = Readiness(self.methods)
        self.views = SplitViews()
        self.upload_idle_seconds = upload_idle_seconds
        self.replies = ReplyDesk(upload_idle_seconds)  # Predict's own threads; a reply no one reads gives its up
        self._stopping = threading.Event()
        self._handover = handover_desk(shared_graph_dir)
        self.shared_graph_dir = shared_graph_dir if self._handover is not None else ""

    def stop(self) -> None:
        """Stop on time: cancel the fits in flight (each ends at its next check), refuse new ones, close the
        handover socket. The server's own stop then gives the calls in flight their grace."""
        self._stopping.set()
        if self._handover is not None:
            self._handover.close()

    # ---- calls -------------------------------------------------------------

    def Describe(self, request: pb.DescribeRequest, context: grpc.ServicerContext) -> pb.DescribeResponse:
        device = pick_device(any(m.capabilities.uses_gpu for m in self.methods.values()))
        return pb.DescribeResponse(
            methods=[describe_method(m, self.family) for m in self.methods.values()],
            family=self.family,
            **device_fields(device),
            not_ready=self.readiness.refresh(),
            fit_labels=True,
            graphs_received=self.graphs.received,
            shared_graph_dir=self.shared_graph_dir,
        )

    def HasGraph(self, request: pb.HasGraphRequest, context: grpc.ServicerContext) -> pb.HasGraphResponse:
        return pb.HasGraphResponse(held=request.graph_hash in self.graphs)

    def UploadGraph(
        self, request_iterator: Iterator[pb.GraphChunk], context: grpc.ServicerContext
    ) -> pb.UploadGraphResponse:
        start = time.perf_counter()
        chunks = IdleBoundedChunks(request_iterator, self.upload_idle_seconds)
        try:
            first = next(chunks, None)
            if first is None or not first.HasField("header"):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the first chunk must carry the graph header")
            if first.header.graph_hash in self.graphs:
                for _ in chunks:  # drain: the client may already be streaming
                    pass
                return pb.UploadGraphResponse(graph_hash=first.header.graph_hash, already_held=True)
            return self._receive(lambda admit: decode(prepend(first, chunks), admit), start, context)
        except UploadIdle as exc:
            log.warning("upload stream from %s cancelled: %s", context.peer(), exc)
            context.abort(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"upload cancelled by the service: {exc} (its idle limit, {settings.UPLOAD_IDLE_SECONDS.env})",
            )
        finally:
            chunks.close()

    def AttachGraph(self, request: pb.AttachGraphRequest, context: grpc.ServicerContext) -> pb.UploadGraphResponse:
        start = time.perf_counter()
        if self._handover is None:
            context.abort(
                grpc.StatusCode.UNIMPLEMENTED,
                "this service takes no graph handed over on its host (no shared_graph_dir): stream it",
            )
        fd = self._handover.take(request.handover)
        if fd is None:
            context.abort(
                grpc.StatusCode.NOT_FOUND,
                "no graph was handed over under this token (never passed, already taken, or unclaimed for "
                f"{HANDOVER_TTL_S:g} s): stream it",
            )
        try:
            if request.header.graph_hash in self.graphs:
                return pb.UploadGraphResponse(graph_hash=request.header.graph_hash, already_held=True)
            return self._receive(lambda admit: attach(fd, request.header, admit), start, context)
        finally:
            os.close(fd)  # a held graph keeps its mapping of the memfd

    def _receive(
        self,
        read: Callable[[Callable[[pb.GraphHeader], None]], GraphBundle],
        start: float,
        context: grpc.ServicerContext,
    ) -> pb.UploadGraphResponse:
        """Admit, read and check one graph, however it comes, and hold it: streamed and attached graphs alike."""
        try:
            with self.uploads.slot() as admit:
                bundle = read(admit)
        except BundleTooLarge as exc:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"graph upload refused: {exc}")
        except BundleError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad graph upload: {exc}")
        self.graphs.put(bundle)
        return pb.UploadGraphResponse(graph_hash=bundle.graph_hash, service_seconds=time.perf_counter() - start)

    def Fit(self, request: pb.FitRequest, context: grpc.ServicerContext) -> pb.FitResponse:
        method_cls = hosted_method(self.methods, self.family, request.method, context)
        graph = self.graphs.get(request.graph_hash)
        if graph is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"graph {request.graph_hash} is not held; upload it first")
        check_time_limit(request.time_limit_seconds, context)
        if request.train_labels or request.val_labels:
            graph = self.views.view(graph, split_labels(graph, request, context))
        train, val = fit_nodes(request, graph, context)
        try:
            config = method_cls.resolve_config(config_from_proto(request.config))
        except ConfigError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{request.method}: {exc}")
        check_capabilities(method_cls, graph, context)
        not_ready = self.readiness.of(method_cls.name)
        if not_ready:
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"{request.method} is not ready: {'; '.join(r.reason for r in not_ready)}",
            )

        deadline = time.monotonic() + request.time_limit_seconds if request.time_limit_seconds > 0 else None
        remaining = context.time_remaining()
        if remaining is not None:  # the gRPC deadline, if earlier, bounds the fit too
            grpc_deadline = time.monotonic() + remaining
            deadline = grpc_deadline if deadline is None else min(deadline, grpc_deadline)
        ctx = FitContext(
            seed=int(request.seed),
            device=pick_device(method_cls.capabilities.uses_gpu),
            deadline=deadline,
            is_cancelled=lambda: self._stopping.is_set() or not context.is_active(),
        )
        method = method_cls()
        with self._compute:
            self._refuse_if_stopping(context)  # a fit that waited for the lock behind one the stop cancelled
            try:
                with ResourceProbe() as probe:
                    state = method.fit(graph, train, val, config, ctx)
            except FitInterrupted as exc:
                self._refuse_if_stopping(context)
                code = grpc.StatusCode.DEADLINE_EXCEEDED if exc.timed_out else grpc.StatusCode.CANCELLED
                context.abort(code, f"{request.method}: {exc}")
            except (ResourceError, torch.cuda.OutOfMemoryError, MemoryError) as exc:
                free_gpu()
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{request.method}: out of memory: {exc}")
            except WeightsError as exc:  # removed or altered since the last readiness check
                self.readiness.check()
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{request.method} is not ready: {exc}")
            except (ConfigError, InputRefused) as exc:  # declared refusals of the request, not failures
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{request.method}: {exc}")
            except Exception as exc:  # a method bug must come back as a failed trial, not a dead service
                log.exception("fit failed")
                context.abort(grpc.StatusCode.INTERNAL, f"{request.method} failed: {type(exc).__name__}: {exc}")
        handle = uuid.uuid4().hex
        self.models.put(handle, FittedModel(method, state, graph))
        return pb.FitResponse(
            model_handle=handle,
            stats=pb.CallStats(
                seconds=probe.seconds,
                cpu_seconds=probe.cpu_seconds,
                peak_rss_bytes=probe.peak_rss_bytes,
                peak_gpu_bytes=probe.peak_gpu_bytes,
            ),
            info={k: value_to_proto(_plain(v)) for k, v in ctx.info.items()},
        )

    def _refuse_if_stopping(self, context: grpc.ServicerContext) -> None:
        if self._stopping.is_set():
            context.abort(
                grpc.StatusCode.UNAVAILABLE, "the service is stopping (SIGTERM, or its launcher is gone): fit cancelled"
            )

    def Predict(self, request: pb.PredictRequest, context: grpc.ServicerContext) -> Iterator[pb.PredictChunk]:
        model = self.models.get(request.model_handle)
        if model is None:
            context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no model with handle {request.model_handle!r} (released, dropped past the held-model cap, or never "
                "fitted)",
            )
        with self._compute:
            try:
                # The service's time is all it does for the call: the method's predict, the check
                # and the encoding of the reply (a method whose fit precomputed everything still
                # spends this), up to the first byte sent.
                with ResourceProbe() as probe:
                    probs = model.method.predict(model.state, model.graph)
                    shape = getattr(probs, "shape", None)
                    if shape is None or len(shape) != 2 or shape[0] != model.graph.num_nodes or shape[1] < 1:
                        raise ValueError(
                            f"the method returned probabilities of shape {shape}; expected ({model.graph.num_nodes}, "
                            "classes)"
                        )
                    chunks = list(encode_probabilities(probs, pb.CallStats()))
            except (ResourceError, torch.cuda.OutOfMemoryError, MemoryError) as exc:
                free_gpu()
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"predict: out of memory: {exc}")
            except Exception as exc:
                log.exception("predict failed")
                context.abort(grpc.StatusCode.INTERNAL, f"predict failed: {type(exc).__name__}: {exc}")
        chunks[-1].stats.CopyFrom(
            pb.CallStats(
                seconds=probe.seconds,
                cpu_seconds=probe.cpu_seconds,
                peak_rss_bytes=probe.peak_rss_bytes,
                peak_gpu_bytes=probe.peak_gpu_bytes,
            )
        )
        yield from self.replies.send(chunks, context)

    def Release(self, request: pb.ReleaseRequest, context: grpc.ServicerContext) -> pb.ReleaseResponse:
        released = self.models.pop(request.model_handle) is not None
        if released:
            free_gpu()
        return pb.ReleaseResponse(released=released)


def _plain(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    return value


def _run_on(pool: futures.ThreadPoolExecutor, servicer: Any, *names: str) -> None:
    """Serve these calls of ``servicer`` (request unary, reply unary or streamed) from ``pool`` instead of the
    server's shared one.

    grpc's server takes a per-method pool from the handler's ``experimental_thread_pool``.
    """
    for name in names:
        bound = getattr(servicer, name)

        def call(request: Any, context: grpc.ServicerContext, _bound: Callable[..., Any] = bound) -> Any:
            return _bound(request, context)

        call.experimental_thread_pool = pool  # type: ignore[attr-defined]
        setattr(servicer, name, call)


def build_server(
    servicer: MethodServicer, address: str, max_workers: int = 8, security: Security | None = None
) -> tuple[grpc.Server, int]:
    """A server with the method service and standard health; returns it and the bound port.

    ``security`` (default: plaintext, no token) sets TLS and the token check (contract.security).
    """
    security = security or Security()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers),
        options=[*CHANNEL_OPTIONS, ("grpc.so_reuseport", 0)],  # a port in use is refused, never shared
        interceptors=security.interceptors(),
    )
    control = futures.ThreadPoolExecutor(max_workers=CONTROL_THREADS, thread_name_prefix="control")
    # Upload streams have threads of their own: the streaming ones and as many waiting for a slot; any
    # further stream queues on this pool holding no thread, so idle streams never starve a Fit or Predict.
    # An attached graph (a file on this host) is admitted and checked like an upload, on the same pool.
    uploads = futures.ThreadPoolExecutor(max_workers=2 * servicer.uploads.max_uploads, thread_name_prefix="upload")
    health_servicer = ReadinessHealth(servicer.readiness)
    _run_on(control, servicer, "Describe", "HasGraph", "Release")
    _run_on(uploads, servicer, "UploadGraph", "AttachGraph")
    _run_on(servicer.replies.pool, servicer, "Predict")  # a client that never reads holds no Fit's thread
    _run_on(control, health_servicer, "Check", "List")
    pb_grpc.add_MethodServiceServicer_to_server(servicer, server)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    try:
        port = security.bind(server, address)
    except RuntimeError:  # grpc raises where it once returned 0
        port = 0
    if port == 0:
        raise OSError(f"could not bind {address}: the port is in use, or the address is not this host's")
    servicer.readiness.publish(health_servicer)
    watch_parent()  # a service launched as a child (NODEGROUND_PARENT_PID set) exits with its launcher
    return server, port
