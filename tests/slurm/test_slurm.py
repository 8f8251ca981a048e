"""A sweep as a SLURM job array on a real (one-node) SLURM cluster.

- Shards run side by side: each task asks for one CPU and the default memory, so two share the
  two-CPU node (their start and end times, from sacct, overlap), and their services take one torch
  thread each from SLURM_CPUS_PER_TASK.
- An early merge is refused: shard 0 cancelled mid-run while shards 2 and 3 still wait; a merge
  then names the missing shards and exits non-zero without writing all.sqlite; `resubmit --only 0`
  leaves one merge job that waits for every shard still to run, and the merged store equals the
  unsharded run.
- A requeue loop cannot happen: a --time that cannot hold one trial is refused before submission;
  a task near its time limit requeues itself only after storing a trial, and at most --max-requeues
  times.

Needs a running cluster: `tests/slurm/local_cluster.sh start` (as root; `make test-slurm` does it),
with slurmdbd for sacct.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from orchestrator.store import read_merge_state, read_trials

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(1800)]

SWEEP = ["--methods", "mlp,gcn", "--datasets", "synthetic-tiny,texas", "--regimes", "10/10/80",
         "--splits", "0,1", "--budget", "3"]  # fmt: skip
ORCHESTRATOR = [sys.executable, "-m", "orchestrator"]
# The tasks take their threads from SLURM (one CPU each); the unsharded reference runs one thread, as they do.
TASK_ENV = {k: v for k, v in os.environ.items() if k != "NODEGROUND_THREADS"}
REFERENCE_ENV = {**TASK_ENV, "NODEGROUND_THREADS": "1"}
WAIT_S = 900  # catches a hang: the longest wait here is a whole array on a loaded two-core machine


def _cluster_up() -> bool:
    if shutil.which("sinfo") is None:
        return False
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    return done.returncode == 0 and any(s in done.stdout for s in ("idle", "mixed", "allocated"))


@pytest.fixture(autouse=True)
def _cluster():
    if not _cluster_up():
        pytest.skip("no SLURM cluster answers sinfo (start one with tests/slurm/local_cluster.sh start)")


def _cli(*args: str, expect: int = 0, env: dict | None = None) -> str:
    done = subprocess.run([*ORCHESTRATOR, *args], env=env or TASK_ENV, capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == expect, done.stdout + done.stderr
    return done.stdout + done.stderr


def _queued(job: str) -> dict[str, str]:
    """The job's tasks still pending or running: id -> state."""
    done = subprocess.run(["squeue", "-h", "-r", "-j", job, "-o", "%i %T"], capture_output=True, text=True)
    return dict(line.split() for line in done.stdout.splitlines() if line.strip())


def _wait_for(what: str, condition, timeout: float = WAIT_S, every: float = 1.0, job_dir: Path | None = None):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}" + (_explain(job_dir) if job_dir else "")
        time.sleep(every)
    return value


def _explain(job_dir: Path) -> str:
    """What SLURM and the job directory say, for a wait that timed out (CI keeps only the test's output)."""
    shown = [
        subprocess.run(args, capture_output=True, text=True).stdout for args in (["squeue", "-a"], ["sinfo", "-R"])
    ]
    shown += [subprocess.run(["scontrol", "show", "job"], capture_output=True, text=True).stdout[-3000:]]
    for path in sorted([*job_dir.glob("*.json"), *job_dir.glob("logs/*.log")]):
        shown.append(f"--- {path.name}\n" + path.read_text(errors="replace")[-3000:])
    return "\n" + "\n".join(shown)


def _job_ids(output: str) -> tuple[str, str]:
    array = re.search(r"array job (\d+)", output)
    merge = re.search(r"merge job (\d+)", output)
    assert array and merge, output
    return array.group(1), merge.group(1)


def _state(job_dir: Path, shard: int) -> dict:
    try:
        return json.loads((job_dir / f"shard-{shard}.json").read_text())
    except (OSError, ValueError):
        return {}


def _sacct(*jobs: str) -> list[dict[str, str]]:
    fields = ["JobID", "State", "Start", "End", "ReqTRES"]
    done = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-j", ",".join(jobs), "-o", ",".join(fields)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return [dict(zip(fields, line.split("|"), strict=True)) for line in done.stdout.splitlines() if line]


def test_shards_run_side_by_side_an_early_merge_is_refused_and_the_full_merge_equals_the_unsharded_run(tmp_path):
    _cli("run", *SWEEP, "--services", "embedded", "--store", str(tmp_path / "whole.sqlite"), env=REFERENCE_ENV)
    whole = read_trials(tmp_path / "whole.sqlite")
    assert len(whole) == 24

    job_dir = tmp_path / "job"
    array, first_merge = _job_ids(
        _cli("slurm", "submit", *SWEEP, "--shards", "4", "--dir", str(job_dir), "--publish-every", "2")
    )
    # Shard 0 is cancelled once it has published a stored trial (mid-run), while shards 2 and 3 still wait.
    _wait_for(
        "shard 0 to publish a trial", lambda: (_state(job_dir, 0).get("done") or 0) > 0, every=0.5, job_dir=job_dir
    )
    queued = _queued(array)
    assert queued.get(f"{array}_0") == "RUNNING" and queued.get(f"{array}_1") == "RUNNING", queued
    assert {queued.get(f"{array}_2"), queued.get(f"{array}_3")} == {"PENDING"}, queued  # two at a time on two CPUs
    subprocess.run(["scancel", f"{array}_0"], check=True)
    _wait_for("shard 0 to end", lambda: f"{array}_0" not in _queued(array), job_dir=job_dir)
    stopped = _state(job_dir, 0)
    assert stopped["state"] == "stopped" and 0 < stopped["done"] < stopped["planned"]

    early = _cli("slurm", "merge", "--dir", str(job_dir), expect=2)
    assert "error: incomplete: " in early and "shard 0/4 (" in early, early
    assert re.search(r"shard [23]/4 \(\d+ of \d+ missing", early), early  # the waiting shards are named too
    assert not (job_dir / "all.sqlite").exists()

    resubmitted = _cli("slurm", "resubmit", "--dir", str(job_dir), "--only", "0")
    array2, merge = _job_ids(resubmitted)
    assert f"cancelled the earlier merge job(s) {first_merge}" in resubmitted
    assert re.search(rf"also waits for .*\({array}_[23]\)", resubmitted), resubmitted
    _wait_for("the merge", lambda: not _queued(merge), job_dir=job_dir)

    merged = read_trials(job_dir / "all.sqlite")
    assert merged["trial_key"].is_unique and (merged["status"] == "ok").all()
    columns = ["trial_key", "status", "config_json", "val_loss", "test_primary"]
    ordered = [frame[columns].sort_values("trial_key").reset_index(drop=True) for frame in (merged, whole)]
    assert ordered[0].equals(ordered[1])  # the unsharded run's trials, bit for bit
    assert read_merge_state(job_dir / "all.sqlite")["state"] == "complete"
    status = _cli("slurm", "status", "--dir", str(job_dir))
    assert "24 of 24 planned stored" in status and "complete" in status, status

    tasks = _sacct(array, array2)
    print("\nsacct (JobID, State, Start, End, ReqTRES):")
    for row in tasks:
        print("  " + "  ".join(row.values()))
    spans = [
        (datetime.fromisoformat(r["Start"]), datetime.fromisoformat(r["End"]))
        for r in tasks
        if r["Start"] not in ("", "Unknown", "None") and r["End"] not in ("", "Unknown", "None")
    ]
    overlapping = [(a, b) for i, a in enumerate(spans) for b in spans[i + 1 :] if a[0] < b[1] and b[0] < a[1]]
    assert overlapping, f"no two tasks ran at the same time: {tasks}"
    assert all("cpu=1" in r["ReqTRES"] and "mem=8G" in r["ReqTRES"] for r in tasks), tasks
    logs = list((job_dir / "logs").glob("shard-*-services/*.log"))
    assert logs and all("torch threads 1" in log.read_text() for log in logs), logs  # from SLURM_CPUS_PER_TASK


def test_a_requeue_loop_is_refused_before_submission_and_capped_at_run_time(tmp_path):
    short = _cli("slurm", "submit", *SWEEP, "--shards", "1", "--dir", str(tmp_path / "short"), "--time", "00:03:00",
                 expect=2)  # fmt: skip
    assert short.startswith("error: --time 00:03:00 cannot hold one trial") and short.count("\n") == 1, short
    assert not (tmp_path / "short").exists()

    job_dir = tmp_path / "job"
    # 16 trials: 3 before the requeue, at least one after the restart, then the capped rest
    sweep = ["--methods", "mlp,gcn", "--datasets", "texas", "--splits", "0", "--budget", "8", "--time-limit", "30"]
    array, merge = _job_ids(
        _cli(
            "slurm",
            "submit",
            *sweep,
            "--shards",
            "1",
            "--dir",
            str(job_dir),
            "--time",
            "00:08:00",
            "--max-requeues",
            "1",
            "--publish-every",
            "1",
        )  # fmt: skip
    )
    task = f"{array}_0"

    def usr1() -> None:  # what SLURM sends 120 s before the time limit (--signal=B:USR1@120)
        subprocess.run(["scancel", "--signal=USR1", "--batch", task], check=True)

    _wait_for("the task to start", lambda: _state(job_dir, 0).get("state") == "running", every=0.2, job_dir=job_dir)
    usr1()  # nothing stored yet: a requeue would loop
    refused = _wait_for(
        "the refusal", lambda: (s := _state(job_dir, 0)).get("state") == "requeue refused" and s, job_dir=job_dir
    )
    assert "no trial was stored in this allocation" in refused["last_error"]

    before = _wait_for(
        "a stored trial", lambda: (_state(job_dir, 0).get("done") or 0) >= 3 and _state(job_dir, 0), job_dir=job_dir
    )
    usr1()  # progress: it requeues itself (and resumes from its published store)
    _wait_for("the requeue", lambda: _state(job_dir, 0).get("state") == "requeued", every=0.2, job_dir=job_dir)
    _wait_for("the requeued task to wait", lambda: _queued(array).get(task) == "PENDING", every=0.5, job_dir=job_dir)

    def restarted() -> dict | bool:
        """The restarted task's state once it runs; meanwhile SLURM's 2-minute wait before a requeued task may
        start again is cut short, as often as the task is still pending (SLURM may set the wait again when the
        requeue completes). SLURM's own requeues (a node it lost touch with) count as restarts too."""
        if _queued(array).get(task) == "PENDING":
            subprocess.run(["scontrol", "update", f"jobid={task}", "StartTime=now"], capture_output=True)
        s = _state(job_dir, 0)
        return (s.get("restarts") or 0) >= 1 and s.get("state") == "running" and s

    resumed = _wait_for("the restart", restarted, job_dir=job_dir)
    assert resumed["done"] >= before["done"]  # what it had published
    _wait_for(
        "progress after the restart",
        lambda: _state(job_dir, 0).get("done", 0) > resumed["done"],
        every=0.2,
        job_dir=job_dir,
    )
    usr1()  # progress again, but the one requeue it may take is spent
    capped = _wait_for(
        "the cap", lambda: (s := _state(job_dir, 0)).get("state") == "requeue refused" and s, job_dir=job_dir
    )
    assert re.search(r"already requeued itself \d+ time\(s\) \(--max-requeues 1\)", capped["last_error"]), capped

    _wait_for("the merge", lambda: not _queued(merge), job_dir=job_dir)
    merged = read_trials(job_dir / "all.sqlite")
    # every trial has an outcome (a sampled config may run out of its 30 s on a loaded machine: timeout)
    assert len(merged) == 16 and merged["trial_key"].is_unique and merged["status"].isin(["ok", "timeout"]).all()
    (row,) = _sacct(array)
    restarts = subprocess.run(["scontrol", "show", "job", task], capture_output=True, text=True).stdout
    assert row["State"] == "COMPLETED" and re.search(r"Restarts=[1-9]", restarts), (row, restarts)
    print(f"\nrequeue: refused without progress, requeued once after {before['done']} trials, refused at the cap")
