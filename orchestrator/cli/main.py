"""The `orchestrator` command: registers one module per command group.

A command's module (and what it imports: pandas, gRPC, the data loaders) is imported only when that
command runs, so `orchestrator --help`, `orchestrator COMMAND --help` of another command and a
mistyped command name cost the start of Python and typer, not the whole orchestrator. The top-level
help lists each command's own first docstring line, kept here (``COMMANDS``) and checked against the
command by tests/orchestrator/cli/test_lazy_cli.py.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from typing import Any

import typer
from typer import _click  # private to Typer: pyproject.toml pins the range that has it (test_floors.py)
from typer._click.exceptions import NoArgsIsHelpError
from typer.core import TyperCommand, TyperGroup

# name -> (module, attribute, its one-line help); a Typer attribute is a command group.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": (
        "orchestrator.cli.run",
        "run",
        "Run a sweep: every method on every dataset, regime and split, `budget` trials each.",
    ),
    "show": (
        "orchestrator.cli.run",
        "show",
        "Print the selected (lowest validation loss) trial per method, dataset, regime and split.",
    ),
    "plan": (
        "orchestrator.cli.plan",
        "plan",
        "Print the cells and trials of a sweep per shard: from the families' descriptions and the catalog alone.",
    ),
    "backtest": (
        "orchestrator.cli.plan",
        "backtest_command",
        "Check `plan --estimate` on records: fit on part of the stores, predict held-out whole datasets, print the "
        "error.",
    ),
    "calibrate": (
        "orchestrator.cli.calibrate",
        "calibrate_command",
        "Time each method on synthetic graphs of growing size (the cost probe), for `plan --estimate` on this "
        "hardware.",
    ),
    "export": (
        "orchestrator.cli.export",
        "export",
        "Write the long trials table, the selected results with workflow cost, per-budget workflow figures and "
        "service warm-up.",
    ),
    "merge": (
        "orchestrator.cli.merge",
        "merge",
        "Merge stores by trial key: identical duplicates are skipped, conflicting ones refused unless a rule is "
        "picked.",
    ),
    "datasets": (
        "orchestrator.cli.datasets",
        "app",
        "The dataset catalog: list tasks, compute statistics, export splits, add or remove your own graph.",
    ),
    "report": (
        "orchestrator.cli.report",
        "report",
        "Write the leaderboard site: Elo, ranks, Pareto frontiers, tuning budgets, subgroups, and the data behind "
        "every figure.",
    ),
    "reference": (
        "orchestrator.cli.reference",
        "app",
        "The reference records the project ships: build (resume, extend) and show them.",
    ),
    "methods": (
        "orchestrator.cli.methods",
        "app",
        "List the method families, scaffold contributed methods.",
    ),
    "validate": (
        "orchestrator.cli.validate",
        "validate",
        "Check a method image or endpoint against the NodeGround service contract; exit 1 on any failure.",
    ),
    "submit": (
        "orchestrator.cli.submit",
        "submit",
        "Benchmark an image in the sandbox and write a checksummed submission bundle.",
    ),
    "verify": (
        "orchestrator.cli.verify",
        "verify_command",
        "Check a Lite bundle against a full-protocol rerun; on a match print its verified entry (exit 0), else exit 1.",
    ),
    "weights": (
        "orchestrator.cli.weights",
        "app",
        "Pretrained GFM weights: list the catalog, download and verify files.",
    ),
    "slurm": (
        "orchestrator.cli.slurm",
        "app",
        "Run a sweep as a SLURM job array (one shard per task) and merge the shards' stores.",
    ),
}


def load_command(name: str) -> _click.Command:
    """The click command (or group) of ``name``, its module imported now."""
    module, attribute, _ = COMMANDS[name]
    target: Any = getattr(importlib.import_module(module), attribute)
    command: _click.Command
    if isinstance(target, typer.Typer):
        command = typer.main.get_group(target)
    else:
        single = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
        single.command(name)(target)
        command = typer.main.get_command(single)
    command.name = name
    return unwrapped(command)


def unwrapped(command: _click.Command) -> _click.Command:
    """``command`` (and its sub-commands) with each paragraph of its help on one line.

    A docstring is wrapped at the source's 120 columns, and Typer's rich help keeps every line break after the first
    paragraph, so an 80-column terminal showed half-empty lines mid-sentence; one line per paragraph lets the help
    rewrap to any width. Paragraphs stay apart, and one that starts with click's ``\\b`` keeps its lines.
    """
    if command.help:
        paragraphs = inspect.cleandoc(command.help).split("\n\n")
        command.help = "\n\n".join(
            p if p.startswith("\b") else " ".join(line.strip() for line in p.splitlines()) for p in paragraphs
        )
    for sub in getattr(command, "commands", {}).values():
        unwrapped(sub)
    return command


class LazyGroup(TyperGroup):
    """The top-level group: commands listed from ``COMMANDS``, each loaded when it is resolved to run."""

    _listing = False  # inside format_help: a command is its name and help line, nothing imported

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        if self._listing:
            line = COMMANDS[cmd_name][2]
            return TyperCommand(cmd_name, help=line, short_help=line)
        if cmd_name not in self.commands:
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands[cmd_name]

    def invoke(self, ctx: _click.Context) -> Any:
        """Every command and sub-command, its flags' parsing included, runs under the one handler (``errors.fail``)."""
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, NoArgsIsHelpError):
            raise
        except (Exception, KeyboardInterrupt) as exc:
            from orchestrator.cli.errors import fail  # imported on failure only: --help stays light

            fail(exc)

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="orchestrator",
    help="NodeGround: benchmark graph foundation models against tuned supervised methods.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=LazyGroup,
)


@app.callback()
def _main() -> None:
    """NodeGround: benchmark graph foundation models against tuned supervised methods."""
    from contract.settings import ORCHESTRATOR_SETTINGS, check_all

    check_all(ORCHESTRATOR_SETTINGS)  # at start-up, whatever the command: a bad value is one `error:` line


def main() -> None:
    """The `orchestrator` script and `python -m orchestrator` (the process is the CLI's: its signals are set here,
    never by an ``app`` a test or a program invokes in its own process)."""
    stop_on_sigterm()
    app(prog_name="orchestrator")


def stop_on_sigterm() -> None:
    """SIGTERM (``kill``, ``timeout``, a scheduler) stops a command as Ctrl-C does: finished trials stored, services
    closed, a reference build's manifest line written, exit 130. A script's background job ignores Ctrl-C (its shell
    sets SIGINT aside), so SIGTERM is how it is stopped. A handler someone else installed (SLURM's shard task
    installs its own later) is left alone."""
    import signal

    with contextlib.suppress(ValueError):  # not the main thread: the signals are not ours to set
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.default_int_handler)
