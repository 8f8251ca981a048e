"""A user's methods among the reference: the reference's cells only, coverage named, no frontier of two machines."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.protocols import LITE
from orchestrator.reference import ReferenceError
from orchestrator.reference.build import table_rows
from orchestrator.reference.compare import (
    ENTRANT_ORIGIN,
    REFERENCE,
    RERUN,
    SUBMITTED,
    compare,
    store_reruns,
    user_hardware,
)
from orchestrator.store import Store
from tests.orchestrator.conftest import sealed_bundle
from tests.orchestrator.reference.conftest import rows
from tests.orchestrator.reference.test_reference import manifest

OTHER = json.dumps({"device": "cpu", "cpu_model": "User CPU", "compute_threads": 8})


def reference(methods=("gcn", "mlp"), datasets=("texas", "cornell")):
    trials = rows(methods, datasets)
    return table_rows(trials, set(trials["trial_key"]), LITE), manifest(methods=list(methods), datasets=list(datasets))


def test_the_users_trials_count_on_the_reference_cells_and_missing_ones_are_named():
    shipped, made = reference()
    user = rows(["mine"], ["texas", "wisconsin"], budget=5, seed=1, host=OTHER)  # cornell missing, wisconsin extra
    result = compare(user, shipped, made, user_hardware(user))
    mine = result.entries.set_index("method").loc["mine"]
    assert mine.status == SUBMITTED and mine.cells == 2 and mine.cells_expected == 4
    assert "cornell 10/10/80 split 0" in mine.missing and "wisconsin" not in mine.missing
    held = result.trials[result.trials["method"] == "mine"]
    assert set(held["dataset"]) == {"texas"} and held["trial_index"].max() == made.budget - 1  # the Lite prefix only
    assert any("outside the lite reference" in n for n in result.notes)
    assert set(result.entries.loc[result.entries["status"] == REFERENCE, "method"]) == {"gcn", "mlp"}
    origins = result.trials.drop_duplicates("method").set_index("method")["origin"]
    assert origins["mine"] == ENTRANT_ORIGIN and origins["gcn"] == "builtin"  # the entrant is never imputed


def test_costs_of_another_machine_never_join_the_users_on_a_frontier():
    shipped, made = reference()
    result = compare(rows(["mine"], ["texas"], seed=1, host=OTHER), shipped, made, "User CPU, 8 threads")
    costs = result.trials.set_index("method")["fit_service_s"]
    assert costs.loc["gcn"].isna().all() and costs.loc["mine"].notna().all()
    assert any("the cost pages use this store's records only" in n for n in result.notes)
    same = compare(rows(["mine"], ["texas"], seed=1), shipped, made, made.hardware)
    assert same.trials.set_index("method")["fit_service_s"].loc["gcn"].notna().all()


def _store(path, frame):
    with Store(path) as store:
        store.write_rows(frame.to_dict("records"))
    return path


def test_a_reference_method_the_users_store_reran_competes_as_a_rerun_beside_the_shipped_rows(tmp_path):
    shipped, made = reference()
    user = rows(["gcn"], ["texas", "cornell"], seed=7, host=OTHER)  # the same trials, measured on another machine
    reran = store_reruns(_store(tmp_path / "mine.sqlite", user), shipped, made)
    assert reran == {"gcn"}
    result = compare(user, shipped, made, "User CPU, 8 threads", reran=reran)
    by_method = result.trials.groupby("method")
    assert by_method.size()["gcn"] == (shipped["method"] == "gcn").sum()  # the shipped rows stay, whole
    rerun = result.trials[result.trials["method"] == "gcn (rerun)"]
    assert len(rerun) == len(user) and not math.isnan(rerun["fit_service_s"].iloc[0])
    status = result.entries.set_index("method")["status"]
    assert status["gcn (rerun)"] == RERUN and status["gcn"] == REFERENCE
    other = user.assign(trial_key=user["trial_key"] + "-v2")  # another version's trials under the name
    assert store_reruns(_store(tmp_path / "other.sqlite", other), shipped, made) == frozenset()


@pytest.mark.parametrize("name", ["gcn", "g\u0441n", "\uff47\uff43\uff4e", "GCN"])  # Cyrillic es; full width
def test_a_method_named_like_a_reference_method_is_refused_unless_the_users_store_reran_it(name):
    """Finding 3: a bundle of rows named gcn (the Elo anchor) once replaced the shipped gcn rows, and a look-alike
    name (gсn, Cyrillic) stood beside them."""
    shipped, made = reference()
    submitted = rows([name], ["texas", "cornell"], seed=7, origin="user:x")
    with pytest.raises(ReferenceError, match="a submission never stands in for a reference method"):
        compare(submitted, shipped, made, None)
    stored = rows([name], ["texas", "cornell"], seed=7)
    with pytest.raises(ReferenceError, match="reads as the reference method 'gcn' but is not a rerun of it"):
        compare(stored, shipped, made, None)  # the store did not rerun it (``store_reruns``)
    if name != "gcn":  # a look-alike is never a rerun, whatever its trials
        with pytest.raises(ReferenceError, match="is not a rerun of it"):
            compare(stored, shipped, made, None, reran=frozenset({"gcn", name}))


def test_report_refuses_a_bundle_named_like_a_reference_method_in_one_line(tmp_path):
    frame = rows(["g\u0441n"], ["texas"], budget=10, origin="user:x")
    bundle = sealed_bundle(tmp_path / "bundle", frame.to_dict("records"), {"id": "x", "protocol": {"name": "lite"}})
    result = CliRunner().invoke(app, ["report", "--bundle", str(bundle), "--reference", "lite", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "reads as the reference method 'gcn'" in result.output
    assert result.output.count("\n") == 1
