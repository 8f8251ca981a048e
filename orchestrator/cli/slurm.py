"""`orchestrator slurm`: a sweep as a SLURM job array of shards, merged when every shard succeeded."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli.errors import UserError, user_errors
from orchestrator.cli.run import SERVICES_HELP, TIME_LIMIT_HELP, build_plan
from orchestrator.plan import DEFAULT_TIME_LIMIT_S
from orchestrator.slurm import MERGED_STORE, SlurmError, SlurmJob, sbatch_resources, submit

app = typer.Typer(
    help="Run a sweep as a SLURM job array (one shard per task) and merge the shards' stores.", no_args_is_help=True
)


@app.command("submit")
@user_errors
def submit_command(
    methods: Annotated[str, typer.Option(help="Comma-separated method names, as for `run`.")],
    datasets: Annotated[str, typer.Option(help="Comma-separated dataset names, as for `run`.")],
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
    regimes: Annotated[str, typer.Option(help="Comma-separated label regimes, as for `run`.")] = "10/10/80",
    splits: Annotated[str, typer.Option(help="Comma-separated split indices (0-4).")] = "0",
    budget: Annotated[int, typer.Option(help="Trials per cell, as for `run`.")] = 1,
    time_limit: Annotated[float, typer.Option(help=TIME_LIMIT_HELP)] = DEFAULT_TIME_LIMIT_S,
    services: Annotated[str, typer.Option(help=SERVICES_HELP)] = "embedded",
    parallel: Annotated[int, typer.Option(help="Trials in flight per task (give each task as many CPUs or GPUs).")] = 1,
    partition: Annotated[str | None, typer.Option(help="sbatch --partition.")] = None,
    time: Annotated[
        str | None, typer.Option(help="sbatch --time per task (tasks requeue themselves shortly before it).")
    ] = None,
    cpus_per_task: Annotated[int, typer.Option(help="sbatch --cpus-per-task.")] = 1,
    mem: Annotated[str | None, typer.Option(help="sbatch --mem per task, e.g. 16G.")] = None,
    gres: Annotated[
        str | None, typer.Option(help="sbatch --gres per task, e.g. gpu:1 (services then see that GPU).")
    ] = None,
    sbatch_arg: Annotated[
        list[str], typer.Option(help="Any further sbatch flag, e.g. --sbatch-arg=--account=abc (repeatable).")
    ] = [],  # noqa: B006
) -> None:
    """Submit the sweep as `--shards` array tasks plus a merge job that runs after all of them succeed."""
    if shards < 1:
        raise UserError(f"--shards must be at least 1, got {shards}")
    if cpus_per_task < 1 or parallel < 1:
        raise UserError("--cpus-per-task and --parallel must be at least 1")
    build_plan(methods, datasets, regimes, splits, budget, time_limit)  # every flag checked before anything is queued
    run_args = ["--methods", methods, "--datasets", datasets, "--regimes", regimes, "--splits", splits,
                "--budget", str(budget), "--time-limit", str(time_limit), "--services", services,
                "--parallel", str(parallel)]  # fmt: skip
    directory = directory.resolve()
    if (directory / "job.json").exists():
        raise UserError(
            f"{directory} already holds a submitted sweep: resume it with `orchestrator slurm resubmit --dir "
            f"{directory}`"
        )
    directory.mkdir(parents=True, exist_ok=True)
    job = SlurmJob(
        str(directory), shards, run_args, sbatch_resources(partition, time, cpus_per_task, mem, gres, sbatch_arg)
    )
    _submit(job, None)


@app.command("resubmit")
@user_errors
def resubmit_command(
    directory: Annotated[Path, typer.Option("--dir", help="The job directory of `orchestrator slurm submit`.")],
    only: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated shard indices to resubmit (default: all; finished shards skip their stored trials)."
        ),
    ] = None,
) -> None:
    """Resubmit shards of a sweep (after a cancel or a failure): each resumes from its own store, then the merge
    reruns."""
    job = SlurmJob.load(directory.resolve())
    try:
        indices = [int(i) for i in only.split(",")] if only else None
    except ValueError:
        raise UserError(f"--only must be comma-separated shard indices, got {only!r}") from None
    _submit(job, indices)


def _submit(job: SlurmJob, indices: list[int] | None) -> None:
    try:
        array, merge = submit(job, indices)
    except SlurmError as exc:
        raise UserError(str(exc)) from None
    typer.echo(
        f"submitted array job {array} ({len(indices) if indices else job.shards} shard(s)) and merge job {merge}"
    )
    typer.echo(f"stores: {job.path}/shard-<I>.sqlite; merged: {job.path / MERGED_STORE}; logs: {job.path / 'logs'}")
