"""GFM tests: the mirror as weights directory, tiny graphs, one torch thread."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from contract.weights import load_weights_catalog
from contract.wire import make_bundle
from methods.sdk.method import FitContext
from tests.conftest import tiny_graph


@pytest.fixture
def weights(mirror, monkeypatch) -> Path:
    """The mirror serves as the weights directory (same layout)."""
    monkeypatch.setenv("NODEGROUND_WEIGHTS", str(mirror))
    torch.set_num_threads(1)
    return mirror


@pytest.fixture
def tampered(weights, tmp_path, monkeypatch):
    """Build a weights directory holding a copy of one catalog file with one byte flipped."""

    def make(weights_id: str) -> Path:
        entry = load_weights_catalog()[weights_id]
        dest = tmp_path / "weights" / entry.relative_path
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(weights / entry.relative_path, dest)
        data = bytearray(dest.read_bytes())
        data[len(data) // 2] ^= 0x01
        dest.write_bytes(bytes(data))
        monkeypatch.setenv("NODEGROUND_WEIGHTS", str(tmp_path / "weights"))
        return dest

    return make


@pytest.fixture
def graph():
    x, e, y = tiny_graph(48, classes=3, features=6)
    labels = y.copy()
    labels[36:] = -1
    return make_bundle(x, e, labels, 3), np.arange(0, 24), np.arange(24, 36)


def ctx(seed: int = 0) -> FitContext:
    return FitContext(seed=seed, device=torch.device("cpu"))
