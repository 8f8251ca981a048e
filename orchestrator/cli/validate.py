"""`orchestrator validate IMAGE_OR_ENDPOINT`: check a method service against the contract.

An endpoint (``host:port`` or ``unix:/path``) is checked as it runs; an image
is started in the sandbox (no network, read-only root, no capabilities,
limits; see ``orchestrator/services/sandbox.py``) and removed afterwards.
Prints one row per check and exits 1 when any fails.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from orchestrator.cli.errors import UserError, user_errors
from orchestrator.conformance import FAIL, PASS, REFUSED, SKIP, CheckResult, Options, run_checks

_ENDPOINT = re.compile(r"^(unix:.+|(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.\-]+):\d{1,5})$")


def is_endpoint(target: str) -> bool:
    """``host:port`` / ``[v6]:port`` / ``unix:/path`` are endpoints; anything else names an image."""
    return bool(_ENDPOINT.match(target)) and "/" not in target.split(":", 1)[0]


def results_table(target: str, results: list[CheckResult]) -> Table:
    table = Table(title=f"conformance: {target}", show_lines=False)
    table.add_column("check")
    table.add_column("result")
    table.add_column("s", justify="right")
    table.add_column("detail", overflow="fold")
    style = {PASS: "green", FAIL: "bold red", REFUSED: "cyan"}
    for r in results:
        table.add_row(
            escape(r.name),
            f"[{style.get(r.status, 'yellow')}]{r.status.upper()}[/]",
            f"{r.seconds:.2f}",
            escape(r.detail),
        )
    return table


# The sandbox an image runs in (``orchestrator.services.sandbox``), as `validate` and `submit` set it.
SandboxMemoryOpt = Annotated[str, typer.Option(help="Memory limit of the image's sandbox.")]
SandboxCpusOpt = Annotated[float, typer.Option(help="CPU limit of the image's sandbox.")]
SandboxWeightsOpt = Annotated[
    Path | None, typer.Option(help="Weights directory, mounted read-only at /weights in the image's sandbox.")
]
SandboxEnvOpt = Annotated[
    list[str],
    typer.Option(
        "--env",
        help="KEY=VALUE set in the image's sandbox (repeatable), e.g. NODEGROUND_RANDOM_INIT_WEIGHTS=1 for a GFM "
        "without its weights (its results then say weights_official: false).",
    ),
]


def parse_env(pairs: list[str]) -> dict[str, str]:
    """``["K=V", ...]`` -> ``{"K": "V"}``; a pair without ``=`` or with an empty key is a user error."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--env takes KEY=VALUE, got {pair!r}")
        out[key.strip()] = value
    return out


@user_errors
def validate(
    target: Annotated[
        str,
        typer.Argument(help="A local image (e.g. nodeground/demo) or a running endpoint (HOST:PORT or unix:/path)."),
    ],
    method: Annotated[
        list[str],
        typer.Option("--method", help="Check only this method (repeatable; default: every method described)."),
    ] = [],  # noqa: B006
    # It catches a fit that never answers: default-config fits on the check graphs take up to
    # 160 s on 2 idle cores (NAGphormer, large graph), so the default leaves room for a loaded host.
    call_timeout: Annotated[float, typer.Option(help="gRPC deadline of each fit/predict call, seconds.")] = 900.0,
    deadline: Annotated[float, typer.Option(help="Time limit given to the deadline check's fit, seconds.")] = 1.0,
    grace: Annotated[
        float, typer.Option(help="How long past that limit the service may take to answer, seconds.")
    ] = 10.0,
    memory: SandboxMemoryOpt = "4g",
    cpus: SandboxCpusOpt = 2.0,
    weights: SandboxWeightsOpt = None,
    env: SandboxEnvOpt = [],  # noqa: B006
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the results as JSON here.")] = None,
) -> None:
    """Check a method image or endpoint against the NodeGround service contract; exit 1 on any failure."""
    if call_timeout <= 0 or deadline <= 0 or grace <= 0:
        raise UserError("--call-timeout, --deadline and --grace must be positive")
    environment = parse_env(env)
    options = Options(call_timeout=call_timeout, deadline=deadline, grace=grace, methods=tuple(method))
    console = Console(width=160)
    sandbox_info = None
    if is_endpoint(target):
        results = run_checks(target, options)
    else:
        from orchestrator.services.sandbox import Sandbox, SandboxError, SandboxLimits

        try:
            with Sandbox(target, SandboxLimits(memory=memory, cpus=cpus), weights=weights, env=environment) as sandbox:
                console.print(
                    f"started {target} ({sandbox.info['id'][:19]}) in the sandbox: no network, read-only root, caps "
                    "dropped"
                )
                results = run_checks(sandbox.endpoint, options)
                sandbox_info = {"image": sandbox.info, "limits": sandbox.applied()}
                if any(r.status == FAIL for r in results):
                    logs = sandbox.logs(30).strip()
                    if logs:
                        console.print(
                            "[dim]last lines of the container log:[/]\n" + logs, markup=False, highlight=False
                        )
        except SandboxError as exc:
            raise UserError(str(exc)) from None
    console.print(results_table(target, results))
    failed = [r for r in results if r.status == FAIL]
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(
            json.dumps(
                {
                    "target": target,
                    "passed": not failed,
                    "sandbox": sandbox_info,
                    "checks": [r.__dict__ for r in results],
                },
                indent=2,
                default=str,
            )
        )
    if failed:
        console.print(f"[bold red]{len(failed)} of {len(results)} checks failed[/]")
        raise typer.Exit(1)
    console.print(f"[green]{summary(results)}[/]")


def summary(results: list[CheckResult]) -> str:
    """``all N checks passed``, or how many of them were refused by the method's memory estimate or skipped."""
    counts = {status: sum(r.status == status for r in results) for status in (PASS, REFUSED, SKIP)}
    if counts[PASS] == len(results):
        return f"all {len(results)} checks passed"
    parts = [f"{counts[PASS]} passed"]
    if counts[REFUSED]:
        parts.append(f"{counts[REFUSED]} refused by the method's memory estimate (RESOURCE_EXHAUSTED)")
    if counts[SKIP]:
        parts.append(f"{counts[SKIP]} skipped")
    return f"no check failed: {len(results)} checks, " + ", ".join(parts)
