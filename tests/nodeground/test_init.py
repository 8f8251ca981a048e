"""``import nodeground`` is light: no torch, no gRPC, no pandas, nothing read from disk or the network until a name is
used; every public name resolves."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import nodeground

HEAVY = ("torch", "torch_geometric", "grpc", "pandas", "orchestrator", "methods")


def test_the_import_loads_none_of_what_the_names_need():
    code = "import sys, json, nodeground; print(json.dumps(sorted(sys.modules)))"
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                           check=True).stdout))  # fmt: skip
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


@pytest.mark.parametrize("name", nodeground.__all__)
def test_every_public_name_resolves(name):
    assert getattr(nodeground, name) is not None and name in dir(nodeground)


def test_an_unknown_name_says_what_the_package_offers():
    with pytest.raises(AttributeError, match="it offers IN_PROCESS, Evaluator"):
        nodeground.load_tasks  # noqa: B018
