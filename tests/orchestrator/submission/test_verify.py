"""`orchestrator verify`: a Lite bundle accepted by a full rerun that matches, refused by one that does not."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.protocols import PAPER
from orchestrator.store import Store
from orchestrator.submission.bundle import SUBMISSION, TRIALS, finalize_store, seal
from orchestrator.submission.verify import VERIFICATION, is_verified
from tests.orchestrator.reference.conftest import rows

runner = CliRunner()


def write(path, frame) -> None:
    with Store(path) as store:
        store.write_rows(frame.to_dict("records"))


def lite_bundle(tmp_path):
    bundle = tmp_path / "lite"
    bundle.mkdir()
    write(bundle / TRIALS, rows(["mine"], ["texas"], budget=3, origin="user:x"))
    finalize_store(bundle / TRIALS)
    (bundle / SUBMISSION).write_text(json.dumps({"id": "x", "protocol": {"name": "lite"}}))
    seal(bundle)
    return bundle


def full_run(tmp_path, change=None):
    """The paper protocol on the bundle's dataset: its split-0 trials are the Lite ones (same seeded rows)."""
    frame = rows(["mine"], ["texas"], splits=PAPER.splits, budget=PAPER.budget, origin="user:x")
    lite = rows(["mine"], ["texas"], budget=3, origin="user:x").set_index("trial_key")
    frame = frame.set_index("trial_key")
    frame.loc[lite.index, lite.columns] = lite  # the prefix is the same trials
    if change is not None:
        frame = change(frame)
    path = tmp_path / f"full-{len(list(tmp_path.glob('full-*')))}.sqlite"
    write(path, frame.reset_index())
    return path


def test_a_full_rerun_that_matches_verifies_the_bundle(tmp_path):
    bundle = lite_bundle(tmp_path)
    result = runner.invoke(app, ["verify", str(bundle), "--full", str(full_run(tmp_path))])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("verified: 6 lite trials rerun within 0.0001")
    assert is_verified(bundle)
    (bundle / TRIALS).write_bytes((bundle / TRIALS).read_bytes() + b"x")
    assert not is_verified(bundle)  # a verification names the content it verified


def test_a_full_rerun_that_differs_or_lacks_cells_is_refused(tmp_path):
    bundle = lite_bundle(tmp_path)

    def moved(frame):
        first = frame.index[frame["trial_index"].eq(1) & frame["split"].eq(0)][0]
        frame.loc[first, "test_primary"] += 0.01
        return frame

    result = runner.invoke(app, ["verify", str(bundle), "--full", str(full_run(tmp_path, moved))])
    assert result.exit_code == 1 and "1 lite trial(s) differ" in result.output and "test_primary" in result.output
    assert not (bundle / VERIFICATION).exists()

    def short(frame):
        return frame.drop(frame.index[frame["split"].eq(4) & frame["trial_index"].ge(100)])

    result = runner.invoke(app, ["verify", str(bundle), "--full", str(full_run(tmp_path, short))])
    assert result.exit_code == 1 and "lacks 2 paper cell(s)" in result.output and "split 4: 100/201" in result.output


def test_only_a_lite_bundle_can_be_verified(tmp_path):
    bundle = lite_bundle(tmp_path)
    (bundle / SUBMISSION).write_text(json.dumps({"id": "x", "protocol": {"name": "paper"}}))
    seal(bundle)
    result = runner.invoke(app, ["verify", str(bundle), "--full", str(full_run(tmp_path))])
    assert result.exit_code == 2 and "not lite: nothing to verify" in result.output
