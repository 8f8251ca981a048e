"""`orchestrator methods new` output passes the contract in-process."""

from __future__ import annotations

import importlib.util
import sys
import tomllib

from typer.testing import CliRunner

from contract.families import load_families
from methods.sdk.service import MethodServicer, build_server
from orchestrator.cli.main import app
from orchestrator.conformance import FAIL, Options, run_checks
from tests.conftest import HANG_S


def test_templates_are_not_a_family():
    assert "templates" not in load_families()


def test_scaffold_builds_an_honest_method_that_passes(tmp_path, request):
    result = CliRunner().invoke(app, ["methods", "new", "demox", "--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == [
        "methods/demox/README.md",
        "methods/demox/__init__.py",
        "methods/demox/manifest.toml",
        "methods/demox/method.py",
        "methods/demox/model.py",
    ]
    manifest = tomllib.loads((tmp_path / "methods/demox/manifest.toml").read_text())
    assert {k: manifest[k] for k in ("family", "kind")} == {"family": "demox", "kind": "supervised"}
    assert set(manifest["cost"]) == {"epoch", "memory"}  # a cost prior to edit, priced like the built-in families
    family = load_families(tmp_path / "methods")["demox"]
    assert family.image == "nodeground/demox" and family.methods == ("demox",)  # declared once, by its class
    source = (tmp_path / "methods/demox/method.py").read_text()
    assert "{{" not in source and "toml" not in source  # the search space is Python, as in the built-in methods
    again = CliRunner().invoke(app, ["methods", "new", "demox", "--root", str(tmp_path)])
    assert again.exit_code == 2 and "already exists" in again.output
    for bad_name in ("Bad-Name", "demo_x", "demo-x"):
        bad = CliRunner().invoke(app, ["methods", "new", bad_name, "--root", str(tmp_path)])
        assert bad.exit_code == 2 and "lowercase letters and digits" in bad.output, bad.output

    # the scaffold imports itself as methods.demox (method.py reads model.py): its folder is that package
    folder = tmp_path / "methods/demox"
    spec = importlib.util.spec_from_file_location(
        "methods.demox", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    package = importlib.util.module_from_spec(spec)
    request.addfinalizer(lambda: [sys.modules.pop(f"{spec.name}{m}", None) for m in ("", ".method", ".model")])
    sys.modules[spec.name] = package
    spec.loader.exec_module(package)
    method = package.DemoxMethod
    assert {p.name for p in method.search_space} == {"lr", "weight_decay", "optimizer"} and method.default_config[
        "lr"
    ] == 0.05
    method.default_config = {**method.default_config, "max_epochs": 40}  # keep the test short; same code path
    server, port = build_server(MethodServicer("demox", [method]), "127.0.0.1:0")
    server.start()
    try:
        results = run_checks(f"127.0.0.1:{port}", Options(call_timeout=HANG_S, deadline=0.5, grace=HANG_S))
    finally:
        server.stop(grace=0)
    failed = {r.name: r.detail for r in results if r.status == FAIL}
    assert not failed, failed
