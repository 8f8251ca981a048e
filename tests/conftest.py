"""Shared fixtures: an isolated cache per test session, the mirror when present, tiny graphs."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]
# A limit that catches a hang, never one that measures speed: a service that starts in 3 s on idle cores has
# taken over 60 s on a loaded two-core machine, so waits for starts, health and single calls use this.
HANG_S = 300.0
MIRROR = Path(os.environ.get("NODEGROUND_MIRROR") or REPO.parent / "shared" / "mirror")
#: The smallest sweep a test asks `orchestrator run` for: the MLP on the built-in tiny graph.
TINY_SWEEP = ["--methods", "mlp", "--datasets", "synthetic-tiny"]


def wait_for(condition: Callable[[], object], what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` if it has not within HANG_S (a hang, not slowness)."""
    deadline = time.monotonic() + HANG_S
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {HANG_S:.0f} s"
        time.sleep(0.02)


# Checks that take most of an hour on a CPU run only when their marker is asked for.
OPT_IN = {"fidelity": "make fidelity", "sweep_configs": "make sweep-configs"}


# Where each marker's tests run when `make test` leaves them out (`make help` lists their durations).
TARGETS = {
    "slow": "make test-slow",
    "docker": "make test-docker / test-swarm / test-user-path / test-contrib",
    "slurm": "make test-slurm",
    "fidelity": "make fidelity",
    "sweep_configs": "make sweep-configs",
    "gpu": "make gpu-check",
}


def pytest_report_header(config: pytest.Config) -> list[str]:
    expression = config.option.markexpr or ""
    left_out = [f"{marker} ({target})" for marker, target in TARGETS.items() if f"not {marker}" in expression]
    return [f"nodeground: running -m {expression!r}", *(["left out: " + "; ".join(left_out)] if left_out else [])]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    expression = config.option.markexpr or ""
    for marker, target in OPT_IN.items():
        if marker in expression and f"not {marker}" not in expression:
            continue
        skip = pytest.mark.skip(reason=f"slow check: run with `{target}` (pytest -m {marker})")
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ["NODEGROUND_CACHE"] = str(tmp_path_factory.mktemp("ng-cache"))
    # One torch thread per service: tests run beside their services on few cores, and
    # oversubscribed OpenMP threads slow small models down many times over.
    os.environ.setdefault("NODEGROUND_THREADS", "1")


# Where tests that are not marked ``docker`` find the Docker engine: nowhere. A developer's machine often runs
# NodeGround containers (their own `make up`, another clone's stack); a sweep would say which it uses or ignores,
# and a test of what a sweep prints or runs must not depend on that. Subprocesses inherit it.
NO_ENGINE = "unix:///nonexistent/nodeground-tests-use-no-docker-engine.sock"


@pytest.fixture(autouse=True)
def _no_containers_unless_marked(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if "docker" not in request.keywords:
        monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)


@pytest.fixture
def mirror(monkeypatch: pytest.MonkeyPatch) -> Path:
    if not (MIRROR / "MANIFEST.tsv").exists():
        pytest.skip(f"no dataset mirror at {MIRROR} (set NODEGROUND_MIRROR)")
    monkeypatch.setenv("NODEGROUND_MIRROR", str(MIRROR))
    return MIRROR


def tiny_graph(
    n: int = 60, classes: int = 3, features: int = 5, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A hand-sized graph: a ring plus chords, class-informative features."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    x = (rng.normal(size=(n, features)) + y[:, None]).astype(np.float32)
    ring = np.stack([np.arange(n), (np.arange(n) + 1) % n])
    chords = np.stack([np.arange(0, n, 2), (np.arange(0, n, 2) + classes) % n])
    return x, np.concatenate([ring, chords], axis=1), y


@contextlib.contextmanager
def served(family: str, *flags: str, **env: str) -> Iterator[tuple[psutil.Process, str]]:
    """A real service process for ``family`` on a free loopback port (one torch thread): its process and endpoint."""
    from contract.families import family_env
    from contract.handshake import READY_PREFIX
    from orchestrator.services.client import MethodClient

    proc = subprocess.Popen(
        [sys.executable, "-m", "methods.serve", "--family", family, "--port", "0", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env=family_env(family, {**os.environ, "NODEGROUND_THREADS": "1", **env}),
    )  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert line.startswith(READY_PREFIX), f"service did not start: {line!r}"
        endpoint = f"127.0.0.1:{line.split()[1]}"
        MethodClient(endpoint).wait_healthy(HANG_S)
        yield psutil.Process(proc.pid), endpoint
    finally:
        proc.terminate()
        proc.wait(HANG_S)
