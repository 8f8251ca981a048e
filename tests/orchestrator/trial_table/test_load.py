"""Loading trials refuses impossible numbers: a metric outside its range is no result, whoever wrote the store."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.store import Store, read_trial_columns
from orchestrator.submission.bundle import load_bundle
from orchestrator.trial_table.load import AnalysisInputError, load_trials
from tests.orchestrator.conftest import sealed_bundle, trial_record

runner = CliRunner()
#: Finding 4: accuracy 5.0, val_loss -1 or -1e308 were accepted from bundles and stores, and selected.
IMPOSSIBLE = [
    ("test_primary", 5.0),
    ("test_accuracy", -0.5),
    ("val_loss", -1.0),
    ("val_loss", -1e308),
    ("test_cross_entropy", float("inf")),
    ("test_auroc", "high"),
    ("fit_service_s", -3.0),
]


def _rows(column: str, value: object, origin: str = "builtin") -> list[dict]:
    """Three trials; the second holds ``value`` in ``column``."""
    rows = [
        trial_record(f"k{i}", trial_index=i, test_primary=0.6, test_accuracy=0.6, origin=origin, val_loss=0.4).as_row()
        for i in range(3)
    ]
    rows[1][column] = value
    return rows


def _store(path, column: str, value: object):
    with Store(path) as store:
        store.write_rows(_rows(column, value))
    return path


@pytest.mark.parametrize("column, value", IMPOSSIBLE)
def test_a_store_holding_an_impossible_metric_is_refused_naming_the_trial(tmp_path, column, value):
    path = _store(tmp_path / "runs.sqlite", column, value)
    with pytest.raises(AnalysisInputError, match=rf"trial 'k1' holds {column} "):
        load_trials(path)
    with pytest.raises(ValueError, match=rf"trial 'k1' holds {column} "):
        read_trial_columns(path, ("method",))  # show, export, the estimate, merge: every reader
    result = runner.invoke(app, ["report", "--store", str(path), "--out", str(tmp_path / "site")])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"error: {path}: trial 'k1' holds {column}") and "which no trial computes" in (
        result.output
    )


def test_an_export_holding_an_impossible_metric_is_refused(tmp_path):
    frame = load_trials(_store(tmp_path / "runs.sqlite", "test_primary", 0.7))
    frame["test_primary"] = frame["test_primary"].astype(float)
    frame.loc[1, "test_primary"] = 5.0
    frame.to_csv(tmp_path / "runs.csv", index=False)
    with pytest.raises(AnalysisInputError, match=r"trial 'gcn d 10/10/80 0 1' holds test_primary 5.0"):
        load_trials(tmp_path / "runs.csv")


def test_a_bundle_holding_an_impossible_metric_is_refused(tmp_path):
    bundle = sealed_bundle(tmp_path / "bundle", _rows("val_loss", -1.0, origin="user:x"), {"id": "x"})
    with pytest.raises(AnalysisInputError, match=r"trial 'k1' holds val_loss -1.0"):
        load_bundle(bundle)
    result = runner.invoke(app, ["report", "--bundle", str(bundle), "--out", str(tmp_path / "site")])
    assert result.exit_code == 2 and "holds val_loss -1.0" in result.output and result.output.count("\n") == 1
