"""One selection rule: `show`, `export` and the report pick the same trial in every cell.

The store holds the cases where two implementations of "lowest validation loss" could part:
ties, failed trials that recorded a loss, ok trials without a finite loss, and a cell where no
trial can be selected.
"""

from __future__ import annotations

import math

import pandas as pd

from orchestrator.analysis.tables import compute_analysis
from orchestrator.cli.export import export_tables
from orchestrator.records import TrialRecord
from orchestrator.results import selected_results
from orchestrator.store import Store, read_services, read_trials
from orchestrator.trial_table.load import load_trials

NAN = float("nan")
#: split -> [(status, val_loss)] by trial index, and the trial the rule selects (None: none can be). An infinite
#: loss never reaches the rule: loading refuses the store (tests/orchestrator/trial_table/test_load.py).
CELLS = {
    0: ([("ok", 0.9), ("ok", 0.4), ("timeout", None), ("ok", 0.4)], 1),  # a tie goes to the earlier trial
    1: ([("ok", NAN), ("error", 0.1), ("ok", 0.5)], 2),  # a failed trial's loss and a missing loss never win
    2: ([("ok", NAN), ("ok", 0.7), ("oom", None)], 1),  # a missing loss is no loss
    3: ([("ok", NAN), ("timeout", None), ("ok", NAN)], None),  # nothing to select
}


def _store(path) -> None:
    with Store(path) as store:
        for method in ("gcn", "mlp"):
            for split, (trials, _) in CELLS.items():
                for index, (status, val_loss) in enumerate(trials):
                    scored = val_loss is not None
                    store.write(TrialRecord(
                        trial_key=f"{method}@v|d|10/10/80|{split}|{index}", method=method, method_version="v",
                        family="gnn", kind="supervised", dataset="texas", dataset_hash="h", task_type="multiclass",
                        num_classes=5, regime="10/10/80", split=split, trial_index=index, is_default=index == 0,
                        config_json=f'{{"i": {index}}}', config_hash=str(index), seed=split, status=status,
                        val_loss=val_loss, val_accuracy=0.5 if scored else None,
                        test_accuracy=0.5 + index / 10 if scored else None,
                        test_primary=0.5 + index / 10 if scored else None,
                        primary_metric="accuracy" if scored else None,
                        fit_service_s=1.0, predict_service_s=0.1, fit_peak_rss_bytes=100, predict_peak_rss_bytes=50,
                    ))  # fmt: skip


def _picks(frame: pd.DataFrame, index: str) -> dict[tuple[str, int], int | None]:
    return {
        (str(r["method"]), int(r["split"])): None if pd.isna(r[index]) else int(r[index]) for _, r in frame.iterrows()
    }


def test_show_export_and_the_report_select_the_same_trial(tmp_path):
    store = tmp_path / "runs.sqlite"
    _store(store)
    trials = read_trials(store)
    expected = {(m, split): pick for m in ("gcn", "mlp") for split, (_, pick) in CELLS.items()}

    shown = _picks(selected_results(trials), "trial_index")
    exported = _picks(export_tables(trials, read_services(store))["selected"], "selected_trial_index")
    results = compute_analysis(load_trials(store), rounds=5, compute_stats=False).tables["results"]
    native = results[(results["variant"] == "tuned") & ~results["imputed"]]
    reported = _picks(native, "selected_trial_index")

    assert shown == expected and exported == expected
    assert reported == {cell: pick for cell, pick in expected.items() if pick is not None}  # no result where none
    counts = selected_results(trials).set_index(["method", "split"])
    assert counts.loc[("gcn", 1), "trials"] == 3 and counts.loc[("gcn", 1), "failed"] == 2
    assert math.isclose(counts.loc[("gcn", 0), "val_loss"], 0.4)
