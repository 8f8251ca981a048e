"""Method services as local subprocesses on loopback: the default when no containers run.

Each service binds a free port itself and announces it on stdout, so there is
no race for ports. Services are stopped at exit, on Ctrl-C and on errors
(``EmbeddedServices`` is a context manager), and can be restarted when one dies.
A family can have several replicas (``--parallel N`` starts up to N).

Threads and kernels: a service's torch threads are ``NODEGROUND_THREADS`` when set; in a SLURM task
without it, the task's CPUs (``SLURM_CPUS_PER_TASK``) shared among the replicas it runs at
once (``service_threads``), so concurrent tasks on one node do not oversubscribe it; else one, and
a sweep runs one service per core (``default_parallel``). Its kernels are ``NODEGROUND_KERNELS``'s
policy, put in its environment before it starts (``contract.hardware``).

A service also exits on its own when the orchestrator that started it dies,
even by SIGKILL: its environment names the orchestrator's pid
(``NODEGROUND_PARENT_PID``) and the service watches for being re-parented
(``methods.sdk.lifeline``).

Graphs reach a service handed over rather than streamed: each service gets a directory of its own
(``GRAPH_DIR_ENV``; mode 0700, under /dev/shm where there is one), where it listens for sealed memfds
(``contract.handover``) that its client passes (AttachGraph). It is removed when the service stops.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import psutil

from contract.families import family_env
from contract.handshake import GRAPH_DIR_ENV, PARENT_PID_ENV, READY_PREFIX
from contract.hardware import kernel_environment
from contract.security import ENV_NAMES as SECURITY_ENV
from contract.settings import START_TIMEOUT_S as START_TIMEOUT
from orchestrator.services.client import ServiceUnavailable

START_TIMEOUT_S = 120.0  # default; NODEGROUND_START_TIMEOUT_S sets it (a loaded machine may need more)
START_TIMEOUT_ENV = START_TIMEOUT.env
CLOSE_GRACE_S = 3.0  # when the sweep ends, services get this long to exit on SIGTERM, then SIGKILL (they hold nothing)
THREADS_ENV = "NODEGROUND_THREADS"  # torch threads per service (methods.serve reads it)
SHARED_MEMORY = Path("/dev/shm")  # where graph directories go when it exists: local, whatever TMPDIR is
# A graph directory's name: its family, then the pid and start time (whole seconds) of the orchestrator that made it,
# so that one left behind by an orchestrator killed with -9 is told apart and removed by the next one.
GRAPH_DIR_NAME = re.compile(r"nodeground-.+-(?P<pid>\d+)-(?P<started>\d+)-[a-z0-9_]{8}")


def remove_orphaned_graph_dirs(base: Path) -> list[Path]:
    """Remove this user's graph directories under ``base`` whose orchestrator is gone (killed before it could);
    what it removed."""
    removed = []
    for path in base.glob("nodeground-*"):
        match = GRAPH_DIR_NAME.fullmatch(path.name)
        try:
            if match is None or path.is_symlink() or path.stat().st_uid != os.getuid():
                continue
            if _alive(int(match["pid"]), int(match["started"])):
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int, started: int) -> bool:
    """Whether process ``pid`` runs and is the one that started at ``started`` (a reused pid is another)."""
    try:
        return int(psutil.Process(pid).create_time()) == started
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def start_timeout() -> float:
    """Seconds a service may take to announce its port: NODEGROUND_START_TIMEOUT_S, else START_TIMEOUT_S."""
    value = START_TIMEOUT.read()
    return START_TIMEOUT_S if value is None else float(value)


def service_threads(replicas: int, env: Mapping[str, str] = os.environ) -> int | None:
    """Torch threads for each of ``replicas`` services run at once: NODEGROUND_THREADS (None: the children inherit
    it), else the SLURM task's CPUs split among them, else one."""
    if env.get(THREADS_ENV):
        return None
    cpus = env.get("SLURM_CPUS_PER_TASK", "")
    if cpus.isdigit() and int(cpus) > 0:
        return max(1, int(cpus) // max(1, replicas))
    return 1


def usable_cores() -> int:
    """The cores this process may run on (its affinity, which a container's or a job's CPU set narrows)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def default_parallel(gpus: int) -> int:
    """Local services side by side when nothing says how many: one per core, each on one thread; with a GPU, one (local
    services all compute on the first GPU; `make up GPU=1` runs one replica per GPU)."""
    return 1 if gpus else usable_cores()


class EmbeddedService:
    def __init__(self, family: str, log_dir: Path | None = None, replica: int = 0, threads: int | None = None) -> None:
        self.family = family
        self.log_dir = log_dir
        self.replica = replica
        self.threads = threads
        self.process: subprocess.Popen[bytes] | None = None
        self.endpoint = ""
        self.start_seconds = (
            0.0  # process start + imports until the port is announced: warm-up, not charged to any trial
        )
        self.started_at = ""
        self.graph_dir = ""  # this service's directory where graphs are handed over (GRAPH_DIR_ENV)

    @property
    def log_path(self) -> Path | None:
        if self.log_dir is None:
            return None
        suffix = f"-{self.replica}" if self.replica else ""
        return self.log_dir / f"{self.family}{suffix}.log"

    def start(self) -> str:
        started = time.perf_counter()
        self.started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        stderr: int | IO[bytes] = subprocess.DEVNULL
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            stderr = self.log_path.open("ab")
        base = SHARED_MEMORY if SHARED_MEMORY.is_dir() and os.access(SHARED_MEMORY, os.W_OK) else None
        remove_orphaned_graph_dirs(Path(base or tempfile.gettempdir()))
        me = psutil.Process()
        prefix = f"nodeground-{self.family}-{me.pid}-{int(me.create_time())}-"
        self.graph_dir = tempfile.mkdtemp(prefix=prefix, dir=base)  # mode 0700
        try:
            self.process = self._spawn(stderr)
        except BaseException:
            self._remove_graph_dir()
            raise
        finally:
            if not isinstance(stderr, int):
                stderr.close()  # the child holds its own descriptor
        port = self._read_port()
        self.endpoint = f"127.0.0.1:{port}"
        self.start_seconds = time.perf_counter() - started
        return self.endpoint

    def command(self) -> list[str]:
        """What runs: the family's service on a port it picks, on loopback."""
        return [sys.executable, "-m", "methods.serve", "--family", self.family, "--host", "127.0.0.1", "--port", "0"]

    def _spawn(self, stderr: int | IO[bytes]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            # loopback: plaintext whatever TLS settings this process has for remote services
            env=family_env(
                self.family,
                {
                    **kernel_environment({k: v for k, v in os.environ.items() if k not in SECURITY_ENV}),
                    **self._thread_env(),
                    "PYTHONUNBUFFERED": "1",
                    PARENT_PID_ENV: str(os.getpid()),
                    GRAPH_DIR_ENV: self.graph_dir,
                },
            ),
        )

    def _remove_graph_dir(self) -> None:
        if self.graph_dir:
            shutil.rmtree(self.graph_dir, ignore_errors=True)

    def _thread_env(self) -> dict[str, str]:
        """The thread count for torch (NODEGROUND_THREADS) and for OpenMP/MKL/BLAS pools the child starts."""
        if self.threads is None:
            return {}
        count = str(self.threads)
        pools = {name: os.environ.get(name, count) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
        return {THREADS_ENV: count, **pools}

    def _read_port(self) -> int:
        assert self.process is not None and self.process.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        timeout = start_timeout()
        deadline = time.monotonic() + timeout
        line = b""
        try:
            while time.monotonic() < deadline:
                if selector.select(timeout=0.5):
                    line = self.process.stdout.readline()
                    if line.startswith(READY_PREFIX.encode()):
                        return int(line.split()[1])
                    if not line:
                        break
                if self.process.poll() is not None:
                    break
        finally:
            selector.close()
        timed_out = time.monotonic() >= deadline
        if not timed_out:  # its output ended: give an exiting process a moment to say how it ended
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5)
        running = self.process.poll() is None
        self.stop()
        where = f"see {self.log_path if self.log_path else 'its stderr'}"
        if running and timed_out:
            raise ServiceUnavailable(
                f"the {self.family} service did not announce its port within {timeout:g} s, so the orchestrator "
                f"stopped it (a loaded machine may need longer: set {START_TIMEOUT_ENV}); {where}"
            )
        if running:
            raise ServiceUnavailable(
                f"the {self.family} service closed its output before announcing its port, so the orchestrator "
                f"stopped it; {where}"
            )
        raise ServiceUnavailable(
            f"the {self.family} service exited with code {self.process.returncode} before announcing its port; {where}"
        )

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if the process has not exited within ``timeout`` seconds; then remove its graph
        directory."""
        self.terminate()
        if self.process is not None:
            try:
                self.process.wait(timeout=max(0.0, timeout))
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            if self.process.stdout is not None:
                self.process.stdout.close()
        self._remove_graph_dir()

    def terminate(self) -> None:
        """Ask the process to exit (SIGTERM), without waiting."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:  # a stopped (SIGSTOP) process acts on the SIGTERM only once continued
            os.kill(self.process.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


class EmbeddedServices:
    """Start services per family on demand (one or more replicas each); stop them all on exit."""

    def __init__(self, log_dir: Path | None = None, threads: int | None = None) -> None:
        self.log_dir = log_dir
        self.threads = threads  # torch threads per service (service_threads), None: inherited or torch's default
        self.replicas: dict[str, list[EmbeddedService]] = {}
        self._lock = threading.Lock()
        self._closed = False

    @property
    def services(self) -> dict[str, EmbeddedService]:
        """The first replica of each family."""
        with self._lock:
            return {family: pool[0] for family, pool in self.replicas.items() if pool}

    def start(self, family: str) -> EmbeddedService:
        """Start one more replica of the family's service and return it once it listens."""
        with self._lock:
            pool = self.replicas.setdefault(family, [])
            service = EmbeddedService(family, self.log_dir, replica=len(pool), threads=self.threads)
            pool.append(service)
        try:
            service.start()
        except BaseException:
            with self._lock:
                pool.remove(service)
            raise
        self._unless_closed(service)
        return service

    def _unless_closed(self, service: EmbeddedService) -> None:
        """A service that came up after ``close`` (a restart still in flight) is stopped at once, not left behind."""
        with self._lock:
            closed = self._closed
        if closed:
            service.stop()
            raise ServiceUnavailable(f"the embedded {service.family} service came up after the sweep ended")

    def endpoint(self, family: str) -> str:
        """The family's first endpoint, starting its service on first use (a dead one is restarted by ``restart``)."""
        with self._lock:
            pool = self.replicas.get(family)
            service = pool[0] if pool else None
        if service is None:
            service = self.start(family)
        return service.endpoint

    def restart(self, target: str | EmbeddedService) -> EmbeddedService:
        """Stop a replica (or the family's first one) and start a fresh one in its place."""
        with self._lock:
            if isinstance(target, str):
                pool = self.replicas.get(target) or []
                old = pool[0] if pool else None
                family = target
            else:
                old, family = target, target.family
                pool = self.replicas.get(family) or []
            slot = pool.index(old) if old in pool else None
        if old is not None:
            old.stop()
        fresh = EmbeddedService(
            family, self.log_dir, replica=old.replica if old is not None else 0, threads=self.threads
        )
        fresh.start()
        self._unless_closed(fresh)
        with self._lock:
            pool = self.replicas.setdefault(family, [])
            if slot is not None and slot < len(pool) and pool[slot] is old:
                pool[slot] = fresh
            else:
                pool.append(fresh)
        return fresh

    def close(self) -> None:
        with self._lock:
            self._closed = True
            services = [s for pool in self.replicas.values() for s in pool]
            self.replicas.clear()
        for service in services:  # all asked at once, then each given what is left of one grace period
            service.terminate()
        deadline = time.monotonic() + CLOSE_GRACE_S
        for service in services:
            service.stop(timeout=deadline - time.monotonic())

    def __enter__(self) -> EmbeddedServices:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
