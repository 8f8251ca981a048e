"""The `orchestrator` command as users meet it: clear one-line errors, a real sweep, resume, show."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app

ORCHESTRATOR = str(Path(sys.executable).with_name("orchestrator"))
runner = CliRunner()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--methods", "mpl", "--datasets", "synthetic-tiny"], "unknown method 'mpl'; known methods: "),
        (["--methods", "mlp", "--datasets", "synthetic-tinny"], "unknown dataset 'synthetic-tinny'; did you mean synthetic-tiny"),
        (["--methods", "mlp", "--datasets", "synthetic-tiny", "--budget", "-1"], "--budget must be at least 1"),
        (["--methods", "mlp", "--datasets", "synthetic-tiny", "--splits", "0,x"], "--splits must be comma-separated integers"),
        (["--methods", "mlp", "--datasets", "synthetic-tiny", "--splits", "9"], "split index 9 is outside 0..4"),
        (["--methods", "mlp", "--datasets", "synthetic-tiny", "--regimes", "20/20/60"], "unknown regime '20/20/60'"),
        (["--methods", "mlp", "--datasets", "synthetic-tiny", "--endpoint", "mlp"], "--endpoint must look like NAME=HOST:PORT"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(tmp_path, args, message):
    result = runner.invoke(app, ["run", *args, "--store", str(tmp_path / "r.sqlite")])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_an_endpoint_that_does_not_answer_is_named(tmp_path):
    proc = subprocess.run(
        [ORCHESTRATOR, "run", "--methods", "mlp", "--datasets", "synthetic-tiny", "--endpoint", "mlp=127.0.0.1:9", "--store", str(tmp_path / "r.sqlite")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: method service at 127.0.0.1:9 did not become healthy")
    assert "Traceback" not in proc.stderr + proc.stdout


def test_show_refuses_a_missing_store(tmp_path):
    result = runner.invoke(app, ["show", "--store", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 2 and "no run store at" in result.output


def test_run_then_rerun_resumes_and_show_prints_the_selection(tmp_path):
    store = tmp_path / "runs.sqlite"
    cmd = [ORCHESTRATOR, "run", "--methods", "mlp,gcn", "--datasets", "synthetic-tiny", "--splits", "0,1", "--budget", "1", "--store", str(store)]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "synthetic-tiny" in first.stdout and "accuracy" in first.stdout
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*), SUM(status = 'ok') FROM trials").fetchone() == (4, 4)
        stamps = db.execute("SELECT trial_key, finished_at FROM trials").fetchall()
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT trial_key, finished_at FROM trials").fetchall() == stamps  # nothing rerun
    shown = subprocess.run([ORCHESTRATOR, "show", "--store", str(store)], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and shown.stdout.count("synthetic-tiny") == 4
