"""Fixtures for the dataset tests: a private cache and lock per test (or per module for the
mirror loads), and the offline mirror of real upstream files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
# Read once, at collection: the `cache` fixture removes the variable from each test's environment.
MIRROR_ENV = os.environ.get("NODEGROUND_MIRROR")


def mirror_path() -> Path:
    return Path(MIRROR_ENV) if MIRROR_ENV else REPO.parent / "shared" / "mirror"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private NODEGROUND_CACHE (its lock file inside, as a user's); no mirror unless a test sets one."""
    monkeypatch.setenv("NODEGROUND_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("NODEGROUND_LOCK", raising=False)
    monkeypatch.delenv("NODEGROUND_MIRROR", raising=False)
    return tmp_path / "cache"


@pytest.fixture
def mirror(cache, monkeypatch):
    path = mirror_path()
    if not (path / "MANIFEST.tsv").exists():
        pytest.skip(f"offline mirror not found at {path} (set NODEGROUND_MIRROR to it)")
    monkeypatch.setenv("NODEGROUND_MIRROR", str(path))
    return path


@pytest.fixture(scope="module")
def mirror_cache(tmp_path_factory):
    """One cache shared by a module's mirror loads (each dataset is loaded once)."""
    path = mirror_path()
    if not (path / "MANIFEST.tsv").exists():
        pytest.skip(f"offline mirror not found at {path} (set NODEGROUND_MIRROR to it)")
    root = tmp_path_factory.mktemp("mirror-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("NODEGROUND_CACHE", str(root / "cache"))
    mp.delenv("NODEGROUND_LOCK", raising=False)
    mp.setenv("NODEGROUND_MIRROR", str(path))
    yield root / "cache"
    mp.undo()
