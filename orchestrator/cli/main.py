"""The `orchestrator` command: registers one module per command group."""

from __future__ import annotations

import typer

from orchestrator.cli import datasets as datasets_cli
from orchestrator.cli import export as export_cli
from orchestrator.cli import merge as merge_cli
from orchestrator.cli import methods as methods_cli
from orchestrator.cli import plan as plan_cli
from orchestrator.cli import report as report_cli
from orchestrator.cli import run as run_cli
from orchestrator.cli import slurm as slurm_cli
from orchestrator.cli import submit as submit_cli
from orchestrator.cli import validate as validate_cli
from orchestrator.cli import weights as weights_cli
from orchestrator.cli.errors import Commands

app = typer.Typer(
    name="orchestrator",
    help="NodeGround: benchmark graph foundation models against tuned supervised methods.",
    cls=Commands,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

app.command("run")(run_cli.run)
app.command("show")(run_cli.show)
app.command("plan")(plan_cli.plan)
app.command("backtest")(plan_cli.backtest_command)
app.command("export")(export_cli.export)
app.command("merge")(merge_cli.merge)
app.add_typer(datasets_cli.app, name="datasets")
app.command("report")(report_cli.report)
app.add_typer(methods_cli.app, name="methods")
app.command("validate")(validate_cli.validate)
app.command("submit")(submit_cli.submit)
app.add_typer(weights_cli.app, name="weights")
app.add_typer(slurm_cli.app, name="slurm")
