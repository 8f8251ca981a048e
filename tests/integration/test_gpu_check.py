"""`make gpu-check`'s code path on CPU (--device cpu --small): services as processes, the plain loop, a sweep."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_gpu_check_runs_on_cpu_and_reports_every_figure(tmp_path, mirror):
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            "make",
            "-s",
            "gpu-check",
            f"GPU_CHECK_PYTHON={sys.executable}",
            "GPU_CHECK_WHEELS=",
            "GPU_CHECK_ARGS=--device cpu --small --methods mlp,gcn --datasets texas --budget 1 --repeats 1 --out "
            f"{out}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for method in ("gcn", "gat", "gcnii"):  # service vs plain loop, side by side with their ratio
        assert any(line.split()[:2] == [method, "epoch:"] and "ratio" in line for line in proc.stdout.splitlines()), (
            proc.stdout
        )
    summary = json.loads((out / "gpu-check.json").read_text())
    assert [r["method"] for r in summary["epochs"]] == ["gcn", "gat", "gcnii"]
    assert all(
        r["service"] > 0 and r["local"] > 0 and r["memory_ratio"] is None for r in summary["epochs"]
    )  # no GPU memory on CPU
    assert summary["sweep"]["statuses"] == {"ok": 2} and summary["sweep"]["devices"] == [{"device": "cpu"}]
    assert "sweep: 2 trials" in proc.stdout and "Traceback" not in proc.stdout + proc.stderr


def test_an_empty_wheel_directory_is_one_error_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "tests.bench.gpu_check", "--wheels", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0 and proc.stderr.strip() == f"error: no wheels in {tmp_path}"
