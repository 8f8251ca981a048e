"""`orchestrator slurm` without a cluster: requests, the --time check, the requeue rule, resubmission, and an
array task run by hand (its store published, its state written, a requeue refused without progress).

SLURM's clients are stand-ins on PATH that log their arguments; the real cluster is tests/slurm.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.services.embedded import EmbeddedServices
from orchestrator.slurm import (
    ShardEstimate,
    SlurmJob,
    check_time,
    parse_slurm_time,
    requeue_decision,
    shortest_time,
    task_resources,
)
from orchestrator.store import read_trials
from tests.conftest import HANG_S, TINY_SWEEP

REPO = Path(__file__).resolve().parents[2]
SWEEP = [*TINY_SWEEP, "--splits", "0,1", "--budget", "2"]
WIDE_SWEEP = [*TINY_SWEEP, "--splits", "0,1,2,3", "--budget", "2"]  # 4 cells: up to 4 shards
runner = CliRunner()

FAKE = {
    "sbatch": 'echo "$@" >> "$FAKE_SLURM/sbatch.log"; n=$(( $(cat "$FAKE_SLURM/next" 2>/dev/null || echo 100) + 1 ));'
    ' echo $n > "$FAKE_SLURM/next"; echo $n',
    "squeue": 'cat "$FAKE_SLURM/squeue.out" 2>/dev/null; true',
    "sacct": 'echo "sacct: error: Slurm accounting storage is disabled" >&2; exit 1',
    "scancel": 'echo "$@" >> "$FAKE_SLURM/scancel.log"',
    "scontrol": 'echo "$@" >> "$FAKE_SLURM/scontrol.log"',
}


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """SLURM's clients as scripts that log what they were asked."""
    bin_dir = tmp_path / "fake-slurm"
    bin_dir.mkdir()
    for name, body in FAKE.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM", str(bin_dir))
    return bin_dir


def sbatch_calls(fake: Path) -> list[str]:
    log = fake / "sbatch.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize(
    "text, seconds",
    [("90", 5400), ("02:30", 150), ("01:00:00", 3600), ("1-12", 129600), ("2-01:30", 178200), ("1-0:0:5", 86405)],
)
def test_slurm_times_parse_as_sbatch_reads_them(text, seconds):
    assert parse_slurm_time(text) == seconds
    assert parse_slurm_time("UNLIMITED") is None


def test_a_time_that_cannot_hold_one_trial_is_refused():
    assert shortest_time(3600) == 2 * 3600 + 120 + 300
    with pytest.raises(ValueError, match=r"--time 00:03:00 cannot hold one trial: .* give --time 02:07:00 or more"):
        check_time("00:03:00", 3600)
    check_time("02:07:00", 3600)
    check_time("00:08:00", 30)
    with pytest.raises(ValueError, match="must be a SLURM time"):
        check_time("soon", 30)


def test_each_task_asks_for_cpus_and_memory_so_tasks_share_a_node():
    assert task_resources(1).sbatch_args() == ["--cpus-per-task=1", "--mem=8G"]
    assert task_resources(2).sbatch_args() == ["--cpus-per-task=2", "--mem=12G"]
    assert task_resources(1, 4, "3G", "04:00:00", "gpu", "gpu:1", ["--account=a"]).sbatch_args() == [
        "--cpus-per-task=4", "--mem=3G", "--time=04:00:00", "--partition=gpu", "--gres=gpu:1", "--account=a",
    ]  # fmt: skip
    estimated = task_resources(1, estimate=ShardEstimate(peak_memory_bytes=6 * 2**30, hours=2.0))
    assert estimated.mem == "12G" and parse_slurm_time(estimated.time) == 2 * 3600 * 1.25 + 300 + 120
    with pytest.raises(ValueError, match="--mem must be a positive size"):
        task_resources(1, mem="lots")


def test_a_task_requeues_itself_only_after_progress_and_at_most_max_requeues_times():
    assert "no trial was stored in this allocation" in requeue_decision(0, 0, 10)
    assert "already requeued itself 3 time(s)" in requeue_decision(5, 3, 3)
    assert requeue_decision(1, 2, 3) is None


def test_submit_refuses_a_short_time_before_anything_is_queued(tmp_path, fake_slurm):
    result = runner.invoke(
        app, ["slurm", "submit", *SWEEP, "--shards", "2", "--dir", str(tmp_path / "job"), "--time", "00:03:00"]
    )
    assert result.exit_code == 2 and result.output.startswith("error: --time 00:03:00 cannot hold one trial")
    assert result.output.count("\n") == 1 and sbatch_calls(fake_slurm) == [] and not (tmp_path / "job").exists()


def test_submit_asks_for_resources_writes_the_settings_into_the_script_and_merges_after_any(
    tmp_path, fake_slurm, monkeypatch
):
    monkeypatch.setenv("NODEGROUND_MIRROR", "/shared/mirror with space")
    job_dir = tmp_path / "job"
    result = runner.invoke(app, ["slurm", "submit", *WIDE_SWEEP, "--shards", "3", "--dir", str(job_dir)])
    assert result.exit_code == 0, result.output
    array, merge = sbatch_calls(fake_slurm)
    assert array.startswith("--parsable --array=0,1,2 --cpus-per-task=1 --mem=8G ")
    assert merge.startswith("--parsable --dependency=afterany:101 --cpus-per-task=1 --mem=2G ")
    script = (job_dir / "sweep.sbatch").read_text()
    assert "export NODEGROUND_MIRROR='/shared/mirror with space'" in script
    assert f"exec {sys.executable} -m orchestrator slurm task --dir {job_dir} --shards 3" in script
    assert "#SBATCH --signal=B:USR1@120" in script
    job = SlurmJob.load(job_dir)
    assert job.tasks == {"0": "101", "1": "101", "2": "101"} and job.merge_jobs == ["102"]


def test_resubmit_takes_resource_flags_refuses_a_queued_shard_and_waits_for_every_shard_still_to_run(
    tmp_path, fake_slurm
):
    job_dir = tmp_path / "job"
    assert runner.invoke(app, ["slurm", "submit", *WIDE_SWEEP, "--shards", "4", "--dir", str(job_dir)]).exit_code == 0
    # Shard 0 was cancelled; shards 2 and 3 are still pending, shard 1 running; the first merge waits.
    (fake_slurm / "squeue.out").write_text("101_1|RUNNING\n101_2|PENDING\n101_3|PENDING\n102|PENDING\n")
    refused = runner.invoke(app, ["slurm", "resubmit", "--dir", str(job_dir), "--only", "0,2"])
    assert refused.exit_code == 2 and "shard 2 (job 101_2, PENDING)" in refused.output
    result = runner.invoke(
        app, ["slurm", "resubmit", "--dir", str(job_dir), "--only", "0", "--mem", "3G", "--time", "3:00:00"]
    )
    assert result.exit_code == 0, result.output
    *_, array, merge = sbatch_calls(fake_slurm)
    assert array.startswith("--parsable --array=0 --cpus-per-task=1 --mem=3G --time=3:00:00 ")
    assert merge.startswith("--parsable --dependency=afterany:103:101_1:101_2:101_3 ")  # every shard still to run
    assert (fake_slurm / "scancel.log").read_text().split() == ["102"]  # the old merge no longer waits alone
    assert "cancelled the earlier merge job(s) 102" in result.output
    assert SlurmJob.load(job_dir).resources["mem"] == "3G"
    short = runner.invoke(app, ["slurm", "resubmit", "--dir", str(job_dir), "--only", "0", "--time", "10"])
    assert short.exit_code == 2 and "cannot hold one trial" in short.output


@pytest.fixture(scope="module")
def gnn_endpoint():
    """One gnn service for the module's task runs (each would otherwise start its own)."""
    with EmbeddedServices() as services:
        yield services.endpoint("gnn")


def _task(job_dir: Path, endpoint: str, *extra: str, env: dict | None = None) -> subprocess.Popen:
    """An array task run by hand, as sweep.sbatch runs it (no SLURM: it cannot requeue itself)."""
    args = [*SWEEP, "--endpoint", f"gnn={endpoint}", "--no-warmup", *extra]
    command = [sys.executable, "-m", "orchestrator", "slurm", "task", "--dir", str(job_dir), "--shards", "2",
               "--index", "1", "--publish-every", "1", "--", *args]  # fmt: skip
    (job_dir / "logs").mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        command, cwd=REPO, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip


@pytest.mark.slow  # an orchestrator run in a task process: about 10 s on two idle cores
def test_a_task_publishes_a_whole_store_and_its_state(tmp_path, gnn_endpoint):
    job_dir = tmp_path / "job"
    task = _task(job_dir, gnn_endpoint)
    output, _ = task.communicate(timeout=HANG_S)
    assert task.returncode == 0, output
    published = job_dir / "shard-1.sqlite"
    with sqlite3.connect(published) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # readable on NFS and Lustre
    state = json.loads((job_dir / "shard-1.json").read_text())
    assert state["state"] == "finished" and state["done"] == state["planned"] == len(read_trials(published)) > 0
    local = Path(output.split("; store ", 1)[1].split(",", 1)[0])
    assert not local.parent.exists()  # the node-local copy is gone with the task


@pytest.mark.slow  # as above
def test_a_task_refuses_to_requeue_without_progress_and_publishes_when_stopped(tmp_path, gnn_endpoint):
    job_dir = tmp_path / "job"
    task = _task(job_dir, gnn_endpoint, "--budget", "40", env={"SLURM_ARRAY_JOB_ID": "7", "SLURM_ARRAY_TASK_ID": "1"})
    state_file = job_dir / "shard-1.json"
    deadline = time.monotonic() + HANG_S
    while not state_file.exists():
        assert time.monotonic() < deadline and task.poll() is None
        time.sleep(0.05)
    task.send_signal(signal.SIGUSR1)  # the time limit is near and nothing is stored yet
    while json.loads(state_file.read_text())["state"] != "requeue refused":
        assert time.monotonic() < deadline and task.poll() is None
        time.sleep(0.05)
    assert "no trial was stored in this allocation" in json.loads(state_file.read_text())["last_error"]
    while not (json.loads(state_file.read_text())["done"] or 0) > 0:  # then it goes on, and publishes as it does
        assert time.monotonic() < deadline and task.poll() is None
        time.sleep(0.1)
    task.send_signal(signal.SIGTERM)  # scancel, or the end of the allocation
    output, _ = task.communicate(timeout=HANG_S)
    assert task.returncode == 128 + signal.SIGTERM, output
    state = json.loads(state_file.read_text())
    assert state["state"] == "stopped" and 0 < state["done"] < state["planned"] == 40
    assert len(read_trials(job_dir / "shard-1.sqlite")) == state["done"]  # what it stored, published whole


def test_submit_asks_for_what_the_estimate_says_the_largest_shard_needs(tmp_path, fake_slurm, monkeypatch):
    """--estimate-from prices the shards (cluster docs once said to copy --mem and --time by hand)."""
    from tests.orchestrator.price.helpers import probe, records

    monkeypatch.setenv("NODEGROUND_CACHE", str(tmp_path / "cache"))
    store = tmp_path / "records.sqlite"
    _write_rows(store, pd.concat([records(("texas", "cornell", "wisconsin")), probe()]))
    args = ["slurm", "submit", "--methods", "gcn", "--datasets", "cora,citeseer", "--regimes", "10/10/80,50/25/25"]
    args += ["--budget", "20", "--shards", "2", "--dir", str(tmp_path / "job"), "--estimate-from", str(store)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("estimate of the largest shard"))
    hours, gib = (float(v) for v in re.findall(r"([0-9.]+) (?:h|GiB)", line))
    (array, _merge) = sbatch_calls(fake_slurm)
    mem = int(re.search(r"--mem=(\d+)G", array).group(1))
    seconds = parse_slurm_time(re.search(r"--time=(\S+)", array).group(1))
    assert mem == math.ceil(gib * 1.25 + 4) and seconds >= (hours - 0.005) * 3600 * 1.25 + 300 + 120 - 1
    unpriced = runner.invoke(app, [*args[:3], "gat", *args[4:-4], "--dir", str(tmp_path / "job2"), *args[-2:]])
    assert unpriced.exit_code == 2 and "cannot be priced from these records" in unpriced.output


def _write_rows(path, frame) -> None:
    """Rows of ``tests.orchestrator.price.helpers.records`` as trial records in a store."""
    from orchestrator.store import Store
    from tests.orchestrator.conftest import trial_record

    with Store(path) as store:
        for i, row in enumerate(frame.to_dict("records")):
            store.write(trial_record(f"k{i}", **{k: v for k, v in row.items() if k != "family"}))


@pytest.mark.parametrize(
    "text, message",
    [
        ("[]", "holds an array, not an object"),
        ('{"directory": "x", "shards": "2", "run_args": []}', "'shards' is a string, not a number"),
        ('{"directory": "x", "shards": 2}', "is not one `slurm submit` wrote"),
        ('{"directory": "x", "shards": 2, "run_args": [], "surprise": 1}', "unknown field(s) surprise"),
    ],
)
def test_a_malformed_job_file_is_one_line(tmp_path, text, message):
    """A job.json that is not what `slurm submit` wrote (as the issue's other malformed JSON files: one line)."""
    (tmp_path / "job.json").write_text(text)
    for command in ("status", "resubmit", "merge"):
        result = runner.invoke(app, ["slurm", command, "--dir", str(tmp_path)])
        assert result.exit_code == 2 and result.output.startswith("error: the job file") and message in result.output
        assert result.output.count("\n") == 1 and "unexpected" not in result.output, result.output
