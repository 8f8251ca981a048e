"""Ephris through its upstream package: a random-parameter checkpoint in the package's own format,
binary, multiclass and >10-class tasks, and the official path's verification of the hub config's sha256."""

from __future__ import annotations

import json

import numpy as np
import pytest

from contract.weights import WeightsError, file_sha256, load_weights_catalog, url_path
from methods.ephris import Ephris
from methods.ephris.model import (
    TINY_ARCH,
    WEIGHTS_ID,
    locate_checkpoint,
    model_config,
    random_checkpoint,
    verify_official,
)
from tests.methods.helpers import cpu_context, tiny_bundle


def test_a_random_checkpoint_is_in_the_packages_own_format(tmp_path):
    from ephris.checkpoints import load_checkpoint

    path = random_checkpoint(tmp_path / "ephris.pt", TINY_ARCH)
    payload = load_checkpoint(path)
    assert payload["format_version"] == 2 and payload["model"]["width"] == TINY_ARCH["width"]
    assert file_sha256(random_checkpoint(tmp_path / "again" / "ephris.pt", TINY_ARCH)) == file_sha256(path)  # seeded


@pytest.mark.parametrize("classes", [2, 4, 12])
def test_binary_multiclass_and_more_than_ten_classes(classes, monkeypatch):
    monkeypatch.setenv("NODEGROUND_RANDOM_INIT_WEIGHTS", "1")
    monkeypatch.setenv("NODEGROUND_RANDOM_INIT_ARCH", "tiny")
    graph, train, val = tiny_bundle(n=6 * classes, classes=classes, features=4)
    method, ctx = Ephris(), cpu_context(seed=3)
    state = method.fit(graph, train, val, method.resolve_config({}), ctx)
    probs = method.predict(state, graph)
    assert probs.shape == (graph.num_nodes, classes) and np.isfinite(probs).all()
    assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    assert ctx.info["ecoc"] is (classes > 10) and ctx.info["random_state"] == 3
    assert ctx.info["weights_id"] == "random-init" and ctx.info["weights_official"] is False
    assert ctx.info["n_context"] == len(train)  # the training nodes are the context, validation is not


def _hub_layout(root, sha256: str | None = None):
    """A local copy of the pinned hub revision: ephris.pt (random parameters) and its config.json."""
    entry = load_weights_catalog()[WEIGHTS_ID]
    checkpoint = random_checkpoint(root / entry.relative_path, TINY_ARCH)
    config = root / url_path(entry.sha256_from)
    config.write_text(
        json.dumps(
            {
                "file": "ephris.pt",
                "format_version": 2,
                "sha256": sha256 or file_sha256(checkpoint),
                "model": model_config(TINY_ARCH),
            }
        )
    )
    return checkpoint, config


def test_the_official_path_verifies_the_hub_configs_sha256(tmp_path, monkeypatch):
    monkeypatch.setenv("NODEGROUND_WEIGHTS", str(tmp_path))
    checkpoint, config = _hub_layout(tmp_path)
    path, provenance = locate_checkpoint()
    assert path == checkpoint and provenance.official and provenance.weights_id == WEIGHTS_ID
    verify_official(checkpoint, config)  # the package's own load_hub_config + verify_checkpoint
    _hub_layout(tmp_path, sha256="0" * 64)
    with pytest.raises(WeightsError, match="fail verification"):
        locate_checkpoint()  # the catalog's check: the digest config.json records
    with pytest.raises(WeightsError, match="package's own check"):
        verify_official(checkpoint, config)  # the package's check, on its own


def test_the_packages_own_check_also_refuses_a_config_it_does_not_accept(tmp_path, monkeypatch):
    """Right digest, wrong schema: the catalog's check passes, the package's refuses, so the fit never loads it."""
    monkeypatch.setenv("NODEGROUND_WEIGHTS", str(tmp_path))
    checkpoint, config = _hub_layout(tmp_path)
    config.write_text(
        json.dumps({"file": "ephris.pt", "format_version": 1, "sha256": file_sha256(checkpoint), "model": {}})
    )
    with pytest.raises(WeightsError, match="package's own check"):
        locate_checkpoint()


def test_weights_fetch_gets_the_file_the_pinned_config_names_and_refuses_another(tmp_path, monkeypatch):
    """`orchestrator weights fetch ephris` from a mirror laid out like the hub: config.json first, then the
    checkpoint against the sha256 it records; a checkpoint that does not match is refused."""
    from typer.testing import CliRunner

    from orchestrator.cli import weights as weights_cli

    mirror, weights = tmp_path / "mirror", tmp_path / "weights"
    checkpoint, _ = _hub_layout(mirror)
    monkeypatch.setenv("NODEGROUND_MIRROR", str(mirror))
    monkeypatch.setenv("NODEGROUND_WEIGHTS", str(weights))
    monkeypatch.setenv("NODEGROUND_CACHE", str(tmp_path / "cache"))
    fetched = CliRunner().invoke(weights_cli.app, ["fetch", "ephris"])
    assert fetched.exit_code == 0, fetched.output
    entry = load_weights_catalog()[WEIGHTS_ID]
    assert file_sha256(weights / entry.relative_path) == file_sha256(checkpoint)
    assert locate_checkpoint()[1].official
    _hub_layout(mirror, sha256="0" * 64)
    (weights / entry.relative_path).unlink()
    (weights / url_path(entry.sha256_from)).unlink()
    refused = CliRunner().invoke(weights_cli.app, ["fetch", "ephris"])
    assert refused.exit_code == 1 and "checksum mismatch" in refused.output  # a file that fails its check: exit 1


def test_a_graph_too_large_for_the_memory_budget_is_refused_before_it_is_built(monkeypatch):
    from methods.sdk.memory import ResourceError

    monkeypatch.setenv("NODEGROUND_RANDOM_INIT_WEIGHTS", "1")
    monkeypatch.setenv("NODEGROUND_RANDOM_INIT_ARCH", "tiny")
    monkeypatch.setenv("NODEGROUND_MEMORY_BUDGET_BYTES", str(1 << 20))
    graph, train, val = tiny_bundle(n=200, classes=3, features=64)
    ctx = cpu_context()
    with pytest.raises(ResourceError, match="feature tokens"):
        Ephris().fit(graph, train, val, {}, ctx)
