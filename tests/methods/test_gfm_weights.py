"""The weights catalog of GraphAny, RGVT and Node4All: mirror-consistent, verified, tamper-evident, fetchable."""

from __future__ import annotations

import hashlib

import pytest
import torch
from typer.testing import CliRunner

from contract.weights import WeightsError, load_weights_catalog
from methods.graphany import GraphAny
from methods.gvt import RGVT
from methods.node4all import Node4All
from orchestrator.cli import weights as weights_cli
from tests.methods.helpers import cpu_context as ctx

OURS = ("graphany", "gvt", "node4all")
QUICK = {"max_epochs": 3, "patience": 3}
CASES = [
    (GraphAny, "graphany-arxiv", {"checkpoint": "arxiv"}),
    (RGVT, "gvt-seed42", {"depth": 1, **QUICK}),
    (Node4All, "node4all-cgt", QUICK),
]


def test_catalog_matches_mirror_manifest(mirror):
    manifest = {}
    for line in (mirror / "MANIFEST.tsv").read_text().splitlines()[1:]:
        url, _, sha, license_, _ = line.split("\t")
        manifest[url] = (sha, license_)
    entries = [e for e in load_weights_catalog().values() if e.model in OURS]
    assert len(entries) == 10
    for entry in entries:
        assert manifest[entry.url] == (entry.sha256, entry.license), entry.id
        path = mirror / entry.relative_path
        assert hashlib.sha256(path.read_bytes()).hexdigest() == entry.sha256


@pytest.mark.parametrize("method,weights_id,config", CASES, ids=[c[1] for c in CASES])
def test_fit_reports_official_weights(weights, graph, method, weights_id, config):
    bundle, train, val = graph
    context = ctx()
    m = method()
    m.fit(bundle, train, val, m.resolve_config(config), context)
    entry = load_weights_catalog()[weights_id]
    assert context.info["weights_id"] == weights_id
    assert context.info["weights_sha256"] == entry.sha256
    assert context.info["weights_official"] is True


@pytest.mark.parametrize("method,weights_id,config", CASES, ids=[c[1] for c in CASES])
def test_tampered_weights_fail_verification(tampered, graph, method, weights_id, config):
    bundle, train, val = graph
    path = tampered(weights_id)
    m = method()
    with pytest.raises(WeightsError, match="fail verification") as err:
        m.fit(bundle, train, val, m.resolve_config(config), ctx())
    assert weights_id in str(err.value) and str(path) in str(err.value)


def test_other_weights_file_is_labeled_unofficial(weights, graph, tmp_path):
    bundle, train, val = graph
    state = torch.load(weights / load_weights_catalog()["gvt-seed42"].relative_path, weights_only=True)
    state["mlp.lins.1.bias"] = state["mlp.lins.1.bias"] + 0.01  # a fine-tuned variant, say
    modified = tmp_path / "my_gvt.pth"
    torch.save(state, modified)
    m = RGVT()
    context = ctx()
    m.fit(bundle, train, val, m.resolve_config({"depth": 1, "weights_file": str(modified), **QUICK}), context)
    assert context.info["weights_official"] is False
    assert context.info["weights_sha256"] == hashlib.sha256(modified.read_bytes()).hexdigest()
    assert context.info["weights_id"] == f"file:{modified.name}"


def test_cli_fetch_and_list(mirror, tmp_path, monkeypatch):
    monkeypatch.setenv("NODEGROUND_MIRROR", str(mirror))
    monkeypatch.setenv("NODEGROUND_WEIGHTS", str(tmp_path / "w"))
    runner = CliRunner()
    result = runner.invoke(weights_cli.app, ["fetch", "node4all", "graphany-cora"])
    assert result.exit_code == 0, result.output
    entry = load_weights_catalog()["node4all-cgt"]
    assert (tmp_path / "w" / entry.relative_path).is_file()
    listing = runner.invoke(weights_cli.app, ["list"])
    assert listing.exit_code == 0
    rows = {line.split()[1]: line for line in listing.output.splitlines() if line.startswith("│")}
    assert rows["node4all-cgt"].rstrip(" │").endswith("ok") and rows["gvt-seed0"].rstrip(" │").endswith("missing")
    bad = runner.invoke(weights_cli.app, ["fetch", "no-such-weights"])
    assert bad.exit_code == 2 and "unknown weights" in bad.output


def _offline(monkeypatch, mirror):
    """``weights fetch`` as on a machine without network: mirror files come, the others are unreachable."""
    from urllib.parse import urlparse

    from orchestrator.data.fetch import FetchError, fetch

    def offline_fetch(url, sha256, dest=None, **options):
        local = mirror / urlparse(url).netloc / urlparse(url).path.lstrip("/")
        if not local.exists():
            raise FetchError(
                f"could not download {url}: ConnectionError: offline; not in the mirror either (looked for {local})"
            )
        return fetch(url, sha256, dest, **options)

    monkeypatch.setattr(weights_cli, "fetch", offline_fetch)


def test_fetch_everything_offline_names_what_is_ready_and_what_cannot_run(mirror, tmp_path, monkeypatch):
    from urllib.parse import urlparse

    monkeypatch.setenv("NODEGROUND_MIRROR", str(mirror))
    monkeypatch.setenv("NODEGROUND_WEIGHTS", str(tmp_path / "w"))
    _offline(monkeypatch, mirror)
    result = CliRunner().invoke(weights_cli.app, ["fetch"])
    assert result.exit_code == 0, result.output  # everything reachable came; the rest is named
    out = " ".join(result.output.split())
    assert "ready: graphany (4 file(s)), gvt (5 file(s)), node4all (1 file(s))" in out
    assert "cannot run: graphpfn (lacks limix-16m, graphpfn-1.3-adapters;" in out
    assert "cannot run: nodepfn (lacks nodepfn-epoch30;" in out and "cannot run: g2tfm" in out
    catalog = load_weights_catalog()
    absent = [e for e in catalog.values() if not (mirror / urlparse(e.url).netloc / urlparse(e.url).path[1:]).exists()]
    assert absent and f"{len(absent)} of {len(catalog)} weights files are unreachable from here" in out
    # what a requested family needs is there: success; a family that cannot run: failure, named
    ok = CliRunner().invoke(weights_cli.app, ["fetch", "--family", "graphany", "--family", "gnn"])
    assert ok.exit_code == 0 and "ready: graphany (4 file(s))" in ok.output and "cannot run" not in ok.output
    no = CliRunner().invoke(weights_cli.app, ["fetch", "--family", "gvt", "--family", "nodepfn"])
    assert no.exit_code == 1 and "error: not ready: nodepfn" in no.output
    unknown = CliRunner().invoke(weights_cli.app, ["fetch", "--family", "nope"])
    assert unknown.exit_code == 2 and "unknown family nope" in unknown.output


def test_fetch_fails_on_a_file_that_does_not_verify(mirror, tmp_path, monkeypatch):
    entry = load_weights_catalog()["node4all-cgt"]
    bad_mirror = tmp_path / "mirror"
    (bad_mirror / entry.relative_path).parent.mkdir(parents=True)
    (bad_mirror / entry.relative_path).write_bytes((mirror / entry.relative_path).read_bytes() + b"tampered")
    monkeypatch.setenv("NODEGROUND_MIRROR", str(bad_mirror))
    monkeypatch.setenv("NODEGROUND_WEIGHTS", str(tmp_path / "w"))
    result = CliRunner().invoke(weights_cli.app, ["fetch", "node4all-cgt"])
    assert result.exit_code == 1 and "failed verification: node4all-cgt" in result.output


class _Exploit:
    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        import os

        return (os.system, (f"touch {self.marker}",))


def _weights_loaders():
    from methods.graphany.checkpoint import CheckpointError, load_checkpoint
    from methods.sdk.frozen import load_state_dict
    from methods.sdk.weights import safe_torch_load

    return {
        "gvt-node4all-state-dict": (load_state_dict, WeightsError),
        "pfn-safe-torch-load": (safe_torch_load, WeightsError),
        "graphany-checkpoint": (load_checkpoint, CheckpointError),
    }


@pytest.mark.parametrize("loader", ["gvt-node4all-state-dict", "pfn-safe-torch-load", "graphany-checkpoint"])
def test_every_weights_loader_refuses_pickled_code(tmp_path, loader):
    """A checkpoint whose pickle would run ``os.system`` is refused by every family's loader; nothing runs."""
    load, error = _weights_loaders()[loader]
    marker = tmp_path / "pwned"
    torch.save({"lins.0.weight": torch.zeros(2, 2), "evil": _Exploit(marker)}, tmp_path / "evil.pt")
    with pytest.raises(error) as info:
        load(tmp_path / "evil.pt")
    assert "\n" not in str(info.value) and "system" in str(info.value)
    assert not marker.exists()
