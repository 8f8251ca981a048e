"""A sweep as a SLURM job array on a real (one-node) SLURM cluster: shards, a cancelled and
resubmitted task, and the merged store equal to the unsharded run.

Needs a running cluster: `tests/slurm/local_cluster.sh start` (as root; `make test-slurm` does it).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.store import read_trials

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(1800)]

SWEEP = [
    "--methods",
    "mlp,gcn",
    "--datasets",
    "synthetic-tiny,texas",
    "--regimes",
    "10/10/80",
    "--splits",
    "0,1",
    "--budget",
    "3",
]
ORCHESTRATOR = [sys.executable, "-m", "orchestrator"]
ENV = {**os.environ, "NODEGROUND_THREADS": "1"}


def _cluster_up() -> bool:
    if shutil.which("sinfo") is None:
        return False
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return done.returncode == 0 and any(s in done.stdout for s in ("idle", "mixed", "allocated"))


def _cli(*args: str, timeout: float = 900) -> str:
    done = subprocess.run([*ORCHESTRATOR, *args], env=ENV, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _queued(job: str) -> list[str]:
    """The job's tasks still pending or running (`squeue` lines: id and state)."""
    done = subprocess.run(["squeue", "-h", "-j", job, "-o", "%i %T"], capture_output=True, text=True)
    return [line for line in done.stdout.splitlines() if line.strip()]


def _wait(job: str, timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while _queued(job):
        assert time.monotonic() < deadline, f"job {job} still queued: {_queued(job)}"
        time.sleep(2)


def _job_ids(output: str) -> tuple[str, str]:
    words = output.split()
    return words[words.index("job") + 1], words[words.index("merge") + 2]


def _count(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
            return db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
    except sqlite3.DatabaseError:
        return 0


def test_a_cancelled_and_resubmitted_array_merges_into_the_unsharded_sweep(tmp_path):
    if not _cluster_up():
        pytest.skip("no SLURM cluster answers sinfo (start one with tests/slurm/local_cluster.sh start)")
    _cli("run", *SWEEP, "--services", "embedded", "--store", str(tmp_path / "whole.sqlite"))
    whole = set(read_trials(tmp_path / "whole.sqlite")["trial_key"])
    assert len(whole) == 24

    job_dir = tmp_path / "job"
    array, merge = _job_ids(_cli("slurm", "submit", *SWEEP, "--shards", "3", "--dir", str(job_dir)))
    # Cancel shard 1 once it has stored a trial (mid-run), as an operator or a preemption would.
    victim = job_dir / "shard-1.sqlite"
    deadline = time.monotonic() + 600
    while _count(victim) == 0:
        assert time.monotonic() < deadline and any(
            line.startswith(f"{array}_1 ") or line.startswith(f"{array}_[") for line in _queued(array)
        ), "shard 1 finished or vanished before it could be cancelled"
        time.sleep(0.5)
    subprocess.run(["scancel", f"{array}_1"], check=True)
    _wait(array)
    _wait(merge, timeout=60)  # its dependency can no longer be met: SLURM removes it
    assert not (job_dir / "all.sqlite").exists()
    partial = set(read_trials(victim)["trial_key"])
    assert 0 < len(partial) < 24

    array2, merge2 = _job_ids(_cli("slurm", "resubmit", "--dir", str(job_dir), "--only", "1"))
    _wait(array2)
    _wait(merge2)
    merged = read_trials(job_dir / "all.sqlite")
    assert set(merged["trial_key"]) == whole
    assert merged["trial_key"].is_unique and (merged["status"] == "ok").all()
    shard_keys = [set(read_trials(job_dir / f"shard-{i}.sqlite")["trial_key"]) for i in range(3)]
    assert sum(map(len, shard_keys)) == len(whole)  # none twice
    assert partial <= shard_keys[1]  # the resubmitted task resumed from its store
    print(f"\nSLURM: shards {[len(k) for k in shard_keys]} trials; shard 1 had {len(partial)} stored when cancelled")
