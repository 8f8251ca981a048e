"""A group of flags (a dataclass) reaches Typer as the command's own flags and the command as one value."""

from __future__ import annotations

import dataclasses
from typing import Annotated

import typer
from typer.testing import CliRunner

from contract.families import load_families
from orchestrator.cli.options import SweepFlags, flag_groups


@dataclasses.dataclass(frozen=True)
class Pair:
    left: Annotated[str, typer.Option(help="The left one.")]
    right: Annotated[list[str], typer.Option(help="The right ones.")] = dataclasses.field(default_factory=list)


@flag_groups
def command(count: Annotated[int, typer.Option()], pair: Pair, last: Annotated[bool, typer.Option()] = False) -> None:
    """Echo what it got."""
    typer.echo(f"{count} {pair} {last}")


def invoke(*args: str) -> str:
    app = typer.Typer()
    app.command()(command)
    result = CliRunner().invoke(app, list(args), terminal_width=200)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_group_s_fields_are_flags_in_its_place():
    flags = [w for w in invoke("--help").split() if w.startswith("--")]
    assert flags[:5] == ["--count", "--left", "--right", "--last", "--no-last"], flags
    assert command.__doc__ == "Echo what it got."


def test_the_command_gets_the_group_as_one_value():
    out = invoke("--count", "2", "--left", "a", "--right", "b", "--right", "c", "--last")
    assert out.strip() == "2 Pair(left='a', right=['b', 'c']) True"


def test_a_direct_call_takes_the_defaults(capsys):
    command(count=1, left="a")
    assert capsys.readouterr().out.strip() == "1 Pair(left='a', right=[]) False"


def test_sweep_flags_plan_checks_every_value():
    plan = SweepFlags(methods="mlp", datasets="synthetic-homophilous", budget=3).plan("1/2")
    assert plan.methods == ("mlp",) and plan.budget == 3 and plan.shard == (1, 2)


def test_methods_all_names_every_method_of_the_families_once():
    plan = SweepFlags(methods="all", datasets="synthetic-homophilous").plan("0/1")
    declared = {m for family in load_families().values() for m in family.methods}
    assert set(plan.methods) == declared and len(plan.methods) == len(declared) >= 22
    assert {"mlp", "gcn", "graphany"} <= declared


def test_lite_without_datasets_covers_the_reference_and_loadable_asks_for_every_loadable_task(mirror, capsys):
    from orchestrator.cli.options import LOADABLE_DATASETS, parse_datasets
    from orchestrator.data.registry import is_available, tasks
    from orchestrator.reference import read_manifest

    held = read_manifest("lite").datasets
    plan = SweepFlags(methods="mlp", protocol="lite").plan()
    assert list(plan.datasets) == held
    note = capsys.readouterr().err
    assert note.count("\n") == 1 and note.startswith(f"--protocol lite: the {len(held)} datasets the shipped reference")
    loadable = parse_datasets(LOADABLE_DATASETS)
    assert loadable == [t["name"] for t in tasks() if is_available(t)] and set(held) <= set(loadable)
    assert SweepFlags(methods="mlp", protocol="lite", datasets=LOADABLE_DATASETS).plan().datasets == tuple(loadable)
    assert capsys.readouterr().err == ""  # asked for by name: nothing to say
