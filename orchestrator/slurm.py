"""A sweep as a SLURM job array: one array task per shard, each with its own store, then one merge.

Why plain ``sbatch --array`` and a generated script rather than a submission library such as
submitit: each task is just ``orchestrator run ... --shard I/N`` with its own store, so there is
no Python function to pickle and ship, nothing to unpickle from a results file, and the batch
script a user can read, edit and resubmit by hand is the whole contract with the scheduler.
SLURM does what it is good at: the array, ``--requeue`` for preemption, a signal shortly before
the time limit (the task then requeues itself, when it made progress and has requeues left), and
an ``afterany`` dependency that runs the merge once every task has ended; the merge publishes
``all.sqlite`` only when every planned trial has an outcome (``orchestrator.merge``).

Resources: every task asks for CPUs (one per trial in flight by default) and memory (a stated
default, or what an estimate of the shard needs: ``task_resources``), so that tasks share a node
instead of each taking all of it; services started by a task take its CPUs as torch threads
(``orchestrator.services.embedded.service_threads``). A ``--time`` that cannot hold one trial (a
fit and a predict, each up to ``--time-limit``, plus the requeue margin and start-up) is refused
before anything is submitted.

Stores and shared file systems: SQLite's write-ahead log needs memory shared between the
processes of one host and locks, which NFS and Lustre do not provide reliably across hosts. So a
task writes its store on the node's own disk (``$TMPDIR``) and *publishes* it into the job
directory: a copy in rollback-journal mode written under a temporary name, then renamed into
place, every ``publish_every`` seconds and whenever the task stops (finished, failed, cancelled,
requeued). Readers (``slurm status``, the merge, a requeued or resubmitted task, which starts from
the published copy) therefore always see a whole store. Trials a task stored after its last
publish and before it was killed without warning (SIGKILL, a node failure) are run again:
nothing is duplicated, nothing else is lost.

Files under the job directory (a file system every node sees): ``job.json`` (what was submitted),
``sweep.sbatch`` and ``merge.sbatch`` (the scripts), ``shard-<I>.sqlite`` (each task's published
store), ``shard-<I>.json`` (its state, for ``slurm status``), ``logs/`` (task and service logs),
and ``all.sqlite`` (the merged store, published by the merge job).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from contract.files import FileRefused, json_field, json_object, read_json
from contract.handshake import PARENT_PID_ENV
from orchestrator.store import connect_read_only, shard_progress

JOB_FILE = "job.json"
MERGED_STORE = "all.sqlite"
REQUEUE_SIGNAL_S = 120  # seconds before the time limit at which a task decides whether to requeue itself
STARTUP_S = 300  # what a task's start may take before its first trial (services, warm-up, planning)
DEFAULT_MAX_REQUEUES = 10  # self-requeues per task (progress is also required for each one)
DEFAULT_PUBLISH_EVERY_S = 300.0  # how often a running task publishes its store into the job directory
BASE_MEM_GIB = 4  # default memory: the orchestrator and data, plus MEM_PER_TRIAL_GIB per trial in flight
MEM_PER_TRIAL_GIB = 4
MERGE_MEM = "2G"  # the merge streams rows through SQLite: its memory does not grow with the sweep
ESTIMATE_HEADROOM = 1.25  # an estimated peak is asked for with this margin (estimates err)
QUEUED_STATES = ("PENDING", "RUNNING", "REQUEUED", "CONFIGURING", "COMPLETING", "SUSPENDED", "RESIZING")
STOP_WAIT_S = 20.0  # how long a stopping task waits for its `orchestrator run` before publishing anyway
_MEMORY = re.compile(r"^[1-9][0-9]*[KMGT]?$")
_NOT_EXPORTED = (PARENT_PID_ENV, "NODEGROUND_HEALTH_FILE", "NODEGROUND_FAMILY")  # set per service, not per sweep


class SlurmError(RuntimeError):
    """sbatch (or another SLURM client) is missing or refused the submission."""


@dataclass(frozen=True)
class ShardEstimate:
    """What the largest shard of a plan is estimated to need (`orchestrator plan --estimate`): the upper ends of the
    80% intervals of its services' peak memory and of its hours per trial in flight (one array shares one request)."""

    peak_memory_bytes: int
    hours: float


@dataclass
class Resources:
    """Each array task's request; ``None`` leaves a value to the partition's default."""

    cpus_per_task: int = 1
    mem: str | None = None
    time: str | None = None
    partition: str | None = None
    gres: str | None = None
    extra: list[str] = field(default_factory=list)

    def sbatch_args(self) -> list[str]:
        """sbatch flags for each task's resources (a GPU request becomes --gres)."""
        args = [f"--cpus-per-task={self.cpus_per_task}"]
        args += [f"--{name}={value}" for name in ("mem", "time", "partition", "gres") if (value := getattr(self, name))]
        return args + list(self.extra)


def default_memory(parallel: int) -> str:
    """The memory a task asks for when no estimate and no --mem is given."""
    return f"{BASE_MEM_GIB + MEM_PER_TRIAL_GIB * max(1, parallel)}G"


def task_resources(
    parallel: int,
    cpus_per_task: int | None = None,
    mem: str | None = None,
    time_: str | None = None,
    partition: str | None = None,
    gres: str | None = None,
    extra: Sequence[str] = (),
    estimate: ShardEstimate | None = None,
) -> Resources:
    """Each task's request: what the user gave, else what an estimate of the largest shard needs, else defaults.

    CPUs: one per trial in flight. Memory: the estimated peak with ``ESTIMATE_HEADROOM`` plus the
    base, else ``default_memory``. Time: the estimated hours with the same headroom plus start-up
    (never less than one trial's worst case, see ``check_time``), else the partition's default.
    """
    if mem is not None and not _MEMORY.match(mem):
        raise ValueError(f"--mem must be a positive size such as 16G, 8000M or 8000 (MB), got {mem!r}")
    if mem is None:
        if estimate is not None:
            gib = estimate.peak_memory_bytes * ESTIMATE_HEADROOM / 2**30 + BASE_MEM_GIB
            mem = f"{math.ceil(gib)}G"
        else:
            mem = default_memory(parallel)
    if time_ is None and estimate is not None:
        time_ = format_slurm_time(estimate.hours * 3600 * ESTIMATE_HEADROOM + STARTUP_S + REQUEUE_SIGNAL_S)
    return Resources(cpus_per_task or max(1, parallel), mem, time_, partition, gres, list(extra))


def parse_slurm_time(value: str) -> float | None:
    """Seconds of a SLURM time ("MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS"); None for unlimited."""
    text = value.strip()
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    days, dash, rest = text.partition("-")
    if not dash:
        days, rest = "0", text
    parts = rest.split(":")
    if not days.isdigit() or not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        raise ValueError(f"--time must be a SLURM time such as 02:00:00, 90 (minutes) or 1-12:00, got {value!r}")
    numbers = [int(p) for p in parts]
    if dash:  # D-HH[:MM[:SS]]
        numbers += [0] * (3 - len(numbers))
        hours, minutes, seconds = numbers
    elif len(numbers) == 3:
        hours, minutes, seconds = numbers
    elif len(numbers) == 2:
        hours, minutes, seconds = 0, *numbers
    else:
        hours, minutes, seconds = 0, numbers[0], 0
    return float(((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds)


def format_slurm_time(seconds: float) -> str:
    total = math.ceil(seconds)
    days, rest = divmod(total, 86400)
    text = f"{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def shortest_time(time_limit: float) -> float:
    """The least --time that holds one trial: a fit and a predict at the time limit, the requeue margin, start-up."""
    return 2 * time_limit + REQUEUE_SIGNAL_S + STARTUP_S


def check_time(time_: str | None, time_limit: float) -> None:
    """Refuse (ValueError, one line) a --time in which a trial at --time-limit cannot finish before the requeue."""
    if time_ is None:
        return
    seconds = parse_slurm_time(time_)
    least = shortest_time(time_limit)
    if seconds is not None and seconds < least:
        raise ValueError(
            f"--time {time_} cannot hold one trial: a fit and a predict may each take --time-limit {time_limit:g} s, "
            f"the task requeues itself {REQUEUE_SIGNAL_S} s before its end and may take {STARTUP_S} s to start, "
            f"so a trial could never finish and the task would requeue forever; give --time {format_slurm_time(least)} "
            "or more, or a smaller --time-limit"
        )


#: A job file's field types as JSON holds them (``SlurmJob.load`` checks each).
_JOB_KINDS: dict[str, type | tuple[type, ...]] = {
    "str": str,
    "int": int,
    "float": (int, float),
    "list": list,
    "dict": dict,
}


@dataclass
class SlurmJob:
    """What `orchestrator slurm submit` submitted; resubmission reads it back from ``job.json``."""

    directory: str
    shards: int
    run_args: list[str]  # the `orchestrator run` flags every task shares (without --shard and --store)
    sbatch_args: list[str] = field(default_factory=list)  # resources: partition, time, cpus, memory, gres
    array_jobs: list[str] = field(default_factory=list)  # job ids of every array submission, oldest first
    merge_jobs: list[str] = field(default_factory=list)
    resources: dict[str, Any] = field(default_factory=dict)  # Resources as given (resubmit overrides fields)
    time_limit: float = 3600.0  # --time-limit of the run, for the --time check on resubmission
    python: str = ""  # the interpreter every node runs (default: the one that submitted)
    env: dict[str, str] = field(default_factory=dict)  # NODEGROUND_* settings written into the scripts
    max_requeues: int = DEFAULT_MAX_REQUEUES
    publish_every: float = DEFAULT_PUBLISH_EVERY_S
    tasks: dict[str, str] = field(default_factory=dict)  # shard index -> the array job that last ran it

    @property
    def path(self) -> Path:
        return Path(self.directory)

    def save(self) -> None:
        write_atomically(self.path / JOB_FILE, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, directory: Path) -> SlurmJob:
        path = Path(directory) / JOB_FILE
        if not path.exists():
            raise FileNotFoundError(
                f"{directory} holds no {JOB_FILE}: it is not a directory made by `orchestrator slurm submit`"
            )
        what = "the job file"
        document = json_object(read_json(path, what), path, what)
        kinds = {f.name: _JOB_KINDS[str(f.type).split("[")[0]] for f in fields(cls)}
        unknown = sorted(set(document) - set(kinds))
        if unknown:
            raise FileRefused(
                f"{what} {path} has unknown field(s) {', '.join(unknown)[:120]}: not one `slurm submit` wrote"
            )
        values = {name: json_field(document, name, kinds[name], path, what) for name in kinds if name in document}
        try:
            return cls(**values)
        except TypeError as exc:  # a field without a default is absent
            raise FileRefused(f"{what} {path} is not one `slurm submit` wrote ({exc})") from None

    def shard_store(self, index: int) -> Path:
        return self.path / f"shard-{index}.sqlite"

    def shard_state(self, index: int) -> Path:
        return self.path / f"shard-{index}.json"

    def task_id(self, index: int) -> str | None:
        array = self.tasks.get(str(index)) or (self.array_jobs[0] if self.array_jobs else None)
        return f"{array}_{index}" if array else None


def sweep_env(saved: dict[str, str] | None = None) -> dict[str, str]:
    """The NODEGROUND_* settings of this shell (over those saved at submission): what every task must see."""
    found = {k: v for k, v in os.environ.items() if k.startswith("NODEGROUND_") and k not in _NOT_EXPORTED}
    return {**(saved or {}), **found}


def _exports(job: SlurmJob) -> str:
    lines = [f"export {name}={shlex.quote(value)}" for name, value in sorted(job.env.items())]
    return "\n".join(lines) if lines else "# (no NODEGROUND_* setting was set when the sweep was submitted)"


def sweep_script(job: SlurmJob) -> str:
    """The array task: `orchestrator slurm task`, which runs one shard and publishes its store."""
    task = shlex.join(
        [
            job.python or sys.executable,
            "-m",
            "orchestrator",
            "slurm",
            "task",
            "--dir",
            str(job.path),
            "--shards",
            str(job.shards),
            "--max-requeues",
            str(job.max_requeues),
            "--publish-every",
            f"{job.publish_every:g}",
            "--",
            *job.run_args,
        ]
    )
    return f"""#!/bin/bash
#SBATCH --job-name=nodeground-sweep
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output={job.path}/logs/shard-%a.log
#SBATCH --signal=B:USR1@{REQUEUE_SIGNAL_S}
# One shard of a NodeGround sweep per array task (array index = shard index). The task runs
# `orchestrator run --shard I/{job.shards}` into a store on this node's disk ($TMPDIR) and publishes it to
# {job.path}/shard-I.sqlite; {REQUEUE_SIGNAL_S} s before the time limit it requeues itself if it stored a
# trial since it started (at most {job.max_requeues} times). Every node runs this Python and checkout, so
# both must be at this path on every node; the settings below are written here rather than left to
# sbatch's environment export (docs/cluster.md).
{_exports(job)}
exec {task}
"""


def merge_script(job: SlurmJob) -> str:
    """After every task ended: merge the shards' stores, publishing all.sqlite only when the sweep is complete."""
    merge = shlex.join([job.python or sys.executable, "-m", "orchestrator", "slurm", "merge", "--dir", str(job.path)])
    return f"""#!/bin/bash
#SBATCH --job-name=nodeground-merge
#SBATCH --output={job.path}/logs/merge.log
#SBATCH --open-mode=append
# Merges {job.path}/shard-*.sqlite into {job.path}/{MERGED_STORE}; refuses (exit 2, naming the shards
# and trials missing) while a shard is incomplete. `orchestrator slurm merge --dir ... --partial`
# publishes an incomplete sweep, marked partial.
{_exports(job)}
exec {merge}
"""


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(args, capture_output=True, text=True, check=False, timeout=120)
    except FileNotFoundError:
        raise SlurmError(f"{args[0]} is not on PATH: run this on a SLURM login node") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{args[0]} did not answer within 120 s") from None


def _sbatch(args: list[str]) -> str:
    """Submit with sbatch --parsable; the job id."""
    done = _run(["sbatch", "--parsable", *args])
    if done.returncode != 0:
        raise SlurmError(f"sbatch refused the job: {(done.stderr or done.stdout).strip()}")
    return done.stdout.strip().split(";")[0]


def write_scripts(job: SlurmJob) -> None:
    (job.path / "logs").mkdir(parents=True, exist_ok=True)
    write_atomically(job.path / "sweep.sbatch", sweep_script(job))
    write_atomically(job.path / "merge.sbatch", merge_script(job))


def submit(job: SlurmJob, indices: list[int] | None = None, after: Sequence[str] = ()) -> tuple[str | None, str]:
    """Submit the array (all shards, or ``indices``; none: only the merge) and a merge job that runs once the array
    and the tasks ``after`` (still queued from earlier submissions) have all ended."""
    write_scripts(job)
    chosen = list(range(job.shards)) if indices is None else indices
    bad = [i for i in chosen if not 0 <= i < job.shards]
    if bad:
        raise ValueError(f"shard indices must lie in 0..{job.shards - 1}, got {bad}")
    array = None
    if chosen:
        array = _sbatch([f"--array={','.join(map(str, chosen))}", *job.sbatch_args, str(job.path / "sweep.sbatch")])
        job.array_jobs.append(array)
        job.tasks.update({str(i): array for i in chosen})
    waits = ([array] if array else []) + list(after)
    merge = _sbatch(
        [
            *([f"--dependency=afterany:{':'.join(waits)}"] if waits else []),
            "--cpus-per-task=1",
            f"--mem={MERGE_MEM}",
            *[a for a in job.sbatch_args if a.startswith(("--partition=", "--account=", "--qos="))],
            str(job.path / "merge.sbatch"),
        ]
    )
    job.merge_jobs.append(merge)
    job.save()
    return array, merge


# ---- what SLURM says ---------------------------------------------------------


def job_states(job: SlurmJob) -> dict[str, str]:
    """The state of every task and merge job of the sweep SLURM still knows: ``"<array>_<i>"`` or ``"<merge>"``.

    squeue answers for queued jobs; sacct (where the cluster keeps accounting) for ended ones.
    """
    ids = set(job.array_jobs) | set(job.merge_jobs)
    states: dict[str, str] = {}
    if not ids:
        return states
    done = _run(["sacct", "-n", "-P", "-X", "-j", ",".join(sorted(ids)), "-o", "JobID,State"])
    if done.returncode == 0:
        for line in done.stdout.splitlines():
            job_id, _, state = line.partition("|")
            if job_id.split("_")[0] in ids and state:
                states[job_id] = state.split()[0]
    queued = _run(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(sorted(ids))])
    if queued.returncode == 0:
        for line in queued.stdout.splitlines():
            job_id, _, state = line.partition("|")
            if job_id.split("_")[0] in ids and state:
                states[job_id] = state.strip()
    return states


def queued_tasks(job: SlurmJob, states: dict[str, str]) -> dict[int, str]:
    """Shards whose latest task is still pending or running: index -> its task id."""
    out = {}
    for index in range(job.shards):
        task = job.task_id(index)
        if task and states.get(task) in QUEUED_STATES:
            out[index] = task
    return out


def cancel_pending_merges(job: SlurmJob, states: dict[str, str]) -> list[str]:
    """Cancel earlier merge jobs still waiting: the new merge waits for every shard still to run."""
    pending = [m for m in job.merge_jobs if states.get(m) == "PENDING"]
    if pending:
        _run(["scancel", *pending])
    return pending


# ---- shard state, for `slurm status` --------------------------------------------


@dataclass
class ShardState:
    """A task's own account of its shard (``shard-<I>.json``), updated whenever it publishes."""

    shard: int
    state: str  # starting | running | finished | failed | stopped | requeued | requeue refused
    job: str | None = None
    host: str = ""
    restarts: int = 0
    done: int | None = None
    planned: int | None = None
    last_error: str | None = None
    updated_at: str = ""

    def save(self, path: Path) -> None:
        self.updated_at = datetime.now(UTC).isoformat(timespec="seconds")
        write_atomically(path, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> ShardState | None:
        try:
            return cls(**read_json(path, "a shard's state"))
        except (OSError, ValueError, TypeError):  # FileRefused is a ValueError: absent, partial or not one
            return None


def shard_counts(store: Path, index: int) -> tuple[int | None, int | None]:
    """(done, planned) trials of shard ``index`` from a published store; None where it does not say."""
    if not store.exists():
        return None, None
    try:
        with contextlib.closing(connect_read_only(store)) as db:
            return shard_progress(db, index)
    except sqlite3.DatabaseError:
        return None, None


def planned_counts(job: SlurmJob) -> dict[int, int]:
    """Every shard's planned trial count, from whichever published store recorded the plan."""
    for index in range(job.shards):
        store = job.shard_store(index)
        if not store.exists():
            continue
        try:
            with contextlib.closing(connect_read_only(store)) as db:
                rows = db.execute("SELECT shard, trials FROM plan_slots WHERE shards = ?", (job.shards,)).fetchall()
        except sqlite3.DatabaseError:
            continue
        if rows:
            return dict(rows)
    return {}


# ---- publishing stores ----------------------------------------------------------


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def copy_store(source: Path, target: Path, journal: str) -> None:
    """A consistent copy of a store (SQLite's backup, readable while a sweep writes it), in journal mode ``journal``,
    written under a temporary name and renamed into place, so a reader never sees half a store."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.copy")
    tmp.unlink(missing_ok=True)
    try:
        with contextlib.closing(connect_read_only(source)) as src, contextlib.closing(sqlite3.connect(tmp)) as dst:
            src.backup(dst)
            dst.execute(f"PRAGMA journal_mode={journal}")
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, target)
        directory = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    finally:
        tmp.unlink(missing_ok=True)


def publish(local: Path, shared: Path) -> None:
    """Publish a node-local store into the job directory (rollback journal: safe to read on NFS and Lustre)."""
    copy_store(local, shared, "DELETE")


def restore(shared: Path, local: Path) -> None:
    """Start a task's node-local store from its published copy (WAL again, as every writer uses)."""
    copy_store(shared, local, "WAL")


# ---- the array task -------------------------------------------------------------


def requeue_decision(stored_since_start: int, restarts: int, max_requeues: int) -> str | None:
    """Why a task near its time limit must not requeue itself (None: it may).

    A task that stored no trial in its whole allocation would do the same again: a trial longer
    than --time, or a start-up that eats it, would requeue forever.
    """
    if stored_since_start <= 0:
        return (
            "no trial was stored in this allocation, so a requeue would loop: give --time more room "
            "(or a smaller --time-limit) and resubmit"
        )
    if restarts >= max_requeues:
        return f"this task already requeued itself {restarts} time(s) (--max-requeues {max_requeues}); resubmit it"
    return None


class Task:
    """One array task: run its shard into a node-local store, publish it, requeue near the time limit."""

    def __init__(
        self,
        job_dir: Path,
        shards: int,
        index: int,
        run_args: list[str],
        max_requeues: int = DEFAULT_MAX_REQUEUES,
        publish_every: float = DEFAULT_PUBLISH_EVERY_S,
        local_root: Path | None = None,
    ) -> None:
        self.job_dir, self.shards, self.index, self.run_args = job_dir, shards, index, run_args
        self.max_requeues, self.publish_every = max_requeues, publish_every
        self.restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
        self.slurm_task = (
            f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ.get('SLURM_ARRAY_TASK_ID', index)}"
            if os.environ.get("SLURM_ARRAY_JOB_ID")
            else None
        )
        root = local_root or Path(os.environ.get("TMPDIR") or tempfile.gettempdir())
        self.local_dir = Path(tempfile.mkdtemp(prefix=f"nodeground-shard-{index}-", dir=root))
        self.local = self.local_dir / f"shard-{index}.sqlite"
        self.shared = job_dir / f"shard-{index}.sqlite"
        self.state = ShardState(index, "starting", self.slurm_task, socket.gethostname(), self.restarts)
        self._near_end = threading.Event()
        self._stop = threading.Event()
        self._child: subprocess.Popen[str] | None = None
        self._baseline = 0

    # what the task stored, from its node-local store
    def _counts(self) -> tuple[int | None, int | None]:
        return shard_counts(self.local, self.index)

    def _stored(self) -> int:
        if not self.local.exists():
            return 0
        try:
            with contextlib.closing(connect_read_only(self.local)) as db:
                return db.execute("SELECT COUNT(*) FROM trials WHERE status != 'unavailable'").fetchone()[0]
        except sqlite3.DatabaseError:
            return 0

    def _publish(self, state: str | None = None) -> None:
        if self.local.exists():
            publish(self.local, self.shared)
            services = self.local_dir / f"{self.local.stem}-services"
            if services.is_dir():
                shutil.copytree(services, self.job_dir / "logs" / services.name, dirs_exist_ok=True)
        self.state.done, self.state.planned = self._counts()
        if state:
            self.state.state = state
        self.state.save(self.job_dir / f"shard-{self.index}.json")

    def _signal(self, signum: int, frame: FrameType | None) -> None:
        (self._near_end if signum == signal.SIGUSR1 else self._stop).set()

    def run(self) -> int:
        """The task's exit code: 0 once every planned trial of the shard has an outcome."""
        signal.signal(signal.SIGUSR1, self._signal)
        signal.signal(signal.SIGTERM, self._signal)
        try:
            if self.shared.exists():
                restore(self.shared, self.local)
            self._baseline = self._stored()
            print(
                f"shard {self.index}/{self.shards} on {socket.gethostname()} (restart {self.restarts}); "
                f"store {self.local}, published to {self.shared}",
                flush=True,
            )
            self._publish("running")
            return self._supervise()
        finally:
            shutil.rmtree(self.local_dir, ignore_errors=True)

    def _supervise(self) -> int:
        command = [
            sys.executable,
            "-m",
            "orchestrator",
            "run",
            *self.run_args,
            "--shard",
            f"{self.index}/{self.shards}",
            "--store",
            str(self.local),
        ]
        self._child = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, errors="replace")
        reader = threading.Thread(target=self._relay, daemon=True)
        reader.start()
        next_publish = time.monotonic() + self.publish_every
        while self._child.poll() is None:
            if self._stop.is_set():
                return self._stopped()
            if self._near_end.is_set():
                self._near_end.clear()
                self._maybe_requeue()
            if time.monotonic() >= next_publish:
                self._publish()
                next_publish = time.monotonic() + self.publish_every
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._child.wait(timeout=0.5)
        reader.join(timeout=5)
        if self._stop.is_set():  # SLURM signals the whole task: the run may have ended before this loop looked
            return self._stopped()
        code = self._child.returncode
        done, planned = self._counts()
        complete = planned is not None and done == planned
        if code != 0 and not self.state.last_error:
            self.state.last_error = f"orchestrator run exited with code {code}"
        self._publish("finished" if complete else "failed")
        if complete and code != 0:
            print(f"shard complete: every planned trial has an outcome (run exited {code}: see above)", flush=True)
        return 0 if complete else (code or 1)

    def _relay(self) -> None:
        """Pass the run's stderr on to the task log, remembering its last error line."""
        assert self._child is not None and self._child.stderr is not None
        for line in self._child.stderr:
            sys.stderr.write(line)
            if line.startswith("error:"):
                self.state.last_error = line.strip()[len("error:") :].strip()
        sys.stderr.flush()

    def _maybe_requeue(self) -> None:
        refused = requeue_decision(self._stored() - self._baseline, self.restarts, self.max_requeues)
        if refused is not None or self.slurm_task is None:
            reason = refused or "not running under SLURM"
            print(f"time limit near; not requeueing: {reason}", flush=True)
            self.state.last_error = f"requeue refused: {reason}"
            self._publish("requeue refused")
            return
        print(f"time limit near: requeueing {self.slurm_task} (it resumes from {self.shared})", flush=True)
        self._publish("requeued")
        done = _run(["scontrol", "requeue", self.slurm_task])
        if done.returncode != 0:
            self.state.last_error = f"scontrol requeue failed: {(done.stderr or done.stdout).strip()}"
            self._publish("requeue refused")

    def _stopped(self) -> int:
        """SLURM is ending the task (cancel, requeue, time limit): stop the run, publish what it stored."""
        assert self._child is not None
        with contextlib.suppress(ProcessLookupError):
            self._child.send_signal(signal.SIGTERM)
        try:
            self._child.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
        self._publish("requeued" if self.state.state == "requeued" else "stopped")
        print(
            f"stopped; {self.state.done} of {self.state.planned} trials stored, published to {self.shared}", flush=True
        )
        return 128 + signal.SIGTERM
