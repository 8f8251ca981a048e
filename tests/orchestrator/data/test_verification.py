"""Verified fetch: a corrupted mirror file fails loudly and leaves nothing half-processed;
files of unknown hash are recorded in the lock at first download and pinned afterwards."""

from __future__ import annotations

import shutil

import pytest

from orchestrator.data.cache import canonical_dir
from orchestrator.data.fetch import FetchError, cache_dir, fetch, read_lock
from orchestrator.data.loaders import load_pyg, no_unverified_downloads
from orchestrator.data.registry import load_dataset

CORA_X = "github.com/kimiyoung/planetoid/raw/master/data/ind.cora.x"


def test_one_flipped_byte_fails_naming_the_file_and_caches_nothing(mirror, tmp_path, monkeypatch):
    bad = tmp_path / "bad-mirror"
    shutil.copytree(mirror / "github.com/kimiyoung", bad / "github.com/kimiyoung")
    target = bad / CORA_X
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    monkeypatch.setenv("NODEGROUND_MIRROR", str(bad))
    with pytest.raises(FetchError, match=r"checksum mismatch for .*ind\.cora\.x"):
        load_dataset("cora")
    assert not canonical_dir().exists() or not list(canonical_dir().iterdir())
    assert not (cache_dir() / "work").exists(), "a reader's scratch directory was left behind"
    assert not list(cache_dir().rglob("*ind.cora.x*")), "the corrupted file reached the cache"
    assert not list(cache_dir().rglob("*.part"))
    # the real file still loads afterwards
    monkeypatch.setenv("NODEGROUND_MIRROR", str(mirror))
    assert load_dataset("cora").num_nodes == 2708


def test_corrupted_cached_file_is_not_trusted(mirror):
    spec_url = "https://" + CORA_X
    digest = "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab"
    path = fetch(spec_url, digest)
    path.write_bytes(b"tampered")
    again = fetch(spec_url, digest)  # re-fetched from the mirror, verified
    assert again.read_bytes() != b"tampered"


def test_unverified_file_is_locked_at_first_download(cache, tmp_path, monkeypatch):
    """The first-seen hash goes into the cache's lock file, never into the checkout."""
    from tests.conftest import REPO

    url = "https://example.org/data/graph.bin"
    checkout = {p: p.stat().st_mtime for p in (REPO / "datasets").iterdir()}
    mirror = tmp_path / "m"
    (mirror / "example.org/data").mkdir(parents=True)
    (mirror / "example.org/data/graph.bin").write_bytes(b"first version")
    monkeypatch.setenv("NODEGROUND_MIRROR", str(mirror))
    first = fetch(url, "unverified")
    recorded = read_lock()[url]
    assert first.read_bytes() == b"first version" and recorded in first.name
    assert (cache / "catalog.lock").read_text().count(url) == 1
    assert {p: p.stat().st_mtime for p in (REPO / "datasets").iterdir()} == checkout
    # upstream changes: the locked hash now refuses it
    (mirror / "example.org/data/graph.bin").write_bytes(b"second version")
    first.unlink()
    with pytest.raises(FetchError, match="checksum mismatch"):
        fetch(url, "unverified")


def test_offline_error_names_url_and_mirror_path(cache, tmp_path, monkeypatch):
    monkeypatch.setenv("NODEGROUND_MIRROR", str(tmp_path / "empty-mirror"))
    monkeypatch.setattr("pooch.retrieve", lambda *a, **k: (_ for _ in ()).throw(ConnectionError("offline")))
    with pytest.raises(FetchError) as err:
        fetch("https://example.org/x.npz", "0" * 64)
    assert "https://example.org/x.npz" in str(err.value) and "empty-mirror/example.org/x.npz" in str(err.value)


def test_readers_cannot_download_unverified(cache):
    """A PyG reader whose files were not placed asks to download: the guard refuses."""
    entry = {
        "name": "amazon-photo",
        "loader": "pyg",
        "args": {"cls": "Amazon", "kwargs": {"name": "Photo"}},
        "files": [],
    }
    with pytest.raises(FetchError, match="refusing an unverified download"):
        load_pyg(entry)
    import torch_geometric.datasets.amazon as module

    with no_unverified_downloads(module):
        pass
    assert module.download_url.__name__ == "download_url"  # restored
