"""Fidelity checks need the dataset mirror (or network); they skip cleanly without it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="session")
def _mirror_and_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    mirror = Path(os.environ.get("NODEGROUND_MIRROR") or REPO.parent / "shared" / "mirror")
    if not (mirror / "MANIFEST.tsv").exists():
        pytest.skip(f"no dataset mirror at {mirror} (set NODEGROUND_MIRROR)")
    os.environ["NODEGROUND_MIRROR"] = str(mirror)
    os.environ.setdefault("NODEGROUND_CACHE", str(tmp_path_factory.mktemp("fidelity-cache")))
    threads = os.environ.get("NODEGROUND_THREADS")
    if threads:
        torch.set_num_threads(int(threads))
