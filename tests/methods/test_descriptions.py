"""Every family's committed description is what its Describe answers: from the code in-process, and from a live service.

A plan reads the descriptions instead of starting services, so a description that drifts from the
code would plan keys for configurations no service runs: these tests fail first.
"""

from __future__ import annotations

import json

import pytest

from contract.descriptions import description_path, read_description, spec_differences
from contract.families import load_families
from methods.describe import generated, main
from orchestrator.services.client import MethodClient
from tests.conftest import served
from tests.contract.test_families import METHOD, _family

FAMILIES = sorted(load_families())


@pytest.mark.parametrize("family", FAMILIES)
def test_the_committed_description_is_what_the_family_describes(family):
    path = description_path(family)
    assert path.exists(), f"{path} is missing: run `make describe`"
    assert path.read_text() == generated(load_families()[family]), f"{path} is stale: run `make describe`"


def test_a_live_service_describes_what_its_description_says():
    family = load_families()["gnn"]
    described = read_description(family)
    with served("gnn") as (_, endpoint):
        client = MethodClient(endpoint)
        try:
            live = {spec.name: spec for spec in client.describe()}
        finally:
            client.close()
    assert list(live) == list(described)
    for name, spec in described.items():
        assert spec_differences(spec, live[name]) == [], name
        assert live[name].library_versions  # the service's environment: in Describe, never in the file
    assert "library_versions" not in description_path("gnn").read_text()


def test_describe_check_names_a_family_without_a_description_and_writing_one_fixes_it(tmp_path, monkeypatch, capsys):
    import methods

    root = tmp_path / "methods"
    _family(root, {"alpha.py": METHOD.format(cls="Alpha", assignment='name = "alpha"\n    version = "2026-12-01"')})
    monkeypatch.setattr(methods, "__path__", [*methods.__path__, str(root)])  # methods.ngfam imports from root
    family = load_families(root)["ngfam"]
    assert read_description(family, root) is None  # a contributor's new family: not described yet
    assert main(["--root", str(root), "--check"]) == 1
    assert "ngfam" in capsys.readouterr().err
    assert main(["--root", str(root)]) == 0
    assert main(["--root", str(root), "--check"]) == 0
    spec = read_description(family, root)["alpha"]
    assert (spec.name, spec.version, spec.family, spec.default_config) == ("alpha", "2026-12-01", "ngfam", {})
    document = json.loads(description_path("ngfam", root).read_text())
    assert document["generated_by"] == "python -m methods.describe ngfam"
