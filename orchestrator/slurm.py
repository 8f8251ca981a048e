"""A sweep as a SLURM job array: one array task per shard, each with its own store, then one merge.

Why plain ``sbatch --array`` and a generated script rather than a submission library such as
submitit: each task is just ``orchestrator run ... --shard I/N`` with its own store, so there is
no Python function to pickle and ship, nothing to unpickle from a results file, and the batch
script a user can read, edit and resubmit by hand is the whole contract with the scheduler.
SLURM does what it is good at: the array, ``--requeue`` for preemption, a signal shortly before
the time limit (the script then requeues its own task), and an ``afterok`` dependency that merges
the shards' stores once every task has succeeded. A task that is cancelled, preempted, requeued
or resubmitted resumes from its store: trials already stored are skipped.

Files under the job directory: ``job.json`` (what was submitted), ``sweep.sbatch`` and
``merge.sbatch`` (the scripts), ``shard-<I>.sqlite`` (one store per task), ``logs/``, and
``all.sqlite`` (the merged store, written by the merge job).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

JOB_FILE = "job.json"
MERGED_STORE = "all.sqlite"
REQUEUE_SIGNAL_S = 120  # seconds before the time limit at which a task requeues itself


class SlurmError(RuntimeError):
    """sbatch (or another SLURM client) is missing or refused the submission."""


@dataclass
class SlurmJob:
    """What `orchestrator slurm submit` submitted; resubmission reads it back from ``job.json``."""

    directory: str
    shards: int
    run_args: list[str]  # the `orchestrator run` flags every task shares (without --shard and --store)
    sbatch_args: list[str] = field(default_factory=list)  # resources: partition, time, cpus, memory, gres
    array_jobs: list[str] = field(default_factory=list)  # job ids of every array submission, oldest first
    merge_jobs: list[str] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return Path(self.directory)

    def save(self) -> None:
        (self.path / JOB_FILE).write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, directory: Path) -> SlurmJob:
        path = Path(directory) / JOB_FILE
        if not path.exists():
            raise FileNotFoundError(
                f"{directory} holds no {JOB_FILE}: it is not a directory made by `orchestrator slurm submit`"
            )
        return cls(**json.loads(path.read_text()))


def orchestrator_command() -> list[str]:
    """How a task calls this orchestrator: the same Python, so the same installation, on every node."""
    return [sys.executable, "-m", "orchestrator"]


def sbatch_resources(
    partition: str | None, time: str | None, cpus_per_task: int, mem: str | None, gres: str | None, extra: list[str]
) -> list[str]:
    """sbatch flags for each task's resources (a GPU request becomes --gres)."""
    args = [f"--cpus-per-task={cpus_per_task}"]
    if partition:
        args.append(f"--partition={partition}")
    if time:
        args.append(f"--time={time}")
    if mem:
        args.append(f"--mem={mem}")
    if gres:
        args.append(f"--gres={gres}")
    return args + list(extra)


def sweep_script(job: SlurmJob) -> str:
    """The array task: run one shard into its own store; requeue itself shortly before the time limit."""
    run = shlex.join([*orchestrator_command(), "run", *job.run_args])
    logs = job.path / "logs"
    return f"""#!/bin/bash
#SBATCH --job-name=nodeground-sweep
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output={logs}/shard-%a.log
#SBATCH --signal=B:USR1@{REQUEUE_SIGNAL_S}
# One shard of a NodeGround sweep (array index = shard index); stores are resumable.
set -uo pipefail
shard="${{SLURM_ARRAY_TASK_ID}}/{job.shards}"
store={shlex.quote(str(job.path))}/shard-${{SLURM_ARRAY_TASK_ID}}.sqlite
requeue() {{
  echo "time limit near: requeueing shard $shard (it resumes from $store)"
  scontrol requeue "${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}"
}}
trap requeue USR1
echo "shard $shard on $(hostname), store $store"
{run} --shard "$shard" --store "$store" &
child=$!
wait "$child"
status=$?
if kill -0 "$child" 2>/dev/null; then wait "$child"; status=$?; fi
exit "$status"
"""


def merge_script(job: SlurmJob) -> str:
    """After every task succeeded: merge the shards' stores into one (idempotent, refuses conflicts)."""
    merge = shlex.join([*orchestrator_command(), "merge", "--into", str(job.path / MERGED_STORE)])
    return f"""#!/bin/bash
#SBATCH --job-name=nodeground-merge
#SBATCH --output={job.path}/logs/merge.log
#SBATCH --open-mode=append
set -euo pipefail
shopt -s nullglob
stores=({shlex.quote(str(job.path))}/shard-*.sqlite)
{merge} "${{stores[@]}}"
"""


def _sbatch(args: list[str]) -> str:
    """Submit with sbatch --parsable; the job id."""
    try:
        done = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise SlurmError("sbatch is not on PATH: run this on a SLURM login node") from None
    if done.returncode != 0:
        raise SlurmError(f"sbatch refused the job: {(done.stderr or done.stdout).strip()}")
    return done.stdout.strip().split(";")[0]


def submit(job: SlurmJob, indices: list[int] | None = None) -> tuple[str, str]:
    """Submit the array (all shards, or ``indices``) and a merge job that runs once they all succeed."""
    (job.path / "logs").mkdir(parents=True, exist_ok=True)
    (job.path / "sweep.sbatch").write_text(sweep_script(job))
    (job.path / "merge.sbatch").write_text(merge_script(job))
    chosen = indices if indices is not None else list(range(job.shards))
    bad = [i for i in chosen if not 0 <= i < job.shards]
    if bad or not chosen:
        raise ValueError(f"shard indices must lie in 0..{job.shards - 1}, got {bad or chosen}")
    array = _sbatch([f"--array={','.join(map(str, chosen))}", *job.sbatch_args, str(job.path / "sweep.sbatch")])
    merge = _sbatch(
        [
            f"--dependency=afterok:{array}",
            "--kill-on-invalid-dep=yes",
            "--cpus-per-task=1",
            str(job.path / "merge.sbatch"),
        ]
    )
    job.array_jobs.append(array)
    job.merge_jobs.append(merge)
    job.save()
    return array, merge
