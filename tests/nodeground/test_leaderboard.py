"""The comparison from Python is the report's: the same leaderboard as `orchestrator report --reference lite`, as
DataFrames, recomputed for whoever competes."""

from __future__ import annotations

import pandas as pd
import pytest
from typer.testing import CliRunner

from nodeground.leaderboard import compare
from orchestrator.cli.main import app
from orchestrator.reference import load_reference, store_rows
from orchestrator.reference.compare import REFERENCE, SUBMITTED
from orchestrator.store import Store

ROUNDS = 5  # bootstrap resamples: enough to compare intervals, few enough for milliseconds


@pytest.fixture
def store(tmp_path):
    """A store holding one method of the user's, "mine": a reference method's own trials under another name."""
    frame, manifest = load_reference("lite")
    copied = manifest.methods[0]
    mine = frame[frame["method"] == copied].assign(
        method="mine", origin="builtin", trial_key=lambda f: f["trial_key"].str.replace(f"{copied}@", "mine@")
    )
    path = tmp_path / "mine.sqlite"
    with Store(path) as opened:
        opened.write_rows(store_rows(mine))
    return path


def test_the_leaderboard_is_the_reports(store, tmp_path):
    board = compare(store, rounds=ROUNDS)
    out = tmp_path / "report"
    done = CliRunner().invoke(
        app,
        ["report", "--store", str(store), "--reference", "lite", "--bootstrap-rounds", str(ROUNDS), "--out", str(out)],
    )
    assert done.exit_code == 0, done.output
    written = pd.read_parquet(out / "tables" / "leaderboard.parquet")
    pd.testing.assert_frame_equal(
        board.leaderboard.reset_index(drop=True), written, check_dtype=False, check_categorical=False
    )
    _, manifest = load_reference("lite")
    assert set(board.entries["method"]) == {"mine", *manifest.methods}
    assert board.entries.set_index("method").loc["mine", "status"] == SUBMITTED
    assert set(board.entries.set_index("method").drop("mine")["status"]) == {REFERENCE}
    per_split = board.results[board.results["method_name"] == "mine"]
    assert len(per_split) and set(per_split["dataset"]) <= set(manifest.datasets)


def test_the_leaderboard_is_recomputed_over_whoever_competes(store):
    _, manifest = load_reference("lite")
    other = manifest.methods[-1]
    both = compare(store, methods=["mine", other], rounds=ROUNDS)
    assert set(both.leaderboard["view"].map(lambda view: view.split("-")[0])) == {"mine", other}  # and their variants
    assert list(both.entries["method"]) == ["mine", other]
    everyone = compare(store, rounds=ROUNDS).leaderboard
    mine = both.leaderboard.set_index(["regime", "view"]).loc[("10/10/80", "mine"), "elo"]
    assert mine != everyone.set_index(["regime", "view"]).loc[("10/10/80", "mine"), "elo"]  # who competes matters
