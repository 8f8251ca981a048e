"""`orchestrator verify`: a Lite bundle accepted by a full rerun that matches, refused by one that does not; verified
only by the maintainers' committed list, never by a file beside the bundle."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.protocols import PAPER
from orchestrator.store import Store
from orchestrator.submission import verify as verify_module
from orchestrator.submission.bundle import CHECKSUM, SUBMISSION, TRIALS, BundleError, seal
from orchestrator.submission.verify import is_verified, verified_checksums
from tests.orchestrator.conftest import sealed_bundle
from tests.orchestrator.reference.conftest import rows

runner = CliRunner()


def write(path, frame) -> None:
    with Store(path) as store:
        store.write_rows(frame.to_dict("records"))


def lite_bundle(tmp_path):
    frame = rows(["mine"], ["texas"], budget=3, origin="user:x")
    return sealed_bundle(tmp_path / "lite", frame.to_dict("records"), {"id": "x", "protocol": {"name": "lite"}})


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


@pytest.fixture
def listing(tmp_path, monkeypatch):
    """The maintainers' list of verified bundles, as a checkout holds it (empty here)."""
    path = tmp_path / "verified.toml"
    path.write_text("# the maintainers' list\n")
    monkeypatch.setattr(verify_module, "VERIFIED", path)
    return path


def test_a_full_rerun_that_matches_prints_the_entry_that_verifies_the_bundle_once_committed(tmp_path, listing):
    bundle = lite_bundle(tmp_path)
    before = sorted(p.name for p in bundle.iterdir())
    result = runner.invoke(app, ["verify", str(bundle), "--full", str(full_run(tmp_path))])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("verified: 6 lite trials rerun within 0.0001")
    checksum = (bundle / CHECKSUM).read_text().strip()
    assert f'lite = "{checksum}"' in result.output and 'methods = ["mine"]' in result.output
    assert sorted(p.name for p in bundle.iterdir()) == before  # nothing is written into the bundle
    assert not is_verified(bundle)  # until the maintainers' list holds it
    recorded = runner.invoke(app, ["verify", str(bundle), "--full", str(full_run(tmp_path)), "--record"])
    assert recorded.exit_code == 0 and f"recorded in {listing}" in recorded.output
    assert is_verified(bundle) and verified_checksums() == {checksum}
    (bundle / TRIALS).write_bytes((bundle / TRIALS).read_bytes() + b"x")
    with pytest.raises(BundleError, match="changed after the bundle was sealed"):
        is_verified(bundle)  # the entry names the content it verified


def test_a_verification_written_beside_a_bundle_verifies_nothing(tmp_path, listing):
    """Finding 2: `echo '{"lite_checksum": "<CHECKSUM>"}' > B/verification.json` once made B `verified`."""
    bundle = lite_bundle(tmp_path)
    checksum = (bundle / CHECKSUM).read_text().strip()
    assert not is_verified(bundle)
    (bundle / "verification.json").write_text(json.dumps({"lite_checksum": checksum, "compared": 6}))
    with pytest.raises(BundleError, match=r"holds verification.json beside its sealed files"):
        is_verified(bundle)
    result = runner.invoke(app, ["report", "--bundle", str(bundle), "--out", str(tmp_path / "site")])
    assert result.exit_code == 2 and "verification.json beside its sealed files" in result.output
    assert result.output.count("\n") == 1


def test_a_full_rerun_that_differs_or_lacks_cells_is_refused(tmp_path):
    bundle = lite_bundle(tmp_path)

    def moved(frame):
        first = frame.index[frame["trial_index"].eq(1) & frame["split"].eq(0)][0]
        frame.loc[first, "test_primary"] += 0.01
        return frame

    result = runner.invoke(app, ["verify", str(bundle), "--full", str(full_run(tmp_path, moved))])
    assert result.exit_code == 1 and "1 lite trial(s) differ" in result.output and "test_primary" in result.output
    assert "[[verified]]" not in result.output

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


@pytest.mark.parametrize(
    "text, message",
    [
        ("[]", "holds an array, not an object"),
        ('{"protocol": 3}', "was run under protocol none, not lite"),
        ('{"protocol": {"name": ["lite"]}}', "was run under protocol none, not lite"),
        ("{oops", "submission.json is not a JSON object"),
    ],
)
def test_a_malformed_submission_is_one_line(tmp_path, text, message):
    """Finding 16: a malformed submission.json ended in `error: unexpected ...`."""
    bundle = lite_bundle(tmp_path)
    (bundle / SUBMISSION).write_text(text)
    seal(bundle)
    result = runner.invoke(app, ["verify", str(bundle), "--full", str(full_run(tmp_path))])
    assert result.exit_code == 2 and result.output.startswith("error: ") and message in result.output, result.output
    assert result.output.count("\n") == 1 and "unexpected" not in result.output
