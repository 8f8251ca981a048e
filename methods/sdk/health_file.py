"""The service's gRPC health, written to a file that a container healthcheck can read for free.

A Docker ``HEALTHCHECK`` that starts ``python -c "import grpc ..."`` costs about
0.2 CPU-seconds per probe; eight containers probed every 5 s take a sixth of a
two-core host. Instead the service asks its own ``grpc.health.v1`` endpoint
every few seconds over one loopback channel, exactly as a client would, and
writes the answer and the time to a file. The probe, ``healthcheck.sh`` beside
this module, is a shell one-liner: healthy only when the file says SERVING and
is fresh, so a service that reports NOT_SERVING, stops answering or hangs is
unhealthy.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from contract.security import Security

HEALTH_FILE_ENV = "NODEGROUND_HEALTH_FILE"
INTERVAL_S = 5.0  # healthcheck.sh calls a file older than 3 intervals stale


def status_line(stub: health_pb2_grpc.HealthStub, timeout: float) -> str:
    """``SERVING``, ``NOT_SERVING``, ... as the health service answers, or the gRPC error code."""
    try:
        reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
    except grpc.RpcError as exc:
        return exc.code().name
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def write_status(path: Path, status: str, now: float | None = None) -> None:
    """Replace ``path`` atomically with ``<status> <unix seconds>``."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(f"{status} {int(now if now is not None else time.time())}\n")
    os.replace(tmp, path)


def start_health_file(
    address: str,
    path: Path,
    interval: float = INTERVAL_S,
    stop: threading.Event | None = None,
    security: Security | None = None,
) -> threading.Thread:
    """Write the health of the service at ``address`` to ``path`` every ``interval`` seconds, in a daemon thread.

    ``security``: how to dial it (a TLS service is dialled trusting its own certificate).
    """
    stop = stop or threading.Event()
    security = security or Security()

    def loop() -> None:
        with security.channel(address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                try:
                    write_status(path, status_line(stub, timeout=interval))
                except OSError:
                    pass  # an unwritable file reads as stale: the probe says unhealthy
                if stop.wait(interval):
                    return

    thread = threading.Thread(target=loop, name="health-file", daemon=True)
    thread.start()
    return thread


def loopback_address(host: str, port: int) -> str:
    """Where this process reaches its own server: a wildcard bind is dialled on 127.0.0.1."""
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    return f"{host}:{port}"
