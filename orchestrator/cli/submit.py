"""`orchestrator submit IMAGE --regimes ... --out BUNDLE`: benchmark a contributed image, sandboxed.

The flags checked as `orchestrator run` checks them, then ``orchestrator.submission.run.benchmark``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from orchestrator.cli.errors import UserError, user_errors
from orchestrator.cli.options import (
    PROTOCOL_HELP,
    BudgetOpt,
    DatasetsOpt,
    RegimesOpt,
    SplitsOpt,
    TimeLimitOpt,
    build_plan,
)
from orchestrator.cli.progress import sweep_with_progress
from orchestrator.cli.validate import SandboxCpusOpt, SandboxEnvOpt, SandboxMemoryOpt, SandboxWeightsOpt, parse_env
from orchestrator.plan import DEFAULT_TIME_LIMIT_S
from orchestrator.protocols import LITE
from orchestrator.services.sandbox import SandboxLimits
from orchestrator.submission.run import Submission, benchmark

console = Console(stderr=True)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@user_errors
def submit(
    image: Annotated[str, typer.Argument(help="The method image to benchmark (a local image, e.g. nodeground/demo).")],
    out: Annotated[Path, typer.Option("--out", help="Bundle directory to write (resumed when it exists).")],
    datasets: DatasetsOpt = None,
    regimes: RegimesOpt = None,
    splits: SplitsOpt = None,
    budget: BudgetOpt = None,
    protocol: Annotated[
        str,
        typer.Option(
            help=f"{PROTOCOL_HELP} A submission runs under one: lite unless told; paper (about 100,000 trials per "
            "method) only by name."
        ),
    ] = LITE.name,
    methods: Annotated[
        str, typer.Option(help="Comma-separated methods of the image (default: every method it describes).")
    ] = "",
    submission_id: Annotated[
        str, typer.Option("--id", help="Submission id; records get origin user:<id> (default: from the image digest).")
    ] = "",
    time_limit: TimeLimitOpt = DEFAULT_TIME_LIMIT_S,
    memory: SandboxMemoryOpt = "8g",
    cpus: SandboxCpusOpt = 2.0,
    weights: SandboxWeightsOpt = None,
    env: SandboxEnvOpt = [],  # noqa: B006
    parallel: Annotated[
        int,
        typer.Option(
            help="Sandboxes side by side, each running one trial at a time on one thread. 0: one a core, as many as "
            "the machine's memory holds at --memory each."
        ),
    ] = 0,
) -> None:
    """Benchmark an image in the sandbox and write a checksummed submission bundle."""
    if submission_id and not _ID.match(submission_id):
        raise UserError(f"--id must be 1-64 characters of letters, digits, . _ -, got {submission_id!r}")
    plan = build_plan(methods or None, datasets, regimes, splits, budget, time_limit, protocol=protocol)
    if parallel < 0:
        raise UserError(f"--parallel must be 0 (one a core) or more, got {parallel}")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a directory")
    request = Submission(
        image=image,
        out=out,
        plan=plan,
        submission_id=submission_id,
        limits=SandboxLimits(memory=memory, cpus=cpus),
        weights=weights,
        env=tuple(parse_env(env).items()),
        parallel=parallel,
    )
    bundle = benchmark(request, say=console.print, run_sweep=sweep_with_progress)
    trials = bundle["trials"]
    typer.echo(
        f"bundle {out}: {trials['total']} trials ({trials['ok']} ok), origin {bundle['origin']}, "
        f"checksum {bundle['checksum']}"
    )
