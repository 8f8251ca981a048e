"""Fixtures for the method tests: tiny graphs (tens of nodes: every fit takes milliseconds), the
mirror as weights directory for the frozen-encoder GFMs, and the in-context GFM service with
random-init weights of the official structure (tiny sizes for speed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from contract.weights import load_weights_catalog
from contract.wire import GraphBundle, make_bundle
from methods.g2tfm import G2TFM
from methods.graphpfn import GraphPFN
from methods.nodepfn import NodePFN
from methods.sdk.service import MethodServicer
from tests.conftest import tiny_graph
from tests.methods.helpers import in_process_service, tiny_bundle

torch.set_num_threads(1)  # tiny graphs: threads only add contention


@pytest.fixture
def multiclass() -> tuple[GraphBundle, np.ndarray, np.ndarray]:
    return tiny_bundle()


@pytest.fixture
def binary() -> tuple[GraphBundle, np.ndarray, np.ndarray]:
    return tiny_bundle(classes=2, seed=1)


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


@pytest.fixture
def random_weights(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("NODEGROUND_WEIGHTS", str(tmp_path / "no-weights"))
    monkeypatch.setenv("NODEGROUND_RANDOM_INIT_WEIGHTS", "1")
    monkeypatch.setenv("NODEGROUND_RANDOM_INIT_ARCH", "tiny")
    monkeypatch.delenv("NODEGROUND_MEMORY_BUDGET_BYTES", raising=False)


@pytest.fixture
def pfn_service(random_weights):
    """GraphPFN, NodePFN and G2T-FM in one service over real gRPC: its servicer and a client."""
    servicer = MethodServicer("pfn", [GraphPFN, NodePFN, G2TFM])
    with in_process_service(servicer) as client:
        yield servicer, client
