"""The image build's smoke test (`methods.serve --check`): a family's installed dependencies may conflict
with its upstream's pins only where its manifest declares it ([dependencies.differs])."""

from __future__ import annotations

import dataclasses

import pytest

import methods.serve as serve
from contract.families import load_families
from methods.serve import check, main, undeclared_conflicts

DECLARED = (
    "nodeground 0.1.0 requires bencheval, which is not installed.\n"  # the project, installed --no-deps on purpose
    "ephris 1.0.1 has requirement torch==2.11.0, but you have torch 2.13.0+cpu.\n"
    "ephris 1.0.1 has requirement torch-geometric==2.8.0, but you have torch-geometric 2.8.1.\n"
)


def test_only_declared_conflicts_pass():
    ephris = load_families()["ephris"]
    assert set(ephris.differs) == {"torch", "torch-geometric"}
    assert undeclared_conflicts(ephris, DECLARED) == [] and "smoke ok" in check(ephris, DECLARED)
    assert undeclared_conflicts(ephris, "No broken requirements found.\n") == []
    missing = "ephris 1.0.1 requires huggingface-hub, which is not installed."
    other = "huggingface-hub 1.20.1 has requirement typer<0.26.0,>=0.20.0, but you have typer 0.29.2."
    assert undeclared_conflicts(ephris, DECLARED + missing + "\n" + other) == [missing, other]
    with pytest.raises(RuntimeError, match="dependencies.differs"):
        check(ephris, other)
    assert undeclared_conflicts(load_families()["gnn"], DECLARED) == DECLARED.splitlines()[1:]  # gnn declares none


@pytest.mark.parametrize("where", ["relative/graphs", "{tmp}/absent", "{tmp}/a-file"])
def test_a_graph_directory_that_is_not_an_absolute_directory_is_refused_before_serving(tmp_path, capsys, where):
    (tmp_path / "a-file").write_text("")
    assert main(["--family", "gnn", "--port", "0", "--graph-dir", where.format(tmp=tmp_path)]) == 2
    assert "is not an absolute path to a directory" in capsys.readouterr().err


def test_a_malformed_cost_prior_fails_the_image_check_and_the_service_start(monkeypatch, capsys):
    """The family's resource checks read its prior: an image with a malformed one fails its build's smoke check, and
    its service refuses to start (so `validate` sees it), each saying which table is wrong."""
    gnn = load_families()["gnn"]
    broken = dataclasses.replace(gnn, cost={**gnn.cost, "gat": {**gnn.cost["gat"], "check": {"memory": ["edges"]}}})
    with pytest.raises(RuntimeError, match=r"gnn: its cost prior is malformed: .*\[cost.gat\]: check.memory names"):
        check(broken, None)
    monkeypatch.setattr(serve, "load_families", lambda: {"gnn": broken})
    assert main(["--family", "gnn", "--port", "0"]) == 2
    assert "its cost prior is malformed" in capsys.readouterr().err
