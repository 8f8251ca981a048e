"""How a prediction gets out: Predict replies on threads of their own, none held hostage by a client that stops reading.

gRPC's synchronous server sends a streamed reply from the thread that runs the call, and a send waits while the
client's flow-control window is full: a client that opens Predict streams and never reads them (any local user can
reach an embedded service on loopback) holds one thread per stream until its deadline. On the shared pool that
starved every Fit. So Predict calls run on a pool of their own (``ReplyDesk.pool``), and every reply is watched:

- a chunk the client has not taken for ``idle_seconds`` (the service's stream idle limit,
  ``NODEGROUND_UPLOAD_IDLE_SECONDS``) cancels the call, whatever else is going on;
- while another Predict waits for a reply thread, a reply whose client has not taken its chunk for ``STALL_GRACE_S``
  gives its thread up at once (the call is cancelled; a client that reads takes a 4 MiB chunk in milliseconds).

So stalled readers never hold more than the pool, and never make a reading client wait more than about the grace.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

log = logging.getLogger("nodeground.service")

T = TypeVar("T")
REPLY_THREADS = 8  # Predict calls computed or sending at once; more wait (holding no thread) for one to free up
STALL_GRACE_S = 2.0  # how long a reply may wait for its client while another Predict waits for a thread
_TICK_S = 0.25  # how often the watch looks at the replies in flight


class WaitingPool(futures.ThreadPoolExecutor):
    """A thread pool that knows how many submitted calls wait for a thread (ThreadPoolExecutor does not say)."""

    def __init__(self, max_workers: int, thread_name_prefix: str = "") -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
        self._waiting = 0
        self._count = threading.Lock()

    @property
    def waiting(self) -> int:
        return self._waiting

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> futures.Future[Any]:
        with self._count:
            self._waiting += 1

        def started() -> Any:
            with self._count:
                self._waiting -= 1
            return fn(*args, **kwargs)

        try:
            return super().submit(started)
        except BaseException:
            with self._count:
                self._waiting -= 1
            raise


@dataclass
class _Reply:
    context: grpc.ServicerContext
    since: float | None = None  # when its current chunk was handed to gRPC; None while the service computes
    cancelled: bool = False


class ReplyDesk:
    """The Predict replies of one service: their pool, and the watch that cancels those whose client stopped reading."""

    def __init__(self, idle_seconds: float, threads: int = REPLY_THREADS, grace_seconds: float = STALL_GRACE_S) -> None:
        self.pool = WaitingPool(max_workers=max(1, threads), thread_name_prefix="reply")
        self.idle_seconds = idle_seconds
        self.grace_seconds = grace_seconds
        self._replies: dict[int, _Reply] = {}
        self._lock = threading.Condition()
        self._watch: threading.Thread | None = None

    def send(self, chunks: Iterable[T], context: grpc.ServicerContext) -> Iterator[T]:
        """Yield ``chunks`` to gRPC (which sends each before it asks for the next), watched as the module says."""
        reply = _Reply(context)
        with self._lock:
            self._replies[id(reply)] = reply
            if self._watch is None:
                self._watch = threading.Thread(target=self._watch_replies, name="reply-watch", daemon=True)
                self._watch.start()
            self._lock.notify_all()
        try:
            for chunk in chunks:
                reply.since = time.monotonic()
                yield chunk
                reply.since = None
        finally:
            with self._lock:
                self._replies.pop(id(reply), None)

    def _watch_replies(self) -> None:
        while True:
            with self._lock:
                while not self._replies:
                    self._lock.wait()
                stalled = self._stalled(time.monotonic())
            for reply, waited in stalled:
                self._cancel(reply, waited)
            time.sleep(_TICK_S)

    def _stalled(self, now: float) -> list[tuple[_Reply, float]]:
        """The replies to cancel now: past the idle limit, or past the grace while a call waits for a thread."""
        pressed = self.pool.waiting > 0
        found = []
        for reply in self._replies.values():
            since = reply.since
            if since is None or reply.cancelled:
                continue
            waited = now - since
            if waited > self.idle_seconds or (pressed and waited > self.grace_seconds):
                reply.cancelled = True
                found.append((reply, waited))
        return found

    def _cancel(self, reply: _Reply, waited: float) -> None:
        why = "its idle limit" if waited > self.idle_seconds else "another Predict waited for its thread"
        log.warning(
            "Predict reply to %s cancelled: the client took no chunk for %.1f s (%s)", reply.context.peer(), waited, why
        )
        reply.context.cancel()
