"""`orchestrator submit` at the CLI, without Docker: the plan it builds (Lite unless told, the reference's datasets)
and the sweep it hands its progress to."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from orchestrator.cli import submit as command
from orchestrator.cli.main import app
from orchestrator.cli.progress import sweep_with_progress
from orchestrator.protocols import LITE, PAPER
from orchestrator.reference import read_manifest

runner = CliRunner()


@pytest.fixture
def handed(monkeypatch) -> dict[str, Any]:
    """What `submit` hands the benchmark (nothing runs: no sandbox, no Docker)."""
    seen: dict[str, Any] = {}

    def benchmark(request, say, run_sweep):
        seen.update(request=request, run_sweep=run_sweep)
        return {"trials": {"total": 0, "ok": 0}, "origin": "user:x", "checksum": "0" * 12}

    monkeypatch.setattr(command, "benchmark", benchmark)
    return seen


def test_submit_without_a_protocol_runs_lite_on_the_reference_datasets_and_says_so(handed, tmp_path):
    result = runner.invoke(app, ["submit", "nodeground/demo", "--out", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    plan = handed["request"].plan
    held = read_manifest(LITE.name).datasets
    assert plan.protocol == LITE.name and plan.budget == LITE.budget and plan.splits == LITE.splits
    assert plan.regimes == LITE.regimes and list(plan.datasets) == held
    said = " ".join(result.output.split())
    assert f"--protocol lite: the {len(held)} datasets the shipped reference holds" in said
    assert "--datasets loadable runs every catalog task this machine can load" in said
    assert handed["run_sweep"] is sweep_with_progress  # the sweep talks while it runs, as `run`'s does


def test_the_paper_protocol_runs_only_by_name_and_datasets_override_the_reference(handed, tmp_path):
    result = runner.invoke(app, ["submit", "nodeground/demo", "--out", str(tmp_path / "b"), "--protocol", "paper"])
    assert result.exit_code == 0, result.output
    assert handed["request"].plan.protocol == PAPER.name and handed["request"].plan.budget == PAPER.budget
    result = runner.invoke(app, ["submit", "nodeground/demo", "--out", str(tmp_path / "c"), "--datasets", "cora"])
    assert result.exit_code == 0, result.output
    assert handed["request"].plan.datasets == ("cora",) and "shipped reference holds" not in result.output


def test_sandboxes_side_by_side_are_one_a_core_unless_told(handed, tmp_path):
    result = runner.invoke(app, ["submit", "nodeground/demo", "--out", str(tmp_path / "b")])
    assert result.exit_code == 0 and handed["request"].parallel == 0  # 0: default_sandboxes decides
    result = runner.invoke(app, ["submit", "nodeground/demo", "--out", str(tmp_path / "b"), "--parallel", "3"])
    assert result.exit_code == 0 and handed["request"].parallel == 3
    result = runner.invoke(app, ["submit", "nodeground/demo", "--out", str(tmp_path / "b"), "--parallel", "-1"])
    assert result.exit_code == 2 and "--parallel must be 0" in result.output
