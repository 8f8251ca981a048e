"""What a user's commands write into the checkout stays out of git: run stores, `runs/`, the report's `report/`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout"
)


def _ignored(*paths: str) -> set[str]:
    done = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=REPO, capture_output=True, text=True)
    return set(done.stdout.split())


def test_the_report_and_runs_folders_and_stores_are_ignored():
    written = [
        "report/index.html",
        "report/tables/leaderboard.csv",
        "runs/lite.sqlite",
        "runs.sqlite",
        "mine.sqlite-wal",
    ]
    assert _ignored(*written) == set(written)


def test_the_golden_report_tables_are_not():
    golden = "tests/integration/golden/report/leaderboard.csv"
    assert (REPO / golden).exists() and _ignored(golden) == set()
