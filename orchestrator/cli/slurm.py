"""`orchestrator slurm`: a sweep as a SLURM job array (one shard per task), merged once every shard is complete."""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from orchestrator.cli.errors import UserError, user_errors
from orchestrator.cli.merge import PARTIAL_HELP, echo_report
from orchestrator.cli.options import HardwareOpt, ServicesOpt, SweepFlags, flag_groups
from orchestrator.cli.plan import pricing_stores
from orchestrator.cli.specs import plan_specs
from orchestrator.merge import merge_stores
from orchestrator.plan import SweepPlan, make_plan
from orchestrator.price import learn_cost_model, read_records, shard_costs
from orchestrator.slurm import (
    BASE_MEM_GIB,
    DEFAULT_MAX_REQUEUES,
    DEFAULT_PUBLISH_EVERY_S,
    JOB_FILE,
    MEM_PER_TRIAL_GIB,
    MERGED_STORE,
    ShardEstimate,
    ShardState,
    SlurmError,
    SlurmJob,
    Task,
    cancel_pending_merges,
    check_time,
    job_states,
    planned_counts,
    publish,
    queued_tasks,
    restore,
    shard_counts,
    submit,
    sweep_env,
    task_resources,
)
from orchestrator.store import read_merge_state

app = typer.Typer(
    help="Run a sweep as a SLURM job array (one shard per task) and merge the shards' stores.", no_args_is_help=True
)

PartitionOpt = Annotated[str | None, typer.Option(help="sbatch --partition.")]
TimeOpt = Annotated[
    str | None,
    typer.Option(
        help="sbatch --time per task; tasks requeue themselves shortly before it. Refused when it cannot hold one "
        "trial (twice --time-limit plus the requeue margin and start-up)."
    ),
]
CpusOpt = Annotated[int | None, typer.Option(help="sbatch --cpus-per-task (default: one per trial in flight).")]
MemOpt = Annotated[
    str | None,
    typer.Option(
        help=f"sbatch --mem per task, e.g. 16G (default: {BASE_MEM_GIB}G plus {MEM_PER_TRIAL_GIB}G per trial in "
        "flight), so that several tasks share a node."
    ),
]
GresOpt = Annotated[str | None, typer.Option(help="sbatch --gres per task, e.g. gpu:1 (services then see that GPU).")]
SbatchOpt = Annotated[
    list[str], typer.Option(help="Any further sbatch flag, e.g. --sbatch-arg=--account=abc (repeatable).")
]


@dataclasses.dataclass(frozen=True)
class SbatchFlags:
    """Each task's resource request as `submit` and `resubmit` take it (None: not given)."""

    partition: PartitionOpt = None
    time: TimeOpt = None
    cpus_per_task: CpusOpt = None
    mem: MemOpt = None
    gres: GresOpt = None
    sbatch_arg: SbatchOpt = dataclasses.field(default_factory=list)

    def given(self) -> dict[str, object]:
        """The flags given, by their name in the job's saved resources (``extra``: the further sbatch flags)."""
        named = {k: v for k, v in dataclasses.asdict(self).items() if k != "sbatch_arg" and v is not None}
        return named | ({"extra": list(self.sbatch_arg)} if self.sbatch_arg else {})


@app.command("submit")
@user_errors
@flag_groups
def submit_command(
    sweep: SweepFlags,
    shards: Annotated[
        int,
        typer.Option(
            help="Array tasks: the sweep's cells split into this many shards (`orchestrator plan --shards N`)."
        ),
    ],
    directory: Annotated[
        Path,
        typer.Option(
            "--dir", help="Job directory (shared by the nodes): scripts, one store per shard, logs, the merged store."
        ),
    ],
    sbatch: SbatchFlags,
    services: ServicesOpt = "embedded",
    parallel: Annotated[int, typer.Option(help="Trials in flight per task (give each task as many CPUs or GPUs).")] = 1,
    max_requeues: Annotated[
        int, typer.Option(help="Times a task may requeue itself before its time limit (each needs a stored trial).")
    ] = DEFAULT_MAX_REQUEUES,
    publish_every: Annotated[
        float, typer.Option(help="Seconds between publications of a running task's store into the job directory.")
    ] = DEFAULT_PUBLISH_EVERY_S,
    python: Annotated[
        str | None,
        typer.Option(help="The Python every node runs, with this checkout installed (default: this one)."),
    ] = None,
    estimate_from: Annotated[
        list[Path],
        typer.Option(
            "--estimate-from",
            help="Price the shards from this store's records (repeatable; with this machine's cost probe, as "
            "`plan --estimate --from`): --mem and --time not given come from the largest shard's estimate.",
        ),
    ] = [],  # noqa: B006
    hardware: HardwareOpt = None,
) -> None:
    """Submit the sweep as `--shards` array tasks plus a merge job that runs once all of them ended."""
    if parallel < 1 or (sbatch.cpus_per_task is not None and sbatch.cpus_per_task < 1):
        raise UserError("--cpus-per-task and --parallel must be at least 1")
    if max_requeues < 0 or not publish_every > 0:
        raise UserError("--max-requeues must be at least 0 and --publish-every a positive number of seconds")
    sweep_plan = sweep.plan()  # checked now
    make_plan(sweep_plan, plan_specs(sweep_plan.methods, {})).check_shards(shards)  # no empty array task
    estimate = shard_estimate(sweep_plan, shards, parallel, estimate_from, hardware) if estimate_from else None
    resources = task_resources(
        parallel,
        sbatch.cpus_per_task,
        sbatch.mem,
        sbatch.time,
        sbatch.partition,
        sbatch.gres,
        sbatch.sbatch_arg,
        estimate,
    )
    check_time(resources.time, sweep.time_limit)
    job = SlurmJob(
        str(_fresh_directory(directory)),
        shards,
        _run_args(sweep, sweep_plan, services, parallel),
        resources.sbatch_args(),
        resources=dataclasses.asdict(resources),
        time_limit=sweep.time_limit,
        python=python or sys.executable,
        env=sweep_env(),
        max_requeues=max_requeues,
        publish_every=publish_every,
    )
    try:
        array, merge = submit(job)
    except SlurmError as exc:
        raise UserError(str(exc)) from None
    typer.echo(f"submitted array job {array} ({shards} shard(s); {' '.join(job.sbatch_args)}) and merge job {merge}")
    typer.echo(f"stores: {job.path}/shard-<I>.sqlite; merged: {job.path / MERGED_STORE}; logs: {job.path / 'logs'}")
    typer.echo(f"progress: orchestrator slurm status --dir {job.path}")


def _run_args(sweep: SweepFlags, plan: SweepPlan, services: str, parallel: int) -> list[str]:
    """The `orchestrator run` flags every task runs its shard with: the sweep as checked, its names resolved."""
    return [
        "--methods",
        sweep.methods,
        "--datasets",
        ",".join(plan.datasets),
        "--regimes",
        ",".join(plan.regimes),
        "--splits",
        ",".join(map(str, plan.splits)),
        "--budget",
        str(plan.budget),
        "--time-limit",
        str(sweep.time_limit),
        "--services",
        services,
        "--parallel",
        str(parallel),
        *(["--protocol", sweep.protocol] if sweep.protocol else []),
    ]


def _fresh_directory(directory: Path) -> Path:
    """The job directory, created; refused when it holds a submitted sweep already (resubmit resumes that)."""
    directory = directory.resolve()
    if (directory / JOB_FILE).exists():
        raise UserError(
            f"{directory} already holds a submitted sweep: resume it with "
            f"`orchestrator slurm resubmit --dir {directory}`"
        )
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def shard_estimate(
    sweep: SweepPlan, shards: int, parallel: int, stores: list[Path], hardware: str | None
) -> ShardEstimate:
    """The largest shard's needs by the estimate: the upper ends of its 80% intervals, hours per trial in flight."""
    computed = make_plan(sweep, plan_specs(sweep.methods, {}))
    costs = shard_costs(
        computed, learn_cost_model(read_records(pricing_stores(sweep.methods, stores, [], "auto")), hardware), shards
    )
    unpriced = sum(c.trials - c.estimated_trials for c in costs)
    if unpriced:
        raise UserError(
            f"--estimate-from: {unpriced:,} trials cannot be priced from these records (methods or graphs they lack); "
            "add records (`orchestrator calibrate --methods ...`) or give --mem and --time"
        )
    peak = max((c.peak_bytes_high or c.peak_bytes or 0.0) for c in costs)
    hours = max((c.hours_high or c.hours) for c in costs) / max(1, parallel)
    typer.echo(
        f"estimate of the largest shard (80% upper ends): {hours:,.2f} h per trial in flight, {peak / 2**30:,.2f} GiB"
    )
    return ShardEstimate(int(peak), hours)


@app.command("resubmit")
@user_errors
@flag_groups
def resubmit_command(
    directory: Annotated[Path, typer.Option("--dir", help="The job directory of `orchestrator slurm submit`.")],
    sbatch: SbatchFlags,
    only: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated shard indices to resubmit (default: every shard that is neither complete nor queued)."
        ),
    ] = None,
) -> None:
    """Resubmit shards (after a cancel, a failure or a refused requeue): each resumes from its published store, and a
    new merge waits for every shard still to run. Resource flags override those of the submission."""
    job = SlurmJob.load(directory.resolve())
    try:
        wanted = [int(i) for i in only.split(",")] if only else None
    except ValueError:
        raise UserError(f"--only must be comma-separated shard indices, got {only!r}") from None
    if wanted is not None and (bad := [i for i in wanted if not 0 <= i < job.shards]):
        raise UserError(f"--only: shard indices must lie in 0..{job.shards - 1}, got {bad}")
    merged = {**(job.resources or {"cpus_per_task": 1, "extra": []}), **sbatch.given()}
    resources = task_resources(
        1,
        merged.get("cpus_per_task"),
        merged.get("mem"),
        merged.get("time"),
        merged.get("partition"),
        merged.get("gres"),
        merged.get("extra", []),
    )
    check_time(resources.time, job.time_limit)
    try:
        states = job_states(job)
    except SlurmError as exc:
        raise UserError(str(exc)) from None
    queued = queued_tasks(job, states)
    busy = [i for i in wanted or [] if i in queued]
    if busy:
        raise UserError(
            "still queued or running: "
            + ", ".join(f"shard {i} (job {queued[i]}, {states[queued[i]]})" for i in busy)
            + "; two tasks of one shard would run its trials twice: wait for it, or scancel it first"
        )
    if wanted is None:
        wanted = [i for i in range(job.shards) if i not in queued and not _complete(job, i)]
    job.resources, job.sbatch_args = dataclasses.asdict(resources), resources.sbatch_args()
    job.env = sweep_env(job.env)
    cancelled = cancel_pending_merges(job, states)
    try:
        array, merge = submit(job, wanted, after=list(queued.values()))
    except SlurmError as exc:
        raise UserError(str(exc)) from None
    waits = ", ".join(f"shard {i} ({t})" for i, t in sorted(queued.items()))
    typer.echo(
        (f"submitted array job {array} (shard(s) {','.join(map(str, wanted))})" if array else "no shard to resubmit")
        + f" and merge job {merge}"
        + (f", which also waits for {waits}" if waits else "")
        + (f"; cancelled the earlier merge job(s) {', '.join(cancelled)}" if cancelled else "")
    )


def _complete(job: SlurmJob, index: int) -> bool:
    done, planned = shard_counts(job.shard_store(index), index)
    return planned is not None and done == planned


@app.command("status")
@user_errors
def status_command(
    directory: Annotated[Path, typer.Option("--dir", help="The job directory of `orchestrator slurm submit`.")],
) -> None:
    """Per shard: its SLURM state, trials done of planned, requeues and last error; then the merge."""
    job = SlurmJob.load(directory.resolve())
    try:
        states = job_states(job)
    except SlurmError:
        states = {}  # no SLURM client here: what the tasks published still tells most of it
    planned = planned_counts(job)
    table = Table(title=f"{job.path}: {job.shards} shard(s)")
    for column in ("shard", "job", "state", "trials", "requeues", "updated", "last error"):
        table.add_column(column, justify="right" if column in ("shard", "trials", "requeues") else "left")
    total_done = total_planned = 0
    for index in range(job.shards):
        mine = ShardState.load(job.shard_state(index))
        done, known = shard_counts(job.shard_store(index), index)
        expected = known if known is not None else planned.get(index)
        task = job.task_id(index)
        slurm = states.get(task or "", "")
        state = " / ".join(s for s in (slurm, mine.state if mine else "") if s) or "not started"
        total_done += done or 0
        total_planned += expected or 0
        table.add_row(
            str(index),
            task or "",
            state,
            f"{done if done is not None else '?'}/{expected if expected is not None else '?'}",
            str(mine.restarts) if mine else "",
            mine.updated_at if mine else "",
            (mine.last_error or "") if mine else "",
        )
    console = Console(width=200)
    console.print(table)
    merged = read_merge_state(job.path / MERGED_STORE)
    merge_job = job.merge_jobs[-1] if job.merge_jobs else None
    verdict = (
        f"{merged['state']} ({merged.get('summary', '')})"
        if merged
        else ("not written yet" if not (job.path / MERGED_STORE).exists() else "written, no plan recorded")
    )
    console.print(
        f"trials: {total_done} of {total_planned or '?'} planned stored; merge job {merge_job or '-'}: "
        f"{states.get(merge_job or '', 'unknown to SLURM')}; {MERGED_STORE}: {verdict}"
    )


@app.command("task", hidden=True)
@user_errors
def task_command(
    directory: Annotated[Path, typer.Option("--dir", help="The job directory.")],
    shards: Annotated[int, typer.Option(help="The sweep's shard count.")],
    run_args: Annotated[list[str], typer.Argument(help="The `orchestrator run` flags after --.")],
    index: Annotated[
        int | None, typer.Option(help="The shard (default: SLURM_ARRAY_TASK_ID).", envvar="SLURM_ARRAY_TASK_ID")
    ] = None,
    max_requeues: Annotated[int, typer.Option()] = DEFAULT_MAX_REQUEUES,
    publish_every: Annotated[float, typer.Option()] = DEFAULT_PUBLISH_EVERY_S,
) -> None:
    """What each array task of sweep.sbatch runs: one shard into a node-local store, published to the job directory."""
    if index is None or not 0 <= index < shards:
        raise UserError(f"the shard index must lie in 0..{shards - 1} (SLURM_ARRAY_TASK_ID), got {index}")
    code = Task(directory.resolve(), shards, index, list(run_args), max_requeues, publish_every).run()
    raise typer.Exit(code)


@app.command("merge")
@user_errors
def merge_command(
    directory: Annotated[Path, typer.Option("--dir", help="The job directory of `orchestrator slurm submit`.")],
    partial: Annotated[bool, typer.Option("--partial", help=PARTIAL_HELP)] = False,
) -> None:
    """Merge the shards' published stores into all.sqlite (what merge.sbatch runs): refused while a shard is missing
    trials, unless --partial."""
    job = SlurmJob.load(directory.resolve())
    stores = [job.shard_store(i) for i in range(job.shards) if job.shard_store(i).exists()]
    if not stores:
        raise UserError(f"no shard of {job.path} has published a store yet; nothing was merged")
    target = job.path / MERGED_STORE
    with tempfile.TemporaryDirectory(prefix="nodeground-merge-") as scratch:
        local = Path(scratch) / MERGED_STORE  # merged on local disk, published whole (docs/cluster.md)
        if target.exists():
            restore(target, local)
        report = merge_stores(local, stores, partial=partial)  # a refusal raises: nothing is published
        publish(local, target)
    echo_report(report, len(stores), target, "refuse")
    absent = [i for i in range(job.shards) if not job.shard_store(i).exists()]
    if absent:
        typer.echo(f"shard(s) {', '.join(map(str, absent))} published no store")
