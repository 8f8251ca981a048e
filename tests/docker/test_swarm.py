"""A sweep over method replicas on a real (single-node) Docker Swarm, as an operator runs it:
`make swarm-up` with gnn at 2 replicas (dnsrr, overlay network), `make swarm-run` (the orchestrator
image on that network, `--endpoint gnn=dns:///gnn:50051`), one replica killed mid-sweep, `make
swarm-down`. The services serve TLS and require the stack's token: an orchestrator on the overlay
without them is refused in one line. The sweep must use both replicas, finish in the same run with every trial ok (the
killed replica's trial retried), store no key twice, and select what an uninterrupted
single-replica run of the same arguments selects."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

import pytest

from orchestrator.results import selected_results
from orchestrator.store import read_trials

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
STACK = "ngswarmtest"
SWEEP = "--methods mlp,gcn --datasets synthetic-tiny --splits 0,1,2 --budget 3"


def _make(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    offline = ["OFFLINE=1"] if (REPO / "wheelhouse").is_dir() else []  # the offline path: images from the wheelhouse
    return subprocess.run(
        ["make", *args, f"SWARM_STACK={STACK}", *offline], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


def _count(store: Path) -> int:
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
            return db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_a_sweep_uses_every_swarm_replica_and_survives_a_killed_one(docker_engine, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    up = _make("swarm-up", "SWARM_FAMILIES=gnn", "SWARM_REPLICAS=gnn=2", f"SWARM_RUNS={runs}")
    if up.returncode != 0 and "swarm init" in up.stderr.lower():
        pytest.skip(f"this engine cannot run a swarm: {up.stderr.strip().splitlines()[-1]}")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        plaintext = subprocess.run(
            ["docker", "run", "--rm", "--network", f"{STACK}_nodeground", "nodeground/orchestrator:latest",
             "run", "--methods", "mlp", "--datasets", "synthetic-tiny", "--budget", "1",
             "--endpoint", "gnn=dns:///gnn:50051", "--store", "/tmp/plain.sqlite"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert plaintext.returncode == 2 and "if it serves TLS, set NODEGROUND_TLS_CA" in plaintext.stderr, (
            plaintext.stderr
        )
        store = runs / "swarm.sqlite"
        args = f"{SWEEP} --endpoint gnn=dns:///gnn:50051 --parallel 2 --no-warmup --store /runs/swarm.sqlite"
        result: dict[str, subprocess.CompletedProcess] = {}
        sweep = threading.Thread(
            target=lambda: result.update(run=_make("swarm-run", f"ARGS={args}", f"SWARM_RUNS={runs}", timeout=1500))
        )
        sweep.start()
        deadline = time.monotonic() + 600
        while _count(store) < 3:  # mid-sweep: some trials stored, most still to come
            assert sweep.is_alive() and time.monotonic() < deadline, result.get("run")
            time.sleep(0.5)
        tasks = subprocess.run(["docker", "ps", "-q", "--filter", f"label=com.docker.swarm.service.name={STACK}_gnn"],
                               capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
        assert len(tasks) == 2
        subprocess.run(["docker", "kill", tasks[0]], check=True, capture_output=True)
        sweep.join()
        run = result["run"]
        assert run.returncode == 0, run.stdout + run.stderr
        trials = read_trials(store)
        per_replica = trials["endpoint"].value_counts()
        print(f"\nswarm: trials per replica {per_replica.to_dict()}")
        assert len(per_replica) >= 2  # both replicas (and the restarted task, if it came back in time)
        assert trials["trial_key"].is_unique and (trials["status"] == "ok").all(), trials[
            ["trial_key", "status", "error"]
        ]
        reference = tmp_path / "reference.sqlite"
        env = {**os.environ, "NODEGROUND_THREADS": "1"}
        ref = subprocess.run([str(REPO / ".venv/bin/orchestrator"), "run", *SWEEP.split(), "--services", "embedded",
                              "--store", str(reference)], env=env, capture_output=True, text=True,
                             timeout=900)  # fmt: skip
        assert ref.returncode == 0, ref.stderr
        expected = read_trials(reference)
        assert set(trials["trial_key"]) == set(expected["trial_key"])
        cells = ["method", "dataset", "regime", "split", "trial_index"]
        ours, theirs = selected_results(trials), selected_results(expected)
        assert ours[cells].equals(theirs[cells])  # the same configuration selected in every cell
        assert ours["test_primary"].to_numpy() == pytest.approx(theirs["test_primary"].to_numpy(), abs=1e-6)
    finally:
        down = _make("swarm-down")
        assert down.returncode == 0, down.stdout + down.stderr
        left = subprocess.run(
            ["docker", "network", "ls", "-q", "--filter", f"name={STACK}_"], capture_output=True, text=True
        ).stdout.strip()
        assert not left
