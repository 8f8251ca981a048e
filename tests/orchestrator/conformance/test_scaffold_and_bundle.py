"""`orchestrator methods new` output passes the contract in-process; bundles seal, verify and merge."""

from __future__ import annotations

import importlib.util
import sys

import pandas as pd
import pytest
import tomllib
from typer.testing import CliRunner

from contract.families import load_families
from methods.sdk.service import MethodServicer, build_server
from orchestrator.cli.main import app
from orchestrator.conformance import FAIL, Options, run_checks
from orchestrator.conformance.bundle import BundleError, finalize_store, load_bundle, merge_trials, seal, verify_bundle
from orchestrator.records import TrialRecord
from orchestrator.store import Store


def test_templates_are_not_a_family():
    assert "templates" not in load_families()


def test_scaffold_builds_an_honest_method_that_passes(tmp_path):
    result = CliRunner().invoke(app, ["methods", "new", "demox", "--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == [
        "methods/demox/README.md",
        "methods/demox/__init__.py",
        "methods/demox/manifest.toml",
        "methods/demox/method.py",
    ]
    manifest = tomllib.loads((tmp_path / "methods/demox/manifest.toml").read_text())
    assert manifest == {"family": "demox", "kind": "supervised"}
    family = load_families(tmp_path / "methods")["demox"]
    assert family.image == "nodeground/demox" and family.methods == ("demox",)  # declared once, by its class
    source = (tmp_path / "methods/demox/method.py").read_text()
    assert "{{" not in source and "toml" not in source  # the search space is Python, as in the built-in methods
    again = CliRunner().invoke(app, ["methods", "new", "demox", "--root", str(tmp_path)])
    assert again.exit_code == 2 and "already exists" in again.output
    for bad_name in ("Bad-Name", "demo_x", "demo-x"):
        bad = CliRunner().invoke(app, ["methods", "new", bad_name, "--root", str(tmp_path)])
        assert bad.exit_code == 2 and "lowercase letters and digits" in bad.output, bad.output

    spec = importlib.util.spec_from_file_location("scaffolded_demox", tmp_path / "methods/demox/method.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    method = module.DemoxMethod
    assert {p.name for p in method.search_space} == {"lr", "weight_decay", "optimizer"} and method.default_config[
        "lr"
    ] == 0.05
    method.default_config = {**method.default_config, "max_epochs": 40}  # keep the test short; same code path
    server, port = build_server(MethodServicer("demox", [method]), "127.0.0.1:0")
    server.start()
    try:
        results = run_checks(f"127.0.0.1:{port}", Options(call_timeout=60, deadline=0.5, grace=5))
    finally:
        server.stop(grace=0)
    failed = {r.name: r.detail for r in results if r.status == FAIL}
    assert not failed, failed


def _record(i: int, origin: str, method: str = "demo") -> TrialRecord:
    return TrialRecord(
        trial_key=f"{method}@1|synthetic-tiny|10/10/80|0|{i}",
        method=method,
        method_version="2026-11-29",
        family=method,
        kind="supervised",
        dataset="synthetic-tiny",
        dataset_hash="h",
        task_type="multiclass",
        num_classes=3,
        regime="10/10/80",
        split=0,
        trial_index=i,
        is_default=i == 0,
        config_json="{}",
        config_hash=str(i),
        seed=0,
        status="ok",
        val_loss=1.0 - 0.1 * i,
        test_primary=0.5 + 0.1 * i,
        test_accuracy=0.5 + 0.1 * i,
        origin=origin,
    )


def _bundle(path, origin="user:abc"):
    path.mkdir()
    with Store(path / "trials.sqlite") as store:
        for i in range(2):
            store.write(_record(i, origin))
    finalize_store(path / "trials.sqlite")
    (path / "submission.json").write_text('{"id": "abc"}\n')
    return seal(path)


def test_bundle_seal_verify_and_tamper(tmp_path):
    checksum = _bundle(tmp_path / "b")
    assert verify_bundle(tmp_path / "b") == checksum
    assert not (tmp_path / "b" / "trials.sqlite-wal").exists()
    trials = load_bundle(tmp_path / "b")
    assert len(trials) == 2 and set(trials["origin"].astype(str)) == {"user:abc"}
    (tmp_path / "b" / "submission.json").write_text('{"id": "evil"}\n')
    with pytest.raises(BundleError, match="changed after the bundle was sealed"):
        verify_bundle(tmp_path / "b")


def test_bundle_refuses_builtin_rows_and_merges(tmp_path):
    _bundle(tmp_path / "fake", origin="builtin")
    with pytest.raises(BundleError, match="user rows only"):
        load_bundle(tmp_path / "fake")
    _bundle(tmp_path / "b")
    builtin = pd.DataFrame([_record(0, "builtin", method="gcn").as_row()])
    merged = merge_trials(builtin, [tmp_path / "b"])
    assert sorted(merged["method"].astype(str).unique()) == ["demo", "gcn"]
    assert dict(zip(merged["method"].astype(str), merged["origin"].astype(str), strict=True)) == {
        "gcn": "builtin",
        "demo": "user:abc",
    }
    clash = pd.DataFrame([_record(0, "builtin", method="demo").as_row()])
    with pytest.raises(BundleError, match="clashes"):
        merge_trials(clash, [tmp_path / "b"])
