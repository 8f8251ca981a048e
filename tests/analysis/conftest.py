from __future__ import annotations

import numpy as np
import pandas as pd
import pytest


def trial_rows(rows: list[dict]) -> pd.DataFrame:
    """A minimal trial table from partial rows (defaults fill the identity columns)."""
    base = {"method_version": "1", "kind": "supervised", "task_type": "multiclass", "regime": "10/10/80",
            "status": "ok", "origin": "builtin", "primary_metric": "accuracy", "fit_service_s": 1.0,
            "predict_service_s": 0.1, "fit_peak_rss_bytes": 100.0, "predict_peak_rss_bytes": 50.0,
            "fit_peak_gpu_bytes": 0.0, "predict_peak_gpu_bytes": 0.0}
    return pd.DataFrame([{**base, **r} for r in rows])


def results_rows(scores: dict[str, list[list[float]]], regime: str = "10/10/80") -> pd.DataFrame:
    """Results (view-level) table: scores[view][dataset_i][split] = primary metric."""
    rows = []
    for view, per_ds in scores.items():
        for d, splits in enumerate(per_ds):
            for s, v in enumerate(splits):
                if v is None or (isinstance(v, float) and np.isnan(v)):
                    continue
                rows.append({"view": view, "method": view.replace("-Default", ""), "dataset": f"d{d}", "split": s,
                             "regime": regime, "score": v, "origin": "builtin", "imputed": False})
    return pd.DataFrame(rows)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def small_store(tmp_path_factory):
    """A small synthetic SQLite store with one user submission, and its dataset statistics CSV."""
    from orchestrator.analysis.synthetic import synthetic_dataset_stats, synthetic_trials, write_store

    d = tmp_path_factory.mktemp("store")
    trials = synthetic_trials(supervised=("MLP", "GCN", "GAT", "GCNII"), gfms=("GraphPFN", "GVT"), n_datasets=6,
                              n_trials=12, gfm_trials=3, user_methods=("MyNet",), seed=1)
    store = d / "runs.sqlite"
    write_store(trials, store)
    stats = d / "stats.csv"
    synthetic_dataset_stats(6, seed=1).to_csv(stats, index=False)
    return store, stats


@pytest.fixture(scope="session")
def built_report(small_store, tmp_path_factory):
    """The report of ``small_store`` written by the CLI command (shared by the CLI and browser tests)."""
    import typer
    from typer.testing import CliRunner

    from orchestrator.cli.report import report

    app = typer.Typer()
    app.command()(report)
    store, stats = small_store
    out = tmp_path_factory.mktemp("site") / "report"
    res = CliRunner().invoke(app, ["--store", str(store), "--out", str(out), "--dataset-stats", str(stats),
                                   "--bootstrap-rounds", "30"])
    return res, out
