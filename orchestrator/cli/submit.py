"""`orchestrator submit IMAGE --regimes ... --out BUNDLE`: benchmark a contributed image, sandboxed.

Runs the benchmark protocol (the same sweep as `orchestrator run`: shared
splits, default config then sampled configs, validation-only selection,
orchestrator-side metrics) against the image started in the sandbox, and
writes a bundle (``orchestrator/conformance/bundle.py``) whose rows carry
origin ``user:<id>`` and the sandbox limits that applied. Rerunning with the
same --out resumes.
"""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from orchestrator.cli.errors import UserError, user_errors
from orchestrator.cli.run import MAX_BUDGET, _csv, check_count, check_time_limit, parse_splits
from orchestrator.cli.validate import parse_env
from orchestrator.conformance.bundle import SUBMISSION, TRIALS, finalize_store, seal
from orchestrator.conformance.guard import GuardedClient
from orchestrator.data.registry import resolve_name, tasks
from orchestrator.data.splits import ALL_REGIMES
from orchestrator.plan import DEFAULT_TIME_LIMIT_S, SweepPlan
from orchestrator.records import STATUS_OK
from orchestrator.submission import SandboxDirectory, SubmissionStore, exact_command, hardware
from orchestrator.sweep import Sweep

console = Console(stderr=True)
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@user_errors
def submit(
    image: Annotated[str, typer.Argument(help="The method image to benchmark (a local image, e.g. nodeground/demo).")],
    out: Annotated[Path, typer.Option("--out", help="Bundle directory to write (resumed when it exists).")],
    regimes: Annotated[
        str, typer.Option(help=f"Comma-separated label regimes: {', '.join(ALL_REGIMES)}.")
    ] = "10/10/80,50/25/25",
    datasets: Annotated[
        str, typer.Option(help="Comma-separated datasets; 'all' = the full catalog (the protocol).")
    ] = "all",
    splits: Annotated[str, typer.Option(help="Comma-separated split indices (0-4).")] = "0,1,2,3,4",
    budget: Annotated[
        int, typer.Option(help="Trials per (method, dataset, regime, split): default config + budget-1 sampled.")
    ] = 201,
    methods: Annotated[
        str, typer.Option(help="Comma-separated methods of the image (default: every method it describes).")
    ] = "",
    submission_id: Annotated[
        str, typer.Option("--id", help="Submission id; records get origin user:<id> (default: from the image digest).")
    ] = "",
    time_limit: Annotated[
        float, typer.Option(help="Time limit of each fit and each predict, in seconds.")
    ] = DEFAULT_TIME_LIMIT_S,
    memory: Annotated[str, typer.Option(help="Sandbox memory limit.")] = "8g",
    cpus: Annotated[float, typer.Option(help="Sandbox CPU limit.")] = 2.0,
    weights: Annotated[Path | None, typer.Option(help="Weights directory, mounted read-only at /weights.")] = None,
    env: Annotated[
        list[str],
        typer.Option(
            "--env",
            help="KEY=VALUE set in the sandbox (repeatable), e.g. NODEGROUND_RANDOM_INIT_WEIGHTS=1 for a GFM "
            "without its weights (its records then say weights_official: false).",
        ),
    ] = [],  # noqa: B006
) -> None:
    """Benchmark an image in the sandbox and write a checksummed submission bundle."""
    from google.protobuf.json_format import MessageToDict

    from contract.v1 import method_service_pb2 as pb
    from orchestrator.services.sandbox import Sandbox, SandboxError, SandboxLimits

    check_count("budget", budget, MAX_BUDGET)
    check_time_limit(time_limit)
    if submission_id and not _ID.match(submission_id):
        raise UserError(f"--id must be 1-64 characters of letters, digits, . _ -, got {submission_id!r}")
    regime_names = _csv(regimes, "regimes")
    for regime in regime_names:
        if regime not in ALL_REGIMES:
            raise UserError(f"unknown regime {regime!r}; choose from {', '.join(ALL_REGIMES)}")
    dataset_names = (
        [t["name"] for t in tasks()]
        if datasets.strip() == "all"
        else [resolve_name(d) for d in _csv(datasets, "datasets")]
    )
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    limits = SandboxLimits(memory=memory, cpus=cpus)
    try:
        sandbox = Sandbox(image, limits, weights=weights, env=parse_env(env))
        sandbox.start()
    except SandboxError as exc:
        raise UserError(str(exc)) from None
    try:
        sandbox.wait_healthy()
        ident = submission_id or sandbox.info["id"].split(":")[-1][:12]
        applied = sandbox.applied()
        probe = GuardedClient(sandbox.endpoint)
        try:
            described = probe._stub.Describe(pb.DescribeRequest(), timeout=60.0)
        finally:
            probe.close()
        hosted = [m.name for m in described.methods]
        chosen = _csv(methods, "methods") if methods else hosted
        unknown = [m for m in chosen if m not in hosted]
        if unknown:
            raise UserError(f"{image} does not host {', '.join(unknown)}; it hosts {', '.join(hosted)}")
        plan = SweepPlan(
            methods=tuple(chosen),
            datasets=tuple(dataset_names),
            regimes=tuple(regime_names),
            splits=tuple(parse_splits(splits)),
            budget=budget,
            time_limit=time_limit,
        )
        extra = {"submission": ident, "image": image, "image_id": sandbox.info["id"], "sandbox": applied}
        directory = SandboxDirectory(sandbox)
        store = SubmissionStore(out / TRIALS, f"user:{ident}", extra)
        try:
            console.print(
                f"benchmarking {image} as user:{ident}: {len(chosen)} method(s) x {len(dataset_names)} dataset(s) x "
                f"{len(regime_names)} regime(s) x {len(plan.splits)} split(s), budget {budget}, sandboxed"
            )
            records = Sweep(plan, store, directory).run()
            frame = store.frame()
        finally:
            directory.close()
            store.close()
    finally:
        sandbox.stop()
    finalize_store(out / TRIALS)
    submission = {
        "format": "nodeground-submission-v1",
        "id": ident,
        "origin": f"user:{ident}",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "image": {k: v for k, v in sandbox.info.items()},
        "describe": MessageToDict(described, preserving_proto_field_name=True),
        "hardware": hardware(),
        "command": exact_command(
            image,
            {
                "out": out,
                "regimes": ",".join(plan.regimes),
                "datasets": ",".join(plan.datasets),
                "splits": ",".join(map(str, plan.splits)),
                "budget": budget,
                "methods": ",".join(plan.methods),
                "id": ident,
                "time_limit": time_limit,
                "memory": memory,
                "cpus": cpus,
                "weights": weights,
                "env": env,
            },
        ),
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "sandbox": applied,
        "protocol": {
            "methods": list(plan.methods),
            "datasets": list(plan.datasets),
            "regimes": list(plan.regimes),
            "splits": list(plan.splits),
            "budget": plan.budget,
            "time_limit": plan.time_limit,
        },
        "trials": {"total": int(len(frame)), "ok": int((frame["status"] == STATUS_OK).sum()), "this_run": len(records)},
    }
    (out / SUBMISSION).write_text(json.dumps(submission, indent=2, sort_keys=True, default=str) + "\n")
    checksum = seal(out)
    typer.echo(
        f"bundle {out}: {submission['trials']['total']} trials ({submission['trials']['ok']} ok), origin "
        f"user:{ident}, checksum {checksum}"
    )
