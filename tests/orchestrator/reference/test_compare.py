"""A user's methods among the reference: the reference's cells only, coverage named, no frontier of two machines."""

from __future__ import annotations

import json
import math

from orchestrator.protocols import LITE
from orchestrator.reference.build import table_rows
from orchestrator.reference.compare import ENTRANT_ORIGIN, REFERENCE, SUBMITTED, compare, user_hardware
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


def test_a_reference_method_rerun_by_the_user_replaces_its_shipped_rows():
    shipped, made = reference()
    user = rows(["gcn"], ["texas", "cornell"], seed=7, host=OTHER)
    result = compare(user, shipped, made, "User CPU, 8 threads")
    gcn = result.trials[result.trials["method"] == "gcn"]
    assert len(gcn) == len(user) and not math.isnan(gcn["fit_service_s"].iloc[0])
    assert result.entries.set_index("method").loc["gcn"].status == SUBMITTED
