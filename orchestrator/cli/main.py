"""The `orchestrator` command: registers one module per command group."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="orchestrator",
    help="NodeGround: benchmark graph foundation models against tuned supervised methods.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

from orchestrator.cli import datasets as datasets_cli  # noqa: E402
from orchestrator.cli import report as report_cli  # noqa: E402
from orchestrator.cli import run as run_cli  # noqa: E402

app.command("run")(run_cli.run)
app.command("show")(run_cli.show)
app.add_typer(datasets_cli.app, name="datasets")
app.command("report")(report_cli.report)
