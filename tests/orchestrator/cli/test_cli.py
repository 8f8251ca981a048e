"""The `orchestrator` command as users meet it: clear one-line errors, a real sweep, resume, show."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contract.settings import ORCHESTRATOR_SETTINGS
from orchestrator.cli.main import app
from tests.conftest import HANG_S, TINY_SWEEP

REPO = Path(__file__).resolve().parents[3]
# This checkout's code (not whichever copy of the package the environment installed), run as the console script runs it.
ORCHESTRATOR = [sys.executable, "-c", "from orchestrator.cli.main import app; app()"]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
runner = CliRunner()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--methods", "mpl", "--datasets", "synthetic-tiny"], "unknown method 'mpl'; known methods: "),
        (
            ["--methods", "mlp", "--datasets", "synthetic-tinny"],
            "unknown dataset 'synthetic-tinny'; did you mean synthetic-tiny",
        ),
        ([*TINY_SWEEP, "--budget", "-1"], "--budget must be between 1 and 10000, got -1"),
        ([*TINY_SWEEP, "--budget", "99999999999999999999"], "--budget must be between 1 and 10000"),
        ([*TINY_SWEEP, "--time-limit", "nan"], "--time-limit must be a number of seconds in (0, 604800], got nan"),
        ([*TINY_SWEEP, "--time-limit", "inf"], "--time-limit must be a number of seconds"),
        ([*TINY_SWEEP, "--time-limit", "-5"], "--time-limit must be a number of seconds"),
        ([*TINY_SWEEP, "--time-limit", "0"], "--time-limit must be a number of seconds"),
        ([*TINY_SWEEP, "--parallel", "99999999999"], "--parallel must be between 0 (one per replica found) and 1024"),
        ([*TINY_SWEEP, "--regimes", "public"], "--regimes public: synthetic-tiny has no published split"),
        ([*TINY_SWEEP, "--splits", "0,x"], "--splits must be comma-separated integers"),
        ([*TINY_SWEEP, "--splits", "9"], "split index 9 is outside 0..4"),
        ([*TINY_SWEEP, "--regimes", "20/20/60"], "unknown regime '20/20/60'"),
        ([*TINY_SWEEP, "--endpoint", "mlp"], "--endpoint must look like NAME=HOST:PORT"),
        ([*TINY_SWEEP, "--parallel", "-1"], "--parallel must be between 0 (one per replica found) and 1024, got -1"),
    ],
)
def test_bad_arguments_give_one_line_and_exit_2(tmp_path, args, message):
    result = runner.invoke(app, ["run", *args, "--store", str(tmp_path / "r.sqlite")])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "endpoint, message",
    [
        ("gnn=127.0.0.1:112936", "--endpoint 'gnn=127.0.0.1:112936': port '112936' must be an integer in 1..65535"),
        ("gnn=127.0.0.1:0", "port '0' must be an integer in 1..65535"),
        ("gnm=127.0.0.1:50051", "'gnm' is neither a method nor a family of this checkout; did you mean gnn"),
        ("gnn=999.1.1.1:50051", "host '999.1.1.1' is neither an IP address"),
        ("gnn=a b:50051", "host 'a b' is neither an IP address"),
        ("gnn=[::zz]:50051", "'::zz' in brackets is not an IPv6 address"),
        ("gnn=dns:///gnn:70000", "port '70000' must be an integer in 1..65535"),
    ],
)
def test_an_endpoint_no_service_can_have_is_refused_before_anything_starts(tmp_path, endpoint, message):
    """Finding 11: port 47400 + 65536 ran on 47400 and stored the impossible endpoint; a mistyped family name was
    ignored and a local service started instead."""
    result = runner.invoke(app, ["run", *TINY_SWEEP, "--endpoint", endpoint, "--store", str(tmp_path / "r.sqlite")])
    assert result.exit_code == 2 and result.output.startswith("error: ") and result.output.count("\n") == 1
    assert message in result.output, result.output
    assert not (tmp_path / "r.sqlite").exists()  # refused before the store or a service


def test_an_endpoint_that_does_not_answer_is_named(tmp_path):
    proc = subprocess.run(
        [
            *ORCHESTRATOR,
            "run",
            *TINY_SWEEP,
            "--endpoint",
            "mlp=127.0.0.1:9",
            "--store",
            str(tmp_path / "r.sqlite"),
        ],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: method service at 127.0.0.1:9 did not become healthy")
    assert "Traceback" not in proc.stderr + proc.stdout


def test_show_refuses_a_missing_store(tmp_path):
    result = runner.invoke(app, ["show", "--store", str(tmp_path / "none.sqlite")])
    assert result.exit_code == 2 and "no run store at" in result.output


def test_run_then_rerun_resumes_and_show_prints_the_selection(tmp_path):
    store = tmp_path / "runs.sqlite"
    cmd = [
        *ORCHESTRATOR,
        "run",
        "--methods",
        "mlp,gcn",
        "--datasets",
        "synthetic-tiny",
        "--splits",
        "0,1",
        "--budget",
        "1",
        "--store",
        str(store),
    ]
    first = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=HANG_S)
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("synthetic-tiny") == 4 and "accuracy" in first.stdout
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*), SUM(status = 'ok') FROM trials").fetchone() == (4, 4)
        stamps = db.execute("SELECT trial_key, finished_at FROM trials").fetchall()
    subset = [*cmd[:-5], "1", *cmd[-4:]]  # --splits 1
    again = subprocess.run(subset, env=ENV, capture_output=True, text=True, timeout=HANG_S)
    assert again.returncode == 0, again.stderr
    assert (
        again.stdout.count("synthetic-tiny") == 2
    )  # its results table lists this run's cells (split 1), not the store
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT trial_key, finished_at FROM trials").fetchall() == stamps  # nothing rerun
    shown = subprocess.run(
        [*ORCHESTRATOR, "show", "--store", str(store)], env=ENV, capture_output=True, text=True, timeout=HANG_S
    )
    assert shown.returncode == 0 and shown.stdout.count("synthetic-tiny") == 4


def test_parallel_defaults_to_the_replicas_found_for_the_sweep(monkeypatch):
    from orchestrator.cli.services import replicas_found

    found = {"gnn": ["a:1", "b:1", "c:1", "d:1"], "graphany": ["e:1"], "gcn": ["f:1", "g:1"]}
    assert replicas_found({"gcn", "gnn"}, found) == 4  # one container per GPU on 4 GPUs
    assert replicas_found({"gcn"}, found) == 2 and replicas_found({"graphany"}, found) == 1
    assert replicas_found({"mlp", "gnn-other"}, found) == 1 and replicas_found({"gnn"}, {}) == 1
    # a DNS name counts as the addresses behind it (a Swarm dnsrr service with 3 tasks)
    tasks = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (f"10.0.1.{i}", 50051)) for i in (3, 4, 5)]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: tasks)
    assert replicas_found({"gnn"}, {"gnn": ["dns:///gnn:50051"]}) == 3


@pytest.mark.slow  # two orchestrator runs and a fetch through real processes: about a minute
def test_missing_gfm_weights_stop_the_run_before_any_trial_and_name_the_fetch_command(tmp_path, mirror):
    """The documented path (docs/running.md): `orchestrator run` without the weights says which and how to fetch
    them; after the fetch, it runs."""
    env = {**ENV, "NODEGROUND_CACHE": str(tmp_path / "cache"), "NODEGROUND_MIRROR": str(mirror)}
    env.pop("NODEGROUND_WEIGHTS", None)  # the default place, as for a new user
    store = tmp_path / "runs.sqlite"
    # embedded services: containers other runs left on this Docker engine are not this test's
    cmd = [
        *ORCHESTRATOR,
        "run",
        "--methods",
        "graphany,mlp",
        "--datasets",
        "synthetic-tiny",
        "--budget",
        "2",
        "--services",
        "embedded",
        "--store",
        str(store),
    ]
    refused = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2, refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    fetch = "orchestrator weights fetch graphany-arxiv graphany-cora graphany-product graphany-wisconsin"
    assert (
        len(errors) == 1
        and "graphany not ready: weights graphany-arxiv not found at" in errors[0]
        and f"`{fetch}`" in errors[0]
    )
    assert str(tmp_path / "cache" / "weights") in errors[0]  # where the fetch puts them: where the service reads them
    assert "Traceback" not in refused.stderr
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM trials").fetchone() == (0,)  # nothing recorded, nothing to skip later
    fetched = subprocess.run([*ORCHESTRATOR, *fetch.split()[1:]], env=env, capture_output=True, text=True, timeout=300)
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(store) as db:
        assert db.execute(
            "SELECT method, COUNT(*), SUM(status = 'ok') FROM trials GROUP BY method ORDER BY method"
        ).fetchall() == [("graphany", 2, 2), ("mlp", 2, 2)]


def _outcome_method(modes: tuple[str, ...]):
    """A method named like a built-in (so `--endpoint mlp=...` routes to it) whose configurations end in ``modes``."""
    import numpy as np

    from methods.sdk import Capabilities, ChoiceParam, Method, ResourceError

    class Outcomes(Method):
        name, version = "mlp", "test"
        capabilities = Capabilities(uses_gpu=False)
        default_config = {"mode": "ok"}
        search_space = (ChoiceParam("mode", modes),)

        def fit(self, graph, train, val, config, ctx):
            if config["mode"] == "crash":
                raise RuntimeError("boom\nsecond line")
            if config["mode"] == "oom":
                raise ResourceError("needs 81 GiB, 80 GiB available")
            return graph.num_classes

        def predict(self, state, graph):
            return np.full((graph.num_nodes, state), 1.0 / state, dtype=np.float32)

    return Outcomes


@pytest.mark.parametrize("modes, code", [(("ok", "oom"), 0), (("ok", "crash"), 1)])
def test_run_exits_non_zero_and_summarises_when_a_trial_failed(tmp_path, modes, code):
    from methods.sdk.service import MethodServicer, build_server

    server, port = build_server(MethodServicer("gnn", [_outcome_method(modes)]), "127.0.0.1:0")
    server.start()
    try:
        args = [
            "run",
            *TINY_SWEEP,
            "--budget",
            "2",
            "--endpoint",
            f"mlp=127.0.0.1:{port}",
        ]
        result = runner.invoke(app, [*args, "--store", str(tmp_path / "r.sqlite")])
    finally:
        server.stop(0)
    assert result.exit_code == code, result.output  # (the in-process service logs its method's traceback here too)
    if code:
        summary = result.output[result.output.index("did not succeed") :]
        assert "1 trial(s) of this run did not succeed" in result.output
        assert (
            "mlp" in summary and "synthetic-tiny" in summary and "failed" in summary and "RuntimeError: boom" in summary
        )
        assert "second line" not in summary  # first error line only
    else:
        assert "did not succeed" not in result.output  # oom (and timeout) are accepted outcomes


def test_repeated_endpoints_are_replicas():
    from orchestrator.cli.options import parse_endpoints

    assert parse_endpoints(["gnn=127.0.0.1:1", "gnn=127.0.0.1:2", "mlp=h:3", "gnn=127.0.0.1:1"]) == {
        "gnn": ["127.0.0.1:1", "127.0.0.1:2"],
        "mlp": ["h:3"],
    }


def _fake_store(path):
    from orchestrator.records import TrialRecord
    from orchestrator.store import ServiceRecord, Store

    with Store(path) as store:
        for split in (0, 1):
            for index, (status, val_loss) in enumerate([("ok", 0.9), ("ok", 0.4), ("timeout", None), ("ok", 0.4)]):
                store.write(TrialRecord(
                    trial_key=f"gcn@v|d|10/10/80|{split}|{index}", method="gcn", method_version="v", family="gnn",
                    kind="supervised", dataset="d", dataset_hash="h", task_type="multiclass", num_classes=3,
                    regime="10/10/80", split=split, trial_index=index, is_default=index == 0,
                    config_json=f'{{"i": {index}}}', config_hash=str(index), seed=split,
                    status=status, val_loss=val_loss, test_accuracy=0.5 + index / 10 if val_loss else None,
                    test_primary=0.5 + index / 10 if val_loss else None,
                    primary_metric="accuracy" if val_loss else None,
                    fit_service_s=1.0 + index, predict_service_s=0.25, fit_peak_rss_bytes=100 + index,
                    predict_peak_rss_bytes=50,
                ))  # fmt: skip
        store.write_service(
            ServiceRecord("127.0.0.1:1", "gnn", "embedded", "gnn", "2026-01-01T00:00:00", 3.5, 0.25, "gcn")
        )


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export_writes_trials_selected_workflow_and_services(tmp_path, fmt):
    import pandas as pd

    from orchestrator.results import SELECTED_COLUMNS, selected_results

    store = tmp_path / "runs.sqlite"
    _fake_store(store)
    result = runner.invoke(app, ["export", "--store", str(store), "--format", fmt, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    read = pd.read_parquet if fmt == "parquet" else pd.read_csv
    tables = {name: read(tmp_path / "out" / f"{name}.{fmt}") for name in ("trials", "selected", "workflow", "services")}
    assert len(tables["trials"]) == 8 and len(tables["services"]) == 1
    selected = tables["selected"]
    assert tuple(selected.columns) == SELECTED_COLUMNS and len(selected) == 2
    row = selected.iloc[0]
    # lowest validation loss, ties to the earlier trial; tuning time over every executed trial (timeouts included)
    assert row["selected_trial_index"] == 1 and row["n_trials"] == 4 and row["n_ok"] == 3 and row["n_failed"] == 1
    assert row["training_tuning_s"] == pytest.approx(1 + 2 + 3 + 4) and row["prediction_s"] == pytest.approx(0.25)
    assert (
        row["workflow_s"] == pytest.approx(10.25) and row["workflow_peak_bytes"] == 103 and row["memory_kind"] == "cpu"
    )
    assert list(selected["selected_trial_index"]) == list(selected_results(tables["trials"])["trial_index"])
    full = tables["workflow"][tables["workflow"]["budget"].astype(str) == "full"]
    assert list(full["workflow_s"]) == pytest.approx(list(selected["workflow_s"]))


def test_export_and_show_workflow_refuse_bad_input_in_one_line(tmp_path):
    store = tmp_path / "runs.sqlite"
    _fake_store(store)
    bad = runner.invoke(app, ["export", "--store", str(store), "--format", "xlsx"])
    assert bad.exit_code == 2 and "--format must be parquet or csv" in bad.output
    missing = runner.invoke(app, ["export", "--store", str(tmp_path / "none.sqlite")])
    assert missing.exit_code == 2 and "no run store at" in missing.output
    shown = runner.invoke(app, ["show", "--workflow", "--store", str(store)])
    assert shown.exit_code == 0 and "Workflow cost per cell" in shown.output and "10.250" in shown.output
    assert "Service warm-up" in shown.output and "3.500" in shown.output


def test_methods_list_shows_every_family_and_method_from_the_manifests():
    from contract.families import load_families

    result = CliRunner().invoke(app, ["methods", "list"])
    assert result.exit_code == 0, result.output
    families = load_families()
    assert f"in {len(families)} families" in result.output
    lines = result.output.splitlines()
    for family in families.values():
        for method in family.methods:
            assert any(
                f" {method} " in line
                and f" {family.name} " in line
                and f" {family.kind} " in line
                and family.image in line
                for line in lines
            ), (method, result.output)


def _containers(monkeypatch, *containers):
    """Docker, as discovery sees it, running ``containers`` (tests.orchestrator.services.test_containers fakes)."""
    from orchestrator.services import containers as ct
    from tests.orchestrator.services.test_containers import FakeClient

    monkeypatch.setattr(ct, "_docker_client", lambda timeout: FakeClient(list(containers)))


def _run_docker(tmp_path, *extra):
    args = ["run", *TINY_SWEEP, "--services", "docker", *extra]
    return runner.invoke(app, [*args, "--store", str(tmp_path / "r.sqlite")])


def test_a_sweep_uses_no_container_of_another_checkout(tmp_path, monkeypatch):
    from tests.orchestrator.services.test_containers import _container

    _containers(monkeypatch, _container("theirs", 9, checkout="ng-other-0123abcd"))
    result = _run_docker(tmp_path)
    assert result.exit_code == 2
    assert "ignored 1 container of other checkouts (gnn; --endpoint FAMILY=HOST:PORT uses any service)" in result.output
    assert "error: --services docker: no running container of this checkout for gnn" in result.output
    assert "127.0.0.1:9" not in result.output and "Traceback" not in result.output


def test_a_sweep_refuses_this_checkouts_container_of_another_version_in_one_line(tmp_path, monkeypatch):
    from tests.orchestrator.services.test_containers import _container

    _containers(monkeypatch, _container("mine", 9, version="2020-01-01"))
    result = _run_docker(tmp_path)
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "run other versions than it holds: gnn 2020-01-01" in errors[0], result.output
    assert "Traceback" not in result.output


def test_a_sweep_says_in_one_line_which_containers_it_uses_and_dials_only_those(tmp_path, monkeypatch):
    from contract.families import load_families
    from orchestrator.services import containers as ct
    from orchestrator.services import directory
    from tests.orchestrator.services.test_containers import _container

    monkeypatch.setattr(directory, "HEALTH_TIMEOUT_S", 0.5)  # both ports are closed: only which one is dialled counts
    _containers(monkeypatch, _container("mine", 9), _container("theirs", 7, checkout="ng-other-0123abcd"))
    result = _run_docker(tmp_path)
    version = ct.family_version(load_families()["gnn"])
    lines = [line for line in result.output.splitlines() if line.startswith("using ")]
    assert lines == [
        f"using 1 container of this checkout (project {ct.checkout_id()}): gnn {version}; "
        "ignored 1 container of other checkouts (gnn; --endpoint FAMILY=HOST:PORT uses any service)"
    ], result.output
    assert "error: method service at 127.0.0.1:9 did not become healthy" in result.output
    assert "127.0.0.1:7" not in result.output


@pytest.mark.parametrize("raw", ["abc", "-1", "1e99"])
@pytest.mark.parametrize("name", [s.env for s in ORCHESTRATOR_SETTINGS])
def test_a_bad_setting_in_the_environment_is_one_line_and_exit_2_whatever_the_command(monkeypatch, name, raw):
    """The orchestrator checks what it reads, and what its embedded services inherit, before any command runs."""
    monkeypatch.setenv(name, raw)
    result = runner.invoke(app, ["methods", "list"])
    assert result.exit_code == 2 and result.output.strip().count("\n") == 0, result.output
    assert result.output.strip().startswith(f"error: {name}={raw!r}: must be ")
