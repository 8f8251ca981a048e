from __future__ import annotations

import pandas as pd

from orchestrator.analysis import cohorts as co

from .conftest import results_rows


def table() -> pd.DataFrame:
    nan = float("nan")
    res = results_rows(
        {
            "gcn-Default": [[0.5] * 5, [0.6] * 5, [0.7] * 5],
            "gcn": [[0.8] * 5, [0.8] * 5, [0.8] * 5],
            "graphpfn": [[0.9] * 5, [0.9, 0.9, nan, 0.9, 0.9], []],  # one partition and one dataset missing
            "mynet": [[0.95] * 5, [0.95] * 5, []],  # user submission, missing d2
        }
    )
    res.loc[res["view"] == "mynet", "origin"] = "user:abc"
    res["kind"] = "supervised"
    res["k"] = 1
    res["workflow_s"] = 1.0
    return res


def test_imputation_uses_matched_gcn_default_flags_it_and_never_touches_user_submissions():
    out = co.impute(table())
    pfn = out[out["view"] == "graphpfn"]
    assert len(pfn) == 15
    imp = pfn[pfn["imputed"]]
    assert set(zip(imp["dataset"], imp["split"], strict=True)) == {("d1", 2)} | {("d2", s) for s in range(5)}
    assert (imp[imp["dataset"] == "d2"]["score"] == 0.7).all()  # gcn-Default on d2
    assert imp[imp["dataset"] == "d1"]["score"].item() == 0.6
    user = out[out["view"] == "mynet"]
    assert len(user) == 10 and not user["imputed"].any()
    assert not out[~out["view"].isin(["graphpfn"])]["imputed"].any()


def test_coverage_counts_native_imputed_and_missing_datasets():
    cov = co.coverage(co.impute(table())).set_index("view")
    assert tuple(cov.loc["graphpfn", ["native_datasets", "imputed_datasets", "missing_datasets"]]) == (1, 2, 0)
    assert tuple(cov.loc["mynet", ["native_datasets", "imputed_datasets", "missing_datasets"]]) == (2, 0, 1)
    assert cov.loc["gcn", "native_fraction"] == 1.0


def test_cohorts():
    c = co.cohorts(table(), near_complete_min=0.9)
    assert c["all"]["imputed"].any()
    assert set(c["complete"]["dataset"]) == {"d0"}  # the only dataset every built-in view has in full
    assert not c["complete"]["imputed"].any()
    assert set(c["near_complete"]["view"]) == {"gcn", "gcn-Default"}
    assert set(c["near_complete"]["dataset"]) == {"d0", "d1", "d2"}
