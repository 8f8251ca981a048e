"""The gRPC method service: hosts one family of methods behind the common proto.

Compute calls (upload decoding, fit, predict) run one at a time under a lock,
so that the time and memory each reports belong to that call alone; Describe,
HasGraph, Release and health run on their own small thread pool, so they answer
even while every compute thread is taken by long fits; upload streams run on a pool
of their own, so idle or stalled uploads never take a Fit's or a Predict's thread.

What a client can make the service hold is bounded: an upload is admitted from
its header alone (its tensors plus one N x C prediction must fit under
``max_upload_bytes`` and under the memory available, cgroup-aware, net of the
uploads in flight), at most ``max_uploads`` stream at once (one more waits up to
``upload_wait_seconds`` for a slot, as orchestrators sharing a service do, then is
refused with RESOURCE_EXHAUSTED), graphs live in an LRU cache bounded in bytes and in count,
and fitted models in one bounded in count: a client that never calls Release
loses its least recently used models (Predict on one answers NOT_FOUND), the
service keeps its memory.

Readiness: a method that reads pretrained weights (``Method.weights``) cannot fit
until they verify. While any does not, gRPC health says NOT_SERVING, Describe lists
why (``not_ready``) and such a fit is refused with FAILED_PRECONDITION. The check is
repeated when health or Describe is asked and the last one is a few seconds old, so
weights fetched after the service started make it healthy without a restart.

Errors (the proto's status codes): a graph not held is NOT_FOUND, like a model handle
not held; a method that declines its input on purpose raises ``InputRefused`` and the
client gets INVALID_ARGUMENT; any other exception in a method's code is the method
failing, INTERNAL, whatever its type (a ``ValueError`` deep in a model is no verdict
on the request).

One upload per graph: a fit that carries its split's labels (``FitRequest.train_labels`` and
``val_labels``; Describe says ``fit_labels``) runs on a view of the held graph that shares its
features and edges and shows those labels only, so every split and regime of a graph uses the
one bundle uploaded with every label hidden. A view keeps its own derived tensors (``cache``:
some depend on labels); a graph keeps its last ``MAX_VIEWS_PER_GRAPH`` views and drops them
with itself. Describe's ``graphs_received`` counts the uploads held since the service started.

An upload stream that sends no chunk for ``upload_idle_seconds`` is cancelled (DEADLINE_EXCEEDED, logged), its
slot and buffers freed: a client that sends a header and stalls holds neither until its deadline.

Same host: a service given a directory (``shared_graph_dir``, from the process that started it) listens there
for graphs handed over as sealed memfds (``contract.handover``), says so in Describe and takes such a graph by
its token (AttachGraph), mapped instead of streamed; admission, the checks and the count are the upload's
(``_receive``). Without one, AttachGraph is UNIMPLEMENTED and the client streams.

Stopping (``stop``, on SIGTERM: ``methods.serve``): fits in flight are cancelled as the client's watchdog
cancels them (each ends at its next check, UNAVAILABLE) and new fits are refused.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import math
import os
import queue
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from importlib import metadata
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import torch
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from contract import settings
from contract.handover import HANDOVER_TTL_S, HandoverDesk, attach
from contract.handover import SUPPORTED as HANDOVER_SUPPORTED
from contract.handshake import HEALTH_SERVICES
from contract.hardware import cpu_model
from contract.security import Security
from contract.space import ConfigError, config_from_proto, config_to_proto, param_to_proto, value_to_proto
from contract.v1 import method_service_pb2 as pb
from contract.v1 import method_service_pb2_grpc as pb_grpc
from contract.weights import WeightsError
from contract.wire import (
    CHANNEL_OPTIONS,
    BundleError,
    BundleTooLarge,
    GraphBundle,
    decode,
    encode_probabilities,
    held_bytes,
)
from methods.sdk.lifeline import watch_parent
from methods.sdk.memory import ResourceError, available_ram_bytes
from methods.sdk.method import FitContext, FitInterrupted, InputRefused, Method, pick_device
from methods.sdk.probe import ResourceProbe

log = logging.getLogger("nodeground.service")


class _Model:
    def __init__(self, method: Method, state: Any, graph: GraphBundle) -> None:
        self.method, self.state, self.graph = method, state, graph


# The limits a flag or variable sets (contract.settings says what each is and what it accepts).
DEFAULT_GRAPH_CACHE_BYTES = int(settings.GRAPH_CACHE_BYTES.default or 0)
DEFAULT_MAX_UPLOAD_BYTES = int(settings.MAX_UPLOAD_BYTES.default or 0)  # one graph's tensors plus its N x C prediction
DEFAULT_UPLOAD_WAIT_SECONDS = float(settings.UPLOAD_WAIT_SECONDS.default or 0)  # how long an upload waits for a slot
DEFAULT_UPLOAD_IDLE_SECONDS = float(settings.UPLOAD_IDLE_SECONDS.default or 0)  # longest silence within a stream
DEFAULT_MAX_MODELS = int(settings.MAX_MODELS.default or 0)  # fitted models held (the orchestrator holds one per trial)
DEFAULT_MAX_UPLOADS = 2  # concurrent upload streams
DEFAULT_MAX_GRAPHS = 16
MAX_VIEWS_PER_GRAPH = 4  # split views a held graph keeps (each with its derived tensors); a sweep uses one at a time
VIEWS_KEY = "nodeground-split-views"  # the held graph's cache entry that keeps them (no method's key is a str)
CONTROL_THREADS = 4  # health, Describe, HasGraph, Release: never queued behind compute
READINESS_POLL_S = 2.0  # how often a ready service that reads weights re-verifies them
_KINDS = {"supervised": pb.METHOD_KIND_SUPERVISED, "gfm": pb.METHOD_KIND_GFM}
_REPORTED_LIBRARIES = ("torch", "torch_geometric", "numpy", "scipy", "grpcio", "protobuf")


class GraphCache:
    """Graphs by content hash, least recently used evicted first once over the byte or count budget."""

    def __init__(self, max_bytes: int, max_graphs: int = DEFAULT_MAX_GRAPHS) -> None:
        self._max = max_bytes
        self._max_graphs = max_graphs
        self._graphs: OrderedDict[str, GraphBundle] = OrderedDict()
        self._lock = threading.Lock()
        self.received = 0  # graphs put that were not held already, since start (uploads run on several threads)

    def get(self, graph_hash: str) -> GraphBundle | None:
        with self._lock:
            graph = self._graphs.get(graph_hash)
            if graph is not None:
                self._graphs.move_to_end(graph_hash)
            return graph

    def put(self, graph: GraphBundle) -> None:
        with self._lock:
            self.received += graph.graph_hash not in self._graphs
            self._graphs[graph.graph_hash] = graph
            self._graphs.move_to_end(graph.graph_hash)
            total = sum(g.nbytes for g in self._graphs.values())
            while (total > self._max or len(self._graphs) > self._max_graphs) and len(self._graphs) > 1:
                _, evicted = self._graphs.popitem(last=False)
                total -= evicted.nbytes

    def __contains__(self, graph_hash: str) -> bool:
        with self._lock:
            return graph_hash in self._graphs

    def __len__(self) -> int:
        with self._lock:
            return len(self._graphs)


class ModelCache:
    """Fitted models by handle; past ``max_models`` the least recently used is dropped.

    So a client that never Releases cannot fill the memory.
    """

    def __init__(self, max_models: int) -> None:
        self._max = max(1, max_models)
        self._models: OrderedDict[str, _Model] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, handle: str, model: _Model) -> None:
        with self._lock:
            self._models[handle] = model
            while len(self._models) > self._max:
                evicted, _ = self._models.popitem(last=False)
                log.warning("dropped model %s: more than %d held without Release", evicted, self._max)

    def get(self, handle: str) -> _Model | None:
        with self._lock:
            model = self._models.get(handle)
            if model is not None:
                self._models.move_to_end(handle)
            return model

    def pop(self, handle: str) -> _Model | None:
        with self._lock:
            return self._models.pop(handle, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._models)


class UploadGate:
    """Admits upload streams: at most ``max_uploads`` at once, each only if its declared size fits now."""

    def __init__(self, max_bytes: int, max_uploads: int, wait_seconds: float = DEFAULT_UPLOAD_WAIT_SECONDS) -> None:
        self.max_bytes = max_bytes
        self._slots = threading.BoundedSemaphore(max(1, max_uploads))
        self.max_uploads = max(1, max_uploads)
        self._wait = wait_seconds
        self._reserved = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def slot(self) -> Iterator[Callable[[pb.GraphHeader], None]]:
        """A stream slot (BundleTooLarge when none frees up in time); yields the ``admit`` check for its header.

        Waiting holds an upload thread (``build_server``), never a compute or control one.
        """
        if not self._slots.acquire(timeout=self._wait):
            raise BundleTooLarge(
                f"{self.max_uploads} uploads were streaming for {self._wait:g} s; retry when one has finished"
            )
        reserved = 0

        def admit(header: pb.GraphHeader) -> None:
            nonlocal reserved
            need = held_bytes(header)
            with self._lock:
                room = min(self.max_bytes, available_ram_bytes() - self._reserved)
                if need > room:
                    raise BundleTooLarge(
                        f"the graph needs {need / 2**20:.1f} MiB (tensors plus an N x C prediction); this service can "
                        f"take {max(0, room) / 2**20:.1f} MiB now (limit {self.max_bytes / 2**20:.0f} MiB, less memory "
                        "available and uploads in flight)"
                    )
                self._reserved += need
                reserved = need

        try:
            yield admit
        finally:
            with self._lock:
                self._reserved -= reserved
            self._slots.release()


class UploadIdle(Exception):
    """An upload stream sent no chunk for the service's idle limit."""


_END = object()  # what the reader of an upload queues after its last chunk


class IdleBoundedChunks:
    """An upload's chunks, read on a thread of their own so that the wait for each is bounded: none for ``idle_s``
    seconds raises UploadIdle. gRPC's request iterator has no timeout, and a stream stalled in it would keep its
    upload slot and buffers until its deadline. ``close`` once done: the reader then drops what it still reads
    and ends with the call."""

    def __init__(self, chunks: Iterator[pb.GraphChunk], idle_s: float) -> None:
        self._idle = idle_s
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=2)  # the reader runs at most two chunks ahead
        self._closed = threading.Event()
        threading.Thread(target=self._read, args=(chunks,), name="upload-reader", daemon=True).start()

    def _read(self, chunks: Iterator[pb.GraphChunk]) -> None:
        try:
            for chunk in chunks:
                if not self._put(chunk):
                    return
        except Exception as exc:  # grpc.RpcError: the call ended (cancelled by the client, or answered)
            self._put(exc)
            return
        self._put(_END)

    def _put(self, item: Any) -> bool:
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def __iter__(self) -> IdleBoundedChunks:
        return self

    def __next__(self) -> pb.GraphChunk:
        try:
            item = self._queue.get(timeout=self._idle)
        except queue.Empty:
            raise UploadIdle(f"no chunk for {self._idle:g} s") from None
        if item is _END:
            raise StopIteration
        if isinstance(item, Exception):
            raise item
        return item

    def close(self) -> None:
        self._closed.set()


def library_versions() -> dict[str, str]:
    versions = {}
    for name in _REPORTED_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def nvidia_driver_version(
    proc_version: Path = Path("/proc/driver/nvidia/version"), nvml: str = "libnvidia-ml.so.1"
) -> str:
    """The NVIDIA driver's version, from NVML (mapped into GPU containers), else the kernel module; "" if neither."""
    try:
        library = ctypes.CDLL(nvml)
        if library.nvmlInit_v2() == 0:
            buffer = ctypes.create_string_buffer(96)
            ok = library.nvmlSystemGetDriverVersion(buffer, len(buffer)) == 0
            library.nvmlShutdown()
            if ok and buffer.value:
                return buffer.value.decode()
    except (OSError, AttributeError):
        pass
    try:
        match = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", proc_version.read_text())
        return match.group(1) if match else ""
    except OSError:
        return ""


@functools.lru_cache(maxsize=8)  # the driver is asked once per device, not on every Describe
def device_fields(device: torch.device) -> dict[str, Any]:
    """DescribeResponse's device fields: what the records name as the hardware and CUDA stack of a trial.

    The CPU model and the threads torch computes with are what a CPU trial's cost depends on (the estimate
    prices per hardware); a GPU's name and memory, a GPU trial's.
    """
    fields: dict[str, Any] = {
        "device": str(device),
        "cuda_version": torch.version.cuda or "",
        "cpu_model": cpu_model(),
        "compute_threads": torch.get_num_threads(),
    }
    if device.type == "cuda":
        fields["device_name"] = torch.cuda.get_device_name(device)
        fields["driver_version"] = nvidia_driver_version()
        fields["device_memory_bytes"] = int(torch.cuda.get_device_properties(device).total_memory)
    return fields


def describe_method(method: type[Method], family: str) -> pb.MethodInfo:
    caps = method.capabilities
    return pb.MethodInfo(
        name=method.name,
        version=method.version,
        family=family,
        kind=_KINDS[method.kind],
        capabilities=pb.Capabilities(
            max_classes=caps.max_classes,
            max_features=caps.max_features,
            max_nodes=caps.max_nodes,
            needs_gpu=caps.needs_gpu,
            uses_gpu=caps.uses_gpu,
            supports_binary=caps.supports_binary,
            supports_multiclass=caps.supports_multiclass,
        ),
        default_config=config_to_proto(method.default_config),
        search_space=[param_to_proto(p) for p in method.search_space],
        library_versions=library_versions(),
        description=method.description,
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
        self._not_ready: list[pb.NotReady] = []
        self._health: health.HealthServicer | None = None
        self._readiness_lock = threading.Lock()
        self._checked_at = float("-inf")
        self._views_lock = threading.Lock()
        self.upload_idle_seconds = upload_idle_seconds
        self._stopping = threading.Event()
        self._handover: HandoverDesk | None = None
        if shared_graph_dir and HANDOVER_SUPPORTED:
            try:
                self._handover = HandoverDesk(shared_graph_dir)
            except OSError as exc:
                log.warning("graphs are streamed only: no handover socket in %s (%s)", shared_graph_dir, exc)
        self.shared_graph_dir = shared_graph_dir if self._handover is not None else ""

    def stop(self) -> None:
        """Stop on time: cancel the fits in flight (each ends at its next check), refuse new ones, close the
        handover socket. The server's own stop then gives the calls in flight their grace."""
        self._stopping.set()
        if self._handover is not None:
            self._handover.close()

    # ---- readiness ---------------------------------------------------------

    def refresh_readiness(self) -> list[pb.NotReady]:
        """The readiness: re-verified on every ask while not ready, at most every READINESS_POLL_S once ready.

        Weights fetched a moment before a client asks must count at once (a client told "not ready" stops
        its sweep); a missing file costs a stat, and a new one is hashed once (``contract.weights``). A
        ready service re-checks on a poll, which catches weights removed or altered under it.
        """
        with self._readiness_lock:
            if self._not_ready or time.monotonic() - self._checked_at >= READINESS_POLL_S:
                self.check_readiness()
            return self._not_ready

    def check_readiness(self) -> list[pb.NotReady]:
        """Re-verify every method's weights; publish the result to health (NOT_SERVING while any is unusable)."""
        self._checked_at = time.monotonic()
        not_ready = [
            pb.NotReady(method=name, weights_id=weights_id, reason=reason)
            for name, method in self.methods.items()
            for weights_id, reason in method.weights_problems().items()
        ]
        if [r.reason for r in not_ready] != [r.reason for r in self._not_ready]:
            for item in not_ready:
                log.warning("not ready: %s", item.reason)
        self._not_ready = not_ready
        if self._health is not None:
            status = health_pb2.HealthCheckResponse.NOT_SERVING if not_ready else health_pb2.HealthCheckResponse.SERVING
            for service in HEALTH_SERVICES:
                self._health.set(service, status)
        return not_ready

    def publish_health(self, health_servicer: health.HealthServicer) -> None:
        """Report readiness through ``health_servicer`` from now on (checked at once)."""
        self._health = health_servicer
        with self._readiness_lock:
            self.check_readiness()

    def _not_ready_for(self, method: str) -> list[pb.NotReady]:
        return [r for r in self.refresh_readiness() if r.method == method]

    # ---- calls -------------------------------------------------------------

    def Describe(self, request: pb.DescribeRequest, context: grpc.ServicerContext) -> pb.DescribeResponse:
        device = pick_device(any(m.capabilities.uses_gpu for m in self.methods.values()))
        return pb.DescribeResponse(
            methods=[describe_method(m, self.family) for m in self.methods.values()],
            family=self.family,
            **device_fields(device),
            not_ready=self.refresh_readiness(),
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
            return self._receive(lambda admit: decode(_prepend(first, chunks), admit), start, context)
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
        method_cls = self._method(request.method, context)
        graph = self.graphs.get(request.graph_hash)
        if graph is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"graph {request.graph_hash} is not held; upload it first")
        limit = request.time_limit_seconds
        if not math.isfinite(limit) or limit < 0:  # 0 is the proto's "none"; NaN, inf and negatives mean nothing
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"time_limit_seconds must be a finite number of seconds > 0 (or 0 for none), got {limit!r}",
            )
        if request.train_labels or request.val_labels:
            graph = self._split_view(graph, request, context)
        train = _node_set("train_nodes", request.train_nodes, graph, context)
        val = _node_set("val_nodes", request.val_nodes, graph, context)
        if np.intersect1d(train, val).size:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "train_nodes and val_nodes overlap; validation must be held out"
            )
        try:
            config = method_cls.resolve_config(config_from_proto(request.config))
        except ConfigError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{request.method}: {exc}")
        self._check_capabilities(method_cls, graph, context)
        not_ready = self._not_ready_for(method_cls.name)
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
                _free_gpu()
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{request.method}: out of memory: {exc}")
            except WeightsError as exc:  # removed or altered since the last readiness check
                self.check_readiness()
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{request.method} is not ready: {exc}")
            except (ConfigError, InputRefused) as exc:  # declared refusals of the request, not failures
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{request.method}: {exc}")
            except Exception as exc:  # a method bug must come back as a failed trial, not a dead service
                log.exception("fit failed")
                context.abort(grpc.StatusCode.INTERNAL, f"{request.method} failed: {type(exc).__name__}: {exc}")
        handle = uuid.uuid4().hex
        self.models.put(handle, _Model(method, state, graph))
        return pb.FitResponse(
            model_handle=handle,
            stats=pb.CallStats(
                seconds=probe.seconds, peak_rss_bytes=probe.peak_rss_bytes, peak_gpu_bytes=probe.peak_gpu_bytes
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
                _free_gpu()
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"predict: out of memory: {exc}")
            except Exception as exc:
                log.exception("predict failed")
                context.abort(grpc.StatusCode.INTERNAL, f"predict failed: {type(exc).__name__}: {exc}")
        chunks[-1].stats.CopyFrom(
            pb.CallStats(
                seconds=probe.seconds, peak_rss_bytes=probe.peak_rss_bytes, peak_gpu_bytes=probe.peak_gpu_bytes
            )
        )
        yield from chunks

    def Release(self, request: pb.ReleaseRequest, context: grpc.ServicerContext) -> pb.ReleaseResponse:
        released = self.models.pop(request.model_handle) is not None
        if released:
            _free_gpu()
        return pb.ReleaseResponse(released=released)

    def _split_view(self, graph: GraphBundle, request: pb.FitRequest, context: grpc.ServicerContext) -> GraphBundle:
        """The held graph as this fit's split sees it: its features and edges, the request's labels, -1 elsewhere."""
        digest = hashlib.sha256()
        parts = []
        for what, nodes, labels in (
            ("train", request.train_nodes, request.train_labels),
            ("val", request.val_nodes, request.val_labels),
        ):
            ids = np.asarray(nodes, dtype=np.int64)
            values = np.asarray(labels, dtype=np.int64)
            if values.shape != ids.shape:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{what}_labels has {values.size} entries for {ids.size} {what}_nodes; give one label per node",
                )
            if ids.size and (ids.min() < 0 or ids.max() >= graph.num_nodes):
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, f"{what}_nodes holds node ids outside [0, {graph.num_nodes})"
                )
            if values.size and (values.min() < 0 or values.max() >= graph.num_classes):
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{what}_labels must lie in [0, {graph.num_classes}), got [{values.min()}, {values.max()}]",
                )
            parts.append((ids, values))
            digest.update(f"{what} {ids.size}\n".encode())
            digest.update(ids.tobytes())
            digest.update(values.tobytes())
        key = digest.hexdigest()
        with self._views_lock:
            views = graph.cache.setdefault(VIEWS_KEY, OrderedDict())
            view = views.get(key)
            if view is None:
                labels = np.full(graph.num_nodes, -1, dtype=np.int64)
                for ids, values in parts:
                    labels[ids] = values
                view = views[key] = GraphBundle(
                    graph.features, graph.edge_index, labels, graph.num_classes, graph_hash=graph.graph_hash
                )
                while len(views) > MAX_VIEWS_PER_GRAPH:
                    views.popitem(last=False)
            views.move_to_end(key)
            return view

    # ---- checks ------------------------------------------------------------

    def _method(self, name: str, context: grpc.ServicerContext) -> type[Method]:
        method = self.methods.get(name)
        if method is None:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"unknown method {name!r}; this {self.family} service hosts {', '.join(sorted(self.methods))}",
            )
        return method

    @staticmethod
    def _check_capabilities(method: type[Method], graph: GraphBundle, context: grpc.ServicerContext) -> None:
        caps = method.capabilities
        limits = (
            (caps.max_classes, graph.num_classes, "classes"),
            (caps.max_features, graph.features.shape[1], "features"),
            (caps.max_nodes, graph.num_nodes, "nodes"),
        )
        for limit, actual, what in limits:
            if limit and actual > limit:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"{method.name} supports at most {limit} {what}; the graph has {actual}",
                )
        binary = graph.num_classes == 2
        if (binary and not caps.supports_binary) or (not binary and not caps.supports_multiclass):
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{method.name} does not support {'binary' if binary else 'multiclass'} tasks",
            )


def _node_set(field: str, nodes: Sequence[int], graph: GraphBundle, context: grpc.ServicerContext) -> np.ndarray:
    array = np.asarray(nodes, dtype=np.int64)
    if array.size == 0:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field} is empty")
    if array.min() < 0 or array.max() >= graph.num_nodes:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field} holds node ids outside [0, {graph.num_nodes})")
    if (graph.labels[array] < 0).any():
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field} includes nodes whose label is hidden (-1)")
    if np.unique(array).size != array.size:
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"{field} repeats node ids ({array.size - np.unique(array).size} duplicates); each node counts once",
        )
    return array


def _prepend(first: pb.GraphChunk, rest: Iterator[pb.GraphChunk]) -> Iterator[pb.GraphChunk]:
    yield first
    yield from rest


def _plain(value: Any) -> Any:
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    return value


def _free_gpu() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _run_on(pool: futures.ThreadPoolExecutor, servicer: Any, *names: str) -> None:
    """Serve these unary calls of ``servicer`` from ``pool`` instead of the server's shared one.

    grpc's server takes a per-method pool from the handler's ``experimental_thread_pool``.
    """
    for name in names:
        bound = getattr(servicer, name)

        def call(request: Any, context: grpc.ServicerContext, _bound: Callable[..., Any] = bound) -> Any:
            return _bound(request, context)

        call.experimental_thread_pool = pool  # type: ignore[attr-defined]
        setattr(servicer, name, call)


class ReadinessHealth(health.HealthServicer):
    """Standard gRPC health whose answer re-verifies the service's readiness when it is stale."""

    def __init__(self, servicer: MethodServicer) -> None:
        super().__init__()
        self._servicer = servicer

    def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        self._servicer.refresh_readiness()
        return super().Check(request, context)


def build_server(
    servicer: MethodServicer, address: str, max_workers: int = 8, security: Security | None = None
) -> tuple[grpc.Server, int]:
    """A server with the method service and standard health; returns it and the bound port.

    ``security`` (default: plaintext, no token) sets TLS and the token check (contract.security).
    """
    security = security or Security()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers),
        options=CHANNEL_OPTIONS,
        interceptors=security.interceptors(),
    )
    control = futures.ThreadPoolExecutor(max_workers=CONTROL_THREADS, thread_name_prefix="control")
    # Upload streams have threads of their own: the streaming ones and as many waiting for a slot; any
    # further stream queues on this pool holding no thread, so idle streams never starve a Fit or Predict.
    # An attached graph (a file on this host) is admitted and checked like an upload, on the same pool.
    uploads = futures.ThreadPoolExecutor(max_workers=2 * servicer.uploads.max_uploads, thread_name_prefix="upload")
    health_servicer = ReadinessHealth(servicer)
    _run_on(control, servicer, "Describe", "HasGraph", "Release")
    _run_on(uploads, servicer, "UploadGraph", "AttachGraph")
    _run_on(control, health_servicer, "Check", "List")
    pb_grpc.add_MethodServiceServicer_to_server(servicer, server)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    port = security.bind(server, address)
    if port == 0:
        raise OSError(f"could not bind {address}")
    servicer.publish_health(health_servicer)
    watch_parent()  # a service launched as a child (NODEGROUND_PARENT_PID set) exits with its launcher
    return server, port
