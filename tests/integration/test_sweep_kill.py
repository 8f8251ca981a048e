"""kill -9 of the orchestrator, three times at random points, then a rerun: the store ends complete,
without duplicates, with the selections of an uninterrupted run; no service process is orphaned
(each exits by itself once its orchestrator is gone: nothing here stops them, they are only killed
as a clean-up after the test has already failed)."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from methods.gnn import GCN, MLP
from methods.sdk.service import MethodServicer, build_server
from orchestrator.results import selected_results
from orchestrator.services.directory import ServiceDirectory, resolve_methods
from orchestrator.store import Store
from orchestrator.sweep import Sweep, SweepPlan
from tests.conftest import HANG_S

REPO = Path(__file__).resolve().parents[2]
METHODS, DATASET, SPLITS, BUDGET = "mlp", "synthetic-tiny", (0, 1), 4
EXPECTED = len(SPLITS) * BUDGET

pytestmark = pytest.mark.slow  # four orchestrator runs and their service starts: about a minute


def orchestrator(*args: str) -> list[str]:
    # this checkout's code, whichever copy of the package the environment has installed
    return [sys.executable, "-c", "from orchestrator.cli.main import app; app()", *args]


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "NODEGROUND_THREADS": "1"}


def rows(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
    except sqlite3.Error:
        return 0  # not created yet


def run_args(store: Path, parallel: int) -> list[str]:
    return orchestrator(
        "run", "--methods", METHODS, "--datasets", DATASET, "--splits", ",".join(map(str, SPLITS)),
        "--budget", str(BUDGET), "--services", "embedded", "--parallel", str(parallel), "--store", str(store),
    )  # fmt: skip


def kill_when(store: Path, should_kill, timeout: float = 4 * HANG_S) -> tuple[int, list[int]]:
    """Start a sweep, SIGKILL it once ``should_kill(elapsed, new_rows)``; return its exit code and its services'
    pids."""
    before = rows(store)
    proc = subprocess.Popen(
        run_args(store, parallel=1), cwd=REPO, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    start = time.monotonic()
    services: set[int] = set()
    try:
        while proc.poll() is None and time.monotonic() - start < timeout:
            try:
                services |= {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
            except psutil.NoSuchProcess:
                pass
            if should_kill(time.monotonic() - start, rows(store) - before):
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.02)
        return proc.wait(timeout=HANG_S), sorted(services)
    finally:
        if proc.poll() is None:
            proc.kill()


def reference_selection() -> tuple[set[str], list]:
    """The same sweep, uninterrupted and serial, against an in-process service with one torch thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    server, port = build_server(MethodServicer("gnn", [MLP, GCN]), "127.0.0.1:0")
    server.start()
    try:
        plan = SweepPlan((METHODS,), (DATASET,), ("10/10/80",), SPLITS, BUDGET)
        directory = ServiceDirectory(resolve_methods([METHODS]), endpoints={"gnn": f"127.0.0.1:{port}"})
        with Store(Path(os.environ["NODEGROUND_CACHE"]) / "reference.sqlite") as store:
            Sweep(plan, store, directory).run()
            frame = store.frame()
        directory.close()
    finally:
        server.stop(0)
        torch.set_num_threads(before)
    return set(frame["trial_key"]), selected_results(frame)


def test_kill_9_three_times_then_resume(tmp_path):
    store = tmp_path / "runs.sqlite"
    rng = random.Random(int(os.environ.get("NODEGROUND_KILL_SEED", "5")))
    delay = rng.uniform(0.5, 6.0)  # anywhere: service start, warm-up, the first trials
    extra = rng.randint(1, 2)
    plans = [
        lambda elapsed, new: elapsed >= delay,
        lambda elapsed, new: new >= 1,
        lambda elapsed, new: new >= extra,
    ]
    orphans = []
    for should_kill in plans:
        code, services = kill_when(store, should_kill)
        assert code == -signal.SIGKILL, f"the sweep ended by itself (exit {code}) before it could be killed"
        alive = psutil.wait_procs([psutil.Process(p) for p in services if psutil.pid_exists(p)], timeout=HANG_S)[1]
        orphans += alive
        for proc in alive:
            proc.kill()
        assert rows(store) < EXPECTED
    assert not orphans, f"service processes outlived the killed orchestrator: {orphans}"

    # The rest runs two trials at a time on two embedded processes: still the reference's records.

    final = subprocess.run(
        run_args(store, parallel=2), cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=300
    )
    assert final.returncode == 0, final.stderr

    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        keys = [k for (k,) in db.execute("SELECT trial_key FROM trials")]
        statuses = {s for (s,) in db.execute("SELECT DISTINCT status FROM trials")}
        services = db.execute("SELECT COUNT(*), MIN(start_seconds) FROM services").fetchone()
    assert len(keys) == EXPECTED and len(set(keys)) == EXPECTED and statuses == {"ok"}
    assert services[0] >= 1 and services[1] > 0

    expected_keys, expected = reference_selection()
    assert set(keys) == expected_keys
    with Store(store) as s:
        got = selected_results(s.frame())
    pick = ["method", "dataset", "regime", "split", "trial_index", "config_json", "val_loss", "test_primary"]
    assert got[pick].equals(expected[pick]), (got[pick], expected[pick])
