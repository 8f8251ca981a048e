"""A sweep run as shards (`run --shard I/N`) and merged (`orchestrator merge`) equals the unsharded sweep;
a service found through a DNS name (`--endpoint gnn=dns:///NAME:PORT`)."""

from __future__ import annotations

import pytest

from orchestrator.cli.main import app
from orchestrator.services.embedded import EmbeddedServices
from orchestrator.store import read_trials
from tests.orchestrator.cli.test_cli import runner

SWEEP = ["--methods", "mlp,gcn", "--datasets", "synthetic-tiny", "--splits", "0,1,2", "--budget", "1"]


@pytest.fixture(scope="module")
def gnn_endpoint():
    """One real gnn service for every run of the module (each run would otherwise start its own)."""
    with EmbeddedServices() as services:
        yield services.endpoint("gnn")


def _run(endpoint: str, *args: str) -> None:
    result = runner.invoke(app, ["run", *SWEEP, "--endpoint", f"gnn={endpoint}", "--no-warmup", *args])
    assert result.exit_code == 0, result.output


def test_shards_cover_the_sweep_once_and_merge_into_it(tmp_path, gnn_endpoint):
    _run(gnn_endpoint, "--store", str(tmp_path / "whole.sqlite"))
    for index in range(4):
        _run(gnn_endpoint, "--shard", f"{index}/4", "--store", str(tmp_path / f"shard-{index}.sqlite"))
    shard_keys = [set(read_trials(tmp_path / f"shard-{i}.sqlite")["trial_key"]) for i in range(4)]
    assert sum(map(len, shard_keys)) == len(set().union(*shard_keys))  # no trial in two shards
    result = runner.invoke(
        app, ["merge", "--into", str(tmp_path / "all.sqlite"), *(str(tmp_path / f"shard-{i}.sqlite") for i in range(4))]
    )
    assert result.exit_code == 0, result.output
    whole, merged = read_trials(tmp_path / "whole.sqlite"), read_trials(tmp_path / "all.sqlite")
    assert sorted(merged["trial_key"]) == sorted(whole["trial_key"]) and len(whole) == 6
    columns = ["trial_key", "status", "val_loss", "test_primary"]
    assert (
        merged[columns]
        .sort_values("trial_key")
        .reset_index(drop=True)
        .equals(whole[columns].sort_values("trial_key").reset_index(drop=True))
    )


def test_a_bad_shard_is_one_line(tmp_path):
    for bad in ("3/3", "1", "a/2", "-1/2"):
        result = runner.invoke(app, ["run", *SWEEP, "--shard", bad, "--store", str(tmp_path / "r.sqlite")])
        assert result.exit_code == 2 and "--shard must look like I/N" in result.output, (bad, result.output)


def test_a_sweep_reaches_its_service_through_a_dns_name(tmp_path, gnn_endpoint):
    port = gnn_endpoint.rpartition(":")[2]
    result = runner.invoke(
        app,
        [
            "run",
            *SWEEP,
            "--endpoint",
            f"gnn=dns:///localhost:{port}",
            "--no-warmup",
            "--store",
            str(tmp_path / "r.sqlite"),
        ],
    )
    assert result.exit_code == 0, result.output
    trials = read_trials(tmp_path / "r.sqlite")
    assert set(trials["endpoint"]) == {gnn_endpoint} and (trials["status"] == "ok").all()
