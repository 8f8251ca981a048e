"""Method services as local subprocesses on loopback: the default when no containers run.

Each service binds a free port itself and announces it on stdout, so there is
no race for ports. Services are stopped at exit, on Ctrl-C and on errors
(``EmbeddedServices`` is a context manager), and can be restarted when one dies.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
from pathlib import Path

from methods.serve import READY_PREFIX
from orchestrator.services.client import ServiceUnavailable

START_TIMEOUT_S = 120.0


class EmbeddedService:
    def __init__(self, family: str, log_dir: Path | None = None) -> None:
        self.family = family
        self.log_dir = log_dir
        self.process: subprocess.Popen[bytes] | None = None
        self.endpoint = ""
        self.start_seconds = 0.0  # process start + imports: warm-up, not charged to any trial

    def start(self) -> str:
        started = time.perf_counter()
        stderr = subprocess.DEVNULL
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            stderr = (self.log_dir / f"{self.family}.log").open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "methods.serve", "--family", self.family, "--host", "127.0.0.1", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        port = self._read_port()
        self.endpoint = f"127.0.0.1:{port}"
        self.start_seconds = time.perf_counter() - started
        return self.endpoint

    def _read_port(self) -> int:
        assert self.process is not None and self.process.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + START_TIMEOUT_S
        line = b""
        while time.monotonic() < deadline:
            if selector.select(timeout=0.5):
                line = self.process.stdout.readline()
                if line.startswith(READY_PREFIX.encode()):
                    return int(line.split()[1])
                if not line:
                    break
            if self.process.poll() is not None:
                break
        self.stop()
        raise ServiceUnavailable(
            f"the {self.family} service did not start (exit code {self.process.returncode}); "
            f"see {self.log_dir / (self.family + '.log') if self.log_dir else 'its stderr'}"
        )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class EmbeddedServices:
    """Start one service per family on demand; stop them all on exit."""

    def __init__(self, log_dir: Path | None = None) -> None:
        self.log_dir = log_dir
        self.services: dict[str, EmbeddedService] = {}

    def endpoint(self, family: str) -> str:
        """The family's endpoint, starting its service on first use (a dead one is restarted by ``restart``)."""
        service = self.services.get(family)
        if service is None:
            service = EmbeddedService(family, self.log_dir)
            service.start()
            self.services[family] = service
        return service.endpoint

    def restart(self, family: str) -> str:
        if family in self.services:
            self.services.pop(family).stop()
        return self.endpoint(family)

    def close(self) -> None:
        for service in self.services.values():
            service.stop()
        self.services.clear()

    def __enter__(self) -> EmbeddedServices:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
