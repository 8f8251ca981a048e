"""The images' healthcheck: the service writes its gRPC health to a file, the shell probe reads it.

A real gRPC server with the standard health service; the probe is the
``healthcheck.sh`` the Dockerfiles run, executed by /bin/sh.
"""

from __future__ import annotations

import subprocess
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from methods.sdk import health_file
from methods.sdk.health_file import loopback_address, start_health_file, write_status
from tests.conftest import HANG_S

PROBE = Path(health_file.__file__).with_name("healthcheck.sh")


def probe(path: Path, max_age: int = 15) -> subprocess.CompletedProcess:
    env = {"NODEGROUND_HEALTH_FILE": str(path), "NODEGROUND_HEALTH_MAX_AGE": str(max_age), "PATH": "/usr/bin:/bin"}
    return subprocess.run(["/bin/sh", str(PROBE)], env=env, capture_output=True, text=True, timeout=HANG_S)


def wait_for(path: Path, status: str) -> str:
    end = time.monotonic() + HANG_S  # a hang, not slowness: the writer runs every 0.1 s on an idle machine
    text = ""
    while time.monotonic() < end:
        text = path.read_text() if path.exists() else ""
        if text.startswith(status + " "):
            return text
        time.sleep(0.05)
    raise AssertionError(f"health file never said {status}: {text!r}")


@pytest.fixture
def server():
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, srv)
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    yield srv, servicer, port
    srv.stop(0)


def test_file_follows_grpc_health_and_probe_reads_it(server, tmp_path):
    srv, servicer, port = server
    path = tmp_path / "health"
    stop = threading.Event()
    start_health_file(loopback_address("0.0.0.0", port), path, interval=0.1, stop=stop)
    try:
        servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        wait_for(path, "SERVING")
        assert probe(path).returncode == 0

        servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        wait_for(path, "NOT_SERVING")
        result = probe(path)
        assert result.returncode == 1 and "NOT_SERVING" in result.stdout

        srv.stop(0)  # the service no longer answers at all
        wait_for(path, "UNAVAILABLE")
        assert probe(path).returncode == 1
    finally:
        stop.set()


def test_stale_or_missing_file_is_unhealthy(tmp_path):
    path = tmp_path / "health"
    missing = probe(path)
    assert missing.returncode == 1 and "no health file" in missing.stdout
    write_status(path, "SERVING", now=time.time() - 60)
    stale = probe(path)
    assert stale.returncode == 1 and "ago" in stale.stdout
    write_status(path, "SERVING")
    assert probe(path, max_age=int(HANG_S)).returncode == 0  # fresh however long the loaded machine took to probe


def test_wildcard_bind_is_dialled_on_loopback():
    assert loopback_address("0.0.0.0", 50051) == "127.0.0.1:50051"
    assert loopback_address("::", 7) == "127.0.0.1:7"
    assert loopback_address("10.0.0.2", 7) == "10.0.0.2:7"
