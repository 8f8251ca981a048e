"""`orchestrator plan` and `orchestrator backtest` as users meet them: the protocol planned from data alone, one-line
refusals, the estimate's tables, the back-test's error."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from contract.families import load_families
from orchestrator.cli.main import app
from orchestrator.data.registry import tasks
from tests.conftest import HANG_S

REPO = Path(__file__).resolve().parents[3]
runner = CliRunner()
EVERY_METHOD = ",".join(m for f in load_families().values() for m in f.methods)
CATALOG = ",".join(t["name"] for t in tasks())


@pytest.mark.parametrize(
    "args, message",
    [
        (["--methods", "mpl", "--datasets", "cora"], "unknown method 'mpl'"),
        (["--methods", "mlp", "--datasets", "corra"], "unknown dataset 'corra'"),
        (["--methods", "mlp", "--datasets", "cora", "--shards", "0"], "0 shards: the plan has 1 cell(s)"),
        (["--methods", "mlp", "--datasets", "cora", "--shards", "1000000000"], "splits into 1 to 1 shards"),
        (["--methods", "mlp", "--datasets", "cora", "--from", "x.sqlite"], "--from is read by --estimate"),
        (
            ["--methods", "mlp", "--datasets", "cora", "--estimate", "--from", "none.sqlite"],
            "no run store at none.sqlite",
        ),
    ],
)
def test_bad_plan_input_is_one_line_and_exit_2(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["plan", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and result.output.count("\n") == 1, result.output


def test_a_family_without_a_description_is_refused_in_one_line(monkeypatch):
    import orchestrator.plan

    real = orchestrator.plan.read_description
    monkeypatch.setattr(orchestrator.plan, "read_description", lambda f, *a: None if f.name == "gvt" else real(f, *a))
    result = runner.invoke(app, ["plan", "--methods", "gcn,gvt", "--datasets", "cora"])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "family gvt (method gvt) has no description" in result.output
    assert "python -m methods.describe gvt" in result.output and "--endpoint gvt=HOST:PORT" in result.output


def _plan_env(tmp_path: Path) -> dict[str, str]:
    """A machine that has never run anything: an empty cache, no mirror, no weights."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NODEGROUND_")}
    return {**env, "NODEGROUND_CACHE": str(tmp_path / "cache"), "NODEGROUND_WEIGHTS": str(tmp_path / "weights")}


@pytest.mark.slow
@pytest.mark.timeout(4 * HANG_S)  # a hang only: about 20 s of CPU on two cores
def test_the_paper_protocol_plans_without_services_data_or_weights(tmp_path):
    """Every built-in method, every catalog dataset, both regimes, splits 0-4, budget 201, 64 shards."""
    from tests.contract.test_cli_without_torch import PRELUDE

    args = ["plan", "--methods", EVERY_METHOD, "--datasets", CATALOG, "--regimes", "10/10/80,50/25/25"]
    args += ["--splits", "0,1,2,3,4", "--budget", "201", "--shards", "64"]
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE, *args],  # torch and method code cannot be imported: no service can start here
        cwd=REPO,
        env={**_plan_env(tmp_path), "PYTHONPATH": str(REPO), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=4 * HANG_S,
    )
    assert done.returncode == 0, done.stderr
    from orchestrator.plan import SweepPlan, described_specs, make_plan
    from orchestrator.services.directory import resolve_methods

    methods = tuple(EVERY_METHOD.split(","))
    expected = make_plan(
        SweepPlan(methods, tuple(CATALOG.split(",")), ("10/10/80", "50/25/25"), (0, 1, 2, 3, 4), 201),
        described_specs(methods, resolve_methods(list(methods))),
    )
    assert f"{expected.total:,} trials in {len(expected.cells):,} cells, 64 shard(s)" in done.stdout
    assert all(f"{i}/64" in done.stdout for i in range(64))
    assert not (tmp_path / "cache").exists() and not (tmp_path / "weights").exists()


def _store(path: Path, datasets: dict[str, tuple[int, int, int]], seed: int = 0) -> None:
    """Records of mlp and gcn on ``datasets`` (name: nodes, edges, features) whose seconds and peaks follow the
    priors' form (``tests.orchestrator.price.helpers.gcn_law``), with 5% noise."""
    from orchestrator.price import Size
    from orchestrator.records import TrialRecord
    from orchestrator.store import Store
    from tests.orchestrator.price.helpers import gcn_law

    rng = np.random.default_rng(seed)
    host = json.dumps({"device": "cpu", "hostname": "test"})
    with Store(path) as store:
        for method, scale in (("mlp", 0.3), ("gcn", 1.0)):
            for name, (nodes, edges, features) in datasets.items():
                for regime in ("10/10/80", "50/25/25"):
                    for index, hidden in enumerate((16, 64, 256)):
                        config = {"hidden": hidden, "num_layers": 2, "lr": 0.01 * (index + 1), "max_epochs": 200,
                                  "patience": 50}  # fmt: skip
                        seconds, peak = gcn_law(Size(nodes, edges, features, 5, False), regime, config, 100)
                        seconds *= scale * rng.lognormal(0, 0.05)
                        store.write(
                            TrialRecord(
                                trial_key=f"{method}@v|{name}|{regime}|0|{hidden}|h", method=method, method_version="v",
                                family="gnn", kind="supervised", dataset=name, dataset_hash="h", task_type="multiclass",
                                num_classes=5, regime=regime, split=0, trial_index=index, is_default=index == 0,
                                config_json=json.dumps(config), config_hash="c", seed=0, status="ok",
                                fit_service_s=seconds * 0.9, predict_service_s=seconds * 0.1,
                                fit_peak_rss_bytes=int(peak), predict_peak_rss_bytes=int(2e8),
                                fit_info_json=json.dumps({"epochs": 100, "best_epoch": 49}), host_json=host,
                            )
                        )  # fmt: skip


# catalog datasets whose entries publish every size the estimate reads
SIZED = {t["name"]: (t["nodes"], t["edges"], t["features"]) for t in tasks() if t.get("edges") and t.get("features")}


def test_plan_estimate_prices_each_method_regime_and_shard_and_names_what_it_cannot(tmp_path, monkeypatch):
    monkeypatch.setenv("NODEGROUND_CACHE", str(tmp_path / "cache"))
    names = sorted(SIZED, key=lambda n: SIZED[n][0])[:6]
    _store(tmp_path / "r.sqlite", {n: SIZED[n] for n in names})
    args = ["plan", "--methods", "mlp,gcn,gat", "--datasets", ",".join([*names, "ogbn-arxiv"]), "--budget", "5"]
    result = runner.invoke(app, [*args, "--regimes", "10/10/80,50/25/25", "--shards", "3"])
    assert result.exit_code == 0 and "hours" not in result.output
    result = runner.invoke(
        app,
        [*args, "--regimes", "10/10/80,50/25/25", "--shards", "3", "--estimate", "--from", str(tmp_path / "r.sqlite")],
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "estimated cost on cpu" in out and "hours (high)" in out and "memory (high)" in out
    assert "unpriced: 70 trials in 14 cells, not in the hours above (no records of gat" in out
    priced = next(line for line in out.splitlines() if line.startswith("priced: "))
    assert priced.startswith("priced: 140 trials, ")  # mlp and gcn: priced and unpriced are never summed
    assert "cells beyond the recorded sizes (interval widened)" in out  # ogbn-arxiv is far larger than the records'
    assert "graph sizes imputed" in out and "ogbn-arxiv" in out.split("graph sizes imputed")[1]


def test_backtest_prints_predicted_against_measured_per_method_and_the_median(tmp_path, monkeypatch):
    monkeypatch.setenv("NODEGROUND_CACHE", str(tmp_path / "cache"))
    names = sorted(SIZED, key=lambda n: SIZED[n][0])[:8]
    _store(tmp_path / "r.sqlite", {n: SIZED[n] for n in names})
    result = runner.invoke(app, ["backtest", "--from", str(tmp_path / "r.sqlite")])
    assert result.exit_code == 0, result.output
    assert "each of 8 in turn" in result.output and "median predicted / measured over 2 methods" in result.output
    median = float(result.output.split("time ")[1].split()[0])
    assert 0.8 < median < 1.25  # the records follow the model's form: held-out datasets are predicted closely
    one = runner.invoke(app, ["backtest", "--from", str(tmp_path / "r.sqlite"), "--holdout", names[-1]])
    assert one.exit_code == 0 and names[-1] in one.output
    assert runner.invoke(app, ["backtest"]).exit_code == 2


def test_predicted_hours_are_an_expectation_so_sums_of_noisy_trials_are_not_priced_low():
    """Times vary log-normally around the model (load, early stopping) and a sweep's hours are a sum: fitted on errors
    relative to the records, the model would price a sum low (at sigma 1, by 40%); fitted on errors relative to its
    predictions, each trial's estimate is its mean, and the sum comes out."""
    import pandas as pd

    from orchestrator.price import learn_cost_model, size_values, sizes_of, trial_costs
    from tests.orchestrator.price.helpers import SMALL, probe, records

    rng = np.random.default_rng(0)
    clean = pd.concat([records(SMALL), probe()])
    noisy = clean.assign(fit_service_s=clean["fit_service_s"] * rng.lognormal(0, 1.0, len(clean)))
    costs = trial_costs(clean)
    costs = costs[costs["method"] == "gcn"]
    sizes = sizes_of(costs["dataset"])
    values = [size_values(sizes[d], r) for d, r in zip(costs["dataset"], costs["regime"], strict=True)]
    priced = [learn_cost_model(f).methods["gcn"].seconds(values, list(costs["config"])).sum() for f in (clean, noisy)]
    assert 1.3 < priced[1] / priced[0] < 2.2, priced  # the mean of exp(N(0, 1)) is 1.65


@pytest.mark.slow
@pytest.mark.timeout(4 * HANG_S)  # a hang only: the probe of one method takes about a minute
def test_a_fresh_machine_prices_a_sweep_with_one_command(tmp_path):
    """No store: `plan --estimate` probes this machine (real services), stores the probe's records apart and prices
    from them; the price names the hardware; the probe's rows are on no table `show` prints."""
    from orchestrator.price import read_records

    env = {**_plan_env(tmp_path), "NODEGROUND_THREADS": "1", "COLUMNS": "200"}
    args = ["plan", "--methods", "mlp", "--datasets", "texas,cora", "--regimes", "10/10/80", "--budget", "3"]
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args, "--estimate"],
        cwd=tmp_path, env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=4 * HANG_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "calibration: probing mlp on this machine" in done.stderr and "calibration: calibration-n500-" in done.stderr
    hardware = next(line for line in done.stdout.splitlines() if line.startswith("hardware: "))
    assert "1 thread" in hardware and "cores" in hardware and "from the cost probe" in hardware
    assert "priced: 6 trials" in done.stdout and "unpriced:" not in done.stdout
    probe = tmp_path / "cache" / "calibration.sqlite"
    rows = read_records([probe])
    assert len(rows) >= 4 and set(rows["protocol"]) == {"calibration"}
    shown = subprocess.run(
        [sys.executable, "-m", "orchestrator", "show", "--store", str(probe)],
        env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=HANG_S,
    )  # fmt: skip
    assert shown.returncode == 2 and "other than the cost probe's" in shown.stderr + shown.stdout


@pytest.mark.slow
def test_the_paper_protocol_is_priced_with_its_hardware_apart_totals_and_intervals_around_each_estimate(
    tmp_path, monkeypatch
):
    """The old paper-scale price summed 27% priced trials into a total of all, and printed appnp at 84,890 h with an
    interval of 109,509-119,549 h. Priced from gcn's and appnp's records only, every row's interval holds its hours,
    and the unpriced trials are a line of their own."""
    import re

    import pandas as pd

    from tests.orchestrator.price.helpers import SMALL, probe, records
    from tests.orchestrator.test_slurm import _write_rows

    monkeypatch.setenv("NODEGROUND_CACHE", str(tmp_path / "cache"))
    appnp = records(SMALL, method="appnp", seed=3)
    appnp["config_json"] = appnp["config_json"].str.replace('"hidden"', '"K": 10, "hidden"')
    frame = pd.concat([records(SMALL), probe(), appnp], ignore_index=True)
    _write_rows(tmp_path / "r.sqlite", frame)
    args = ["plan", "--methods", EVERY_METHOD, "--datasets", CATALOG, "--regimes", "10/10/80,50/25/25"]
    args += ["--splits", "0,1,2,3,4", "--budget", "201", "--estimate", "--from", str(tmp_path / "r.sqlite")]
    result = runner.invoke(app, args, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert re.search(r"^hardware: Test CPU, 2 threads, on a host of 2 cores", out, re.M)
    priced = int(re.search(r"^priced: ([\d,]+) trials", out, re.M).group(1).replace(",", ""))
    unpriced = int(re.search(r"^unpriced: ([\d,]+) trials", out, re.M).group(1).replace(",", ""))
    assert priced > 0 and unpriced > 0 and f"{priced + unpriced:,} trials in" in out
    rows = re.findall(r"│ (\w+) +│ [\d/a-z]+ +│ +([\d,]+) │ +([\d,.]+) │ +([\d,.]+) - ([\d,.]+) │", out)
    assert any(r[0] == "appnp" for r in rows) and any(r[0] == "all" for r in rows)
    for _, _, hours, low, high in rows:
        assert float(low.replace(",", "")) <= float(hours.replace(",", "")) <= float(high.replace(",", ""))


@pytest.mark.parametrize("value, shown", [(-86400.0, "fit_service_s -86400.0"), ("slow", "fit_service_s slow")])
def test_a_corrupted_cost_probe_store_is_refused_in_one_line(tmp_path, monkeypatch, value, shown):
    """Finding 15: negative seconds in the probe's store priced silently (an interval of 0.00 to 8,638.9 h); a text
    value ended in `error: unexpected TypeError`."""
    monkeypatch.setenv("NODEGROUND_CACHE", str(tmp_path / "cache"))
    names = sorted(SIZED, key=lambda n: SIZED[n][0])[:3]
    probe = tmp_path / "cache" / "calibration.sqlite"
    probe.parent.mkdir()
    _store(probe, {n: SIZED[n] for n in names})
    with contextlib.closing(sqlite3.connect(probe)) as db, db:
        db.execute("UPDATE trials SET fit_service_s = ? WHERE rowid = 2", (value,))
    args = ["plan", "--methods", "mlp,gcn", "--datasets", ",".join(names), "--estimate", "--from", str(probe)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"error: {probe}: trial ") and f"holds {shown}, which no trial computes" in (
        result.output
    )
