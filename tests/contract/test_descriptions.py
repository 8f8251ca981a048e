"""A family's description as data: read without its code, refused when not its family's, compared by type."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from contract.descriptions import (
    KIND_NAMES,
    KINDS,
    DescriptionError,
    description_path,
    description_text,
    read_description,
    spec_differences,
    spec_from_proto,
)
from contract.families import Family
from contract.space import ChoiceParam, FloatParam, IntParam, config_to_proto, param_to_proto
from contract.v1 import method_service_pb2 as pb

SPACE = (
    FloatParam("lr", 1e-4, 0.1, log=True),
    IntParam("hidden", 8, 256, log=True),
    ChoiceParam("norm", ("none", "batch")),
)
DEFAULTS = {"lr": 0.01, "hidden": 64, "norm": "none", "residual": False, "max_epochs": 500}


def _info(name: str = "alpha", **changes) -> pb.MethodInfo:
    info = pb.MethodInfo(
        name=name,
        version="2026-12-01",
        family="ngfam",
        kind=pb.METHOD_KIND_SUPERVISED,
        capabilities=pb.Capabilities(max_classes=10, supports_binary=True, supports_multiclass=True),
        default_config=config_to_proto(changes.pop("defaults", DEFAULTS)),
        search_space=[param_to_proto(p) for p in SPACE],
        library_versions={"torch": "2.13.0"},
        description="a test method",
    )
    for key, value in changes.items():
        setattr(info, key, value)
    return info


def _write(root, text: str, family: str = "ngfam") -> Family:
    description_path(family, root).parent.mkdir(parents=True, exist_ok=True)
    description_path(family, root).write_text(text)
    return Family(family, f"nodeground/{family}", f"methods.{family}", ("alpha", "beta"))


def test_a_description_reads_back_as_the_specs_its_describe_gives(tmp_path):
    family = _write(tmp_path, description_text("ngfam", [_info("alpha"), _info("beta")]))
    specs = read_description(family, tmp_path)
    assert list(specs) == ["alpha", "beta"]
    alpha = specs["alpha"]
    assert (alpha.version, alpha.family, alpha.kind, alpha.max_classes) == ("2026-12-01", "ngfam", "supervised", 10)
    assert alpha.default_config == DEFAULTS and type(alpha.default_config["hidden"]) is int
    assert type(alpha.default_config["lr"]) is float and alpha.search_space == SPACE
    assert alpha.library_versions == {}  # the service's environment is not part of the method
    assert "torch" not in description_path("ngfam", tmp_path).read_text()


def test_a_family_without_a_description_has_none(tmp_path):
    assert read_description(Family("ngfam", "nodeground/ngfam", "methods.ngfam", ("alpha",)), tmp_path) is None


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "is not a method description"),
        (json.dumps({"family": "ngfam"}), "is not a method description"),
        (
            json.dumps({"family": "ngfam", "methods": [{"name": "alpha", "kind": "NO_SUCH_KIND"}]}),
            "not a method description",
        ),
        (description_text("ngfam", [_info("alpha")]), "describes alpha but family ngfam declares alpha, beta"),
        (description_text("other", [_info("alpha"), _info("beta")]), "family ngfam declares"),
    ],
)
def test_a_description_that_is_not_its_familys_is_refused_in_one_line(tmp_path, text, message):
    family = _write(tmp_path, text)
    with pytest.raises(DescriptionError, match=message) as error:
        read_description(family, tmp_path)
    assert "\n" not in str(error.value) and "python -m methods.describe" in str(error.value)


def test_spec_differences_name_what_differs_and_count_types():
    spec = spec_from_proto(_info())
    assert spec_differences(spec, spec) == []
    assert spec_differences(spec, dataclasses.replace(spec, library_versions={"torch": "9"})) == []
    assert spec_differences(spec, dataclasses.replace(spec, version="2027-01-01")) == ["version"]
    as_float = dataclasses.replace(spec, default_config={**DEFAULTS, "hidden": 64.0})  # equal in Python, not in a key
    assert spec_differences(spec, as_float) == ["default_config"]
    wider = dataclasses.replace(spec, search_space=(FloatParam("lr", 1e-4, 0.2, log=True), *SPACE[1:]))
    assert spec_differences(spec, wider) == ["search_space"]
    choice = dataclasses.replace(spec, search_space=(*SPACE[:2], ChoiceParam("norm", ("none", "batch", "layer"))))
    assert spec_differences(spec, choice) == ["search_space"]


def test_one_home_encodes_a_methods_info():
    """Describe's encoder and the readers share ``contract.descriptions``' mapping: no other product module builds a
    MethodInfo with fields or keeps its own table of kinds."""
    repo = Path(__file__).resolve().parents[2]
    built = re.compile(r"MethodInfo\(\s*\w+=|METHOD_KIND_(SUPERVISED|GFM)")
    elsewhere = [
        str(path.relative_to(repo))
        for root in ("orchestrator", "methods", "nodeground", "contract")
        for path in sorted((repo / root).rglob("*.py"))
        if "v1" not in path.parts and path != repo / "contract" / "descriptions.py" and built.search(path.read_text())
    ]
    assert elsewhere == []
    assert set(KINDS) == {"supervised", "gfm"} and {KIND_NAMES[v] for v in KINDS.values()} == set(KINDS)
