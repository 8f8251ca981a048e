"""How a graph gets in: each upload admitted from its header alone (its tensors plus one N x C prediction must fit
under ``max_upload_bytes`` and under the memory available, cgroup-aware, net of the uploads in flight), at most
``max_uploads`` streaming at once (one more waits up to ``upload_wait_seconds`` for a slot, as orchestrators sharing a
service do, then is refused with RESOURCE_EXHAUSTED).

An upload stream that sends no chunk for ``upload_idle_seconds`` is cancelled (DEADLINE_EXCEEDED, logged), its
slot and buffers freed: a client that sends a header and stalls holds neither until its deadline.

On the same host a graph can come instead as a sealed memfd handed over on the service's socket
(``handover_desk``), admitted like an upload.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from contract import settings
from contract.handover import SUPPORTED as HANDOVER_SUPPORTED
from contract.handover import HandoverDesk
from contract.v1 import method_service_pb2 as pb
from contract.wire import BundleTooLarge, held_bytes
from methods.sdk.memory import available_ram_bytes

log = logging.getLogger("nodeground.service")

# The limits a flag or variable sets (contract.settings says what each is and what it accepts).
DEFAULT_MAX_UPLOAD_BYTES = int(settings.MAX_UPLOAD_BYTES.default or 0)  # one graph's tensors plus its N x C prediction
DEFAULT_UPLOAD_WAIT_SECONDS = float(settings.UPLOAD_WAIT_SECONDS.default or 0)  # how long an upload waits for a slot
DEFAULT_UPLOAD_IDLE_SECONDS = float(settings.UPLOAD_IDLE_SECONDS.default or 0)  # longest silence within a stream
DEFAULT_MAX_UPLOADS = 2  # concurrent upload streams


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


def prepend(first: pb.GraphChunk, rest: Iterator[pb.GraphChunk]) -> Iterator[pb.GraphChunk]:
    """The stream whole again: its first chunk (read for the header) in front of the rest."""
    yield first
    yield from rest


def handover_desk(shared_graph_dir: str) -> HandoverDesk | None:
    """Where the service listens for graphs handed over on its host (``contract.handover``): none without a
    directory, nor in one the socket cannot be bound in (with a warning)."""
    if shared_graph_dir and HANDOVER_SUPPORTED:
        try:
            return HandoverDesk(shared_graph_dir)
        except OSError as exc:
            log.warning("graphs are streamed only: no handover socket in %s (%s)", shared_graph_dir, exc)
    return None
