from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest


def results_rows(scores: dict[str, list[list[float]]], regime: str = "10/10/80") -> pd.DataFrame:
    """Results (view-level) table: scores[view][dataset_i][split] = primary metric."""
    rows = []
    for view, per_ds in scores.items():
        for d, splits in enumerate(per_ds):
            for s, v in enumerate(splits):
                if v is None or (isinstance(v, float) and np.isnan(v)):
                    continue
                method = view.removesuffix("-Default")
                rows.append(
                    {
                        "view": view,
                        "method": method,
                        "method_name": method,
                        "dataset": f"d{d}",
                        "split": s,
                        "variant": "default" if view != method else "tuned",
                        "regime": regime,
                        "score": v,
                        "origin": "builtin",
                        "imputed": False,
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def small_store(tmp_path_factory):
    """A small synthetic SQLite store with one user submission, and its dataset statistics CSV."""
    from tests.synthetic_trials import synthetic_dataset_stats, synthetic_trials, write_store

    d = tmp_path_factory.mktemp("store")
    trials = synthetic_trials(
        supervised=("mlp", "gcn", "gat", "gcnii"),
        gfms=("graphpfn", "gvt"),
        n_datasets=6,
        n_trials=12,
        gfm_trials=3,
        user_methods=("mynet",),
        seed=1,
    )
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
    res = CliRunner().invoke(
        app, ["--store", str(store), "--out", str(out), "--dataset-stats", str(stats), "--bootstrap-rounds", "30"]
    )
    return res, out


REPO = Path(__file__).resolve().parents[3]
# This checkout's code run as the console script runs it (as tests/orchestrator/cli/test_cli.py does).
ORCHESTRATOR = [sys.executable, "-c", "from orchestrator.cli.main import app; app()"]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
#: The cell removed from the real sweep's store, so the report must impute it.
REMOVED = {"method": "mlp", "dataset": "texas", "regime": "10/10/80", "split": 1}


@pytest.fixture(scope="session")
def real_store(tmp_path_factory):
    """A store written by a real sweep (embedded services, mirror data and weights), one cell deleted afterwards.

    GraphAny runs on wisconsin, one of its checkpoints' pretraining graphs: the sweep must never run that checkpoint
    there, and the overlap audit must catch a result that did (``relabelled_report``).
    """
    from tests.conftest import MIRROR

    if not (MIRROR / "MANIFEST.tsv").exists():
        pytest.skip(f"no dataset mirror at {MIRROR} (set NODEGROUND_MIRROR)")
    store = tmp_path_factory.mktemp("real") / "runs.sqlite"
    cmd = [
        *ORCHESTRATOR,
        "run",
        "--methods",
        "mlp,gcn,graphany",
        "--datasets",
        "synthetic-homophilous,texas,wisconsin",
        "--regimes",
        "10/10/80,50/25/25",
        "--splits",
        "0,1",
        "--budget",
        "2",
        "--time-limit",
        "30",
        "--services",
        "embedded",
        "--parallel",
        "2",
        "--store",
        str(store),
    ]
    env = {
        **ENV,
        "NODEGROUND_MIRROR": str(MIRROR),
        "NODEGROUND_WEIGHTS": str(MIRROR),  # the mirror holds the weights too
        # two single-threaded replicas: graphs of a few hundred nodes keep one core busy, not two
        "NODEGROUND_THREADS": "1",
    }
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    with sqlite3.connect(store) as db:
        n = db.execute(
            "DELETE FROM trials WHERE method = ? AND dataset = ? AND regime = ? AND split = ?", tuple(REMOVED.values())
        ).rowcount
    assert n == 2
    return store


def run_report(store: Path, out: Path) -> subprocess.CompletedProcess:
    """`orchestrator report` on ``store``, as a user runs it (no statistics CSV)."""
    from tests.conftest import MIRROR

    return subprocess.run(
        [*ORCHESTRATOR, "report", "--store", str(store), "--out", str(out), "--bootstrap-rounds", "20"],
        env={**ENV, "NODEGROUND_MIRROR": str(MIRROR)},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="session")
def real_report(real_store, tmp_path_factory):
    """`orchestrator report` on the real store."""
    out = tmp_path_factory.mktemp("real-site") / "report"
    return run_report(real_store, out), out


@pytest.fixture(scope="session")
def relabelled_report(real_store, tmp_path_factory):
    """The report on a copy of the real store whose GraphAny trials on wisconsin say they used the wisconsin checkpoint.

    Such rows are what a store written before the sweep's exclusion (or by another harness) holds: the audit, not
    the sweep, has to catch them.
    """
    d = tmp_path_factory.mktemp("relabelled")
    store = d / "runs.sqlite"
    with sqlite3.connect(real_store) as src, sqlite3.connect(store) as dst:
        src.backup(dst)
    with sqlite3.connect(store) as db:
        n = db.execute(
            "UPDATE trials SET config_json = json_set(config_json, '$.checkpoint', 'wisconsin') "
            "WHERE method = 'graphany' AND dataset = 'wisconsin'"
        ).rowcount
    assert n > 0
    out = d / "report"
    return run_report(store, out), out
