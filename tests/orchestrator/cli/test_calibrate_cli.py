"""`orchestrator calibrate` (and every caller of the probe) on a store that holds every step: one line, no service."""

from __future__ import annotations

from typer.testing import CliRunner

from orchestrator.cli import calibrate as command
from orchestrator.cli.main import app
from tests.orchestrator.price.test_probe import FakeProbe, _probe


def test_a_probe_with_nothing_to_probe_says_it_is_up_to_date_in_one_line_and_starts_nothing(tmp_path, monkeypatch):
    fake = FakeProbe({"mlp": 0.01})
    _probe(fake, ("mlp",))
    store = tmp_path / "calibration.sqlite"
    store.touch()
    monkeypatch.setattr(command, "read_trial_columns", lambda path, columns: fake.stored())

    def no_services(*args, **kwargs):
        raise AssertionError("an up-to-date probe started services")

    monkeypatch.setattr(command, "open_services", no_services)
    result = CliRunner().invoke(app, ["calibrate", "--methods", "mlp", "--store", str(store)])
    assert result.exit_code == 0, result.output
    said = [line for line in result.output.splitlines() if line.startswith("calibration")]
    assert said == [f"calibration: this machine's cost probe ({store}) is up to date for mlp: nothing to probe"]
    assert "every probe graph done" in result.output  # the table still says where each method stands
