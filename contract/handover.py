"""A graph handed over on one host as a sealed memfd: the content a service checks is the content its fits read.

The client writes a graph's payload into a memfd and seals it against writes, shrinking and growing
(``SEALS``) before the service sees it; it passes the descriptor over the Unix socket the service listens on in
its graph directory (``socket_path``) and names the token the service answers in AttachGraph. The service
refuses a descriptor without those seals, then maps and hashes it (``attach``): the seals belong to the file,
not to a descriptor, so no process (the client, or another of the same user that reopens it through /proc)
can change a byte or the size afterwards. A rewrite cannot change what a fit reads, and a truncation cannot
fault the service's mapping (SIGBUS). A file in the directory is never read: anyone of the same user could
rewrite it after the check.

Where the platform has no memfd or no seals (not Linux), ``SUPPORTED`` is false and graphs are streamed.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import secrets
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterable

from contract.v1 import method_service_pb2 as pb
from contract.wire import BundleError, GraphBundle, assemble, check_header

SOCKET_NAME = "handover.sock"
SUPPORTED = hasattr(os, "memfd_create") and hasattr(fcntl, "F_ADD_SEALS") and hasattr(socket, "send_fds")
SEALS = (fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW) if SUPPORTED else 0
HANDOVER_TTL_S = 60.0  # a descriptor not taken by an AttachGraph this long after it came is closed
MAX_PENDING = 8  # descriptors held for AttachGraph at once; a further one is refused (each is a graph's memory)
CONNECTION_TIMEOUT_S = 5.0  # what one handover connection may take (it is one message each way)
_TOKEN_BYTES = 16


def socket_path(directory: str) -> str:
    """Where the service whose graph directory is ``directory`` takes descriptors."""
    return os.path.join(directory, SOCKET_NAME)


def sealed(parts: Iterable[memoryview], name: str = "nodeground-graph") -> int:
    """A memfd holding ``parts`` one after the other, sealed against any change (its descriptor; the caller
    closes it). OSError when the memory cannot be had."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        with open(fd, "wb", closefd=False) as file:
            for part in parts:
                file.write(part)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS | fcntl.F_SEAL_SEAL)
    except BaseException:
        os.close(fd)
        raise
    return fd


def hand_over(directory: str, fd: int, timeout: float) -> str:
    """Pass ``fd`` to the service listening in ``directory``; the token that names it in AttachGraph.

    OSError when no one listens there or the answer is a refusal (its reason as the message).
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(socket_path(directory))
        socket.send_fds(sock, [b"graph"], [fd])
        reply = sock.recv(256).decode("ascii", "replace").strip()
    verdict, _, rest = reply.partition(" ")
    if verdict != "ok" or not rest:
        raise OSError(f"the service refused the graph's descriptor: {reply or 'no answer'}")
    return rest


def attach(fd: int, header: pb.GraphHeader, admit: Callable[[pb.GraphHeader], None] | None = None) -> GraphBundle:
    """The bundle over the sealed memfd ``fd``, mapped rather than copied, once it checks as a stream does.

    Checked in this order: the header, the seals (a descriptor that could still change is refused whatever
    it holds), the size, ``admit``, then the hash and the content of what was mapped. The mapping is private,
    so a method that writes its arrays copies the pages it writes; it holds the memfd's pages as long as the
    graph is held, after every descriptor is closed.
    """
    expected = check_header(header)
    info = os.fstat(fd)
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS) if stat.S_ISREG(info.st_mode) else 0
    except OSError:  # not a memfd (or shared memory) at all
        seals = 0
    if seals & SEALS != SEALS:
        raise BundleError("the handed-over descriptor is not a memfd sealed against writes, shrinking and growing")
    if info.st_size != expected:
        raise BundleError(f"the handed-over memfd holds {info.st_size} bytes; the header announces {expected}")
    if admit is not None:
        admit(header)
    buffer = mmap.mmap(fd, expected, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE) if expected else b""
    return assemble(header, buffer)


class HandoverDesk:
    """The service's end of the socket: keeps each descriptor it is passed under a fresh token until AttachGraph
    takes it (``take``), at most ``MAX_PENDING`` at once and ``HANDOVER_TTL_S`` each. One thread answers
    connections one at a time (each is one message each way)."""

    def __init__(self, directory: str) -> None:
        """Listen in ``directory``; OSError when the socket cannot be bound there (a path too long, no room)."""
        self.path = socket_path(directory)
        self._pending: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._listener.bind(self.path)
            self._listener.listen(MAX_PENDING)
        except OSError:
            self._listener.close()
            raise
        self._listener.settimeout(HANDOVER_TTL_S)  # wake at least this often to close what expired
        self._thread = threading.Thread(target=self._serve, name="handover", daemon=True)
        self._thread.start()

    def take(self, token: str) -> int | None:
        """The descriptor handed over under ``token`` (the caller closes it), or None: unknown, taken or expired."""
        with self._lock:
            self._expire()
            entry = self._pending.pop(token, None)
        return entry[0] if entry is not None else None

    def close(self) -> None:
        """Stop listening, remove the socket and close every descriptor not taken."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        self._listener.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        with self._lock:
            for fd, _ in self._pending.values():
                os.close(fd)
            self._pending.clear()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                with self._lock:
                    self._expire()
                continue
            except OSError:  # closed
                return
            with conn:
                conn.settimeout(CONNECTION_TIMEOUT_S)
                try:
                    _, fds, flags, _ = socket.recv_fds(conn, 64, 1)
                    conn.sendall(self._keep(fds, truncated=bool(flags & socket.MSG_CTRUNC)).encode())
                except OSError:
                    continue

    def _keep(self, fds: list[int], truncated: bool) -> str:
        """Hold the one descriptor a connection passed under a new token; the answer line. ``truncated``: it passed
        more than fit (the kernel closed the rest)."""
        if len(fds) != 1 or truncated:
            for fd in fds:
                os.close(fd)
            return "error pass exactly one descriptor\n"
        with self._lock:
            self._expire()
            if len(self._pending) >= MAX_PENDING:
                os.close(fds[0])
                return f"error {MAX_PENDING} graphs are waiting for AttachGraph; stream this one\n"
            token = secrets.token_hex(_TOKEN_BYTES)
            self._pending[token] = (fds[0], time.monotonic())
        return f"ok {token}\n"

    def _expire(self) -> None:
        """Close what waited past ``HANDOVER_TTL_S`` (under the lock)."""
        now = time.monotonic()
        for token in [t for t, (_, since) in self._pending.items() if now - since > HANDOVER_TTL_S]:
            os.close(self._pending.pop(token)[0])
