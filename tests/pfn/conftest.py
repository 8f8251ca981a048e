"""The in-context GFM services (GraphPFN, NodePFN, G2T-FM) over real gRPC, with
random-init weights of the official structure (tiny sizes for speed) unless the
real weights are present."""

from __future__ import annotations

import json

import numpy as np
import pytest

from methods.g2tfm import G2TFM
from methods.graphpfn import GraphPFN
from methods.nodepfn import NodePFN
from methods.sdk.service import MethodServicer, build_server
from orchestrator.services.client import MethodClient

TINY_ARCH = {
    "embed_dim": 16, "hid_dim": 32, "nhead": 2, "nlayers": 1, "adapter_heads": 2,  # GraphPFN
    "emsize": 16,  # NodePFN and G2T-FM (nhead above)
    "d_hidden": 16,  # PEARL
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "weights: needs the official pretrained weights in NODEGROUND_WEIGHTS")


@pytest.fixture
def random_weights(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("NODEGROUND_WEIGHTS", str(tmp_path / "no-weights"))
    monkeypatch.setenv("NODEGROUND_RANDOM_INIT_WEIGHTS", "1")
    monkeypatch.setenv("NODEGROUND_RANDOM_INIT_ARCH", json.dumps(TINY_ARCH))
    monkeypatch.delenv("NODEGROUND_MEMORY_BUDGET_BYTES", raising=False)


@pytest.fixture
def service(random_weights):
    servicer = MethodServicer("pfn", [GraphPFN, NodePFN, G2TFM])
    server, port = build_server(servicer, "127.0.0.1:0")
    server.start()
    client = MethodClient(f"127.0.0.1:{port}")
    client.wait_healthy(10)
    yield servicer, client
    client.close()
    server.stop(0)


def ring_graph(n: int, classes: int, features: int = 6, seed: int = 0):
    from contract.wire import make_bundle
    from tests.conftest import tiny_graph

    x, e, y = tiny_graph(n, classes=classes, features=features, seed=seed)
    e = np.concatenate([e, e[::-1], np.stack([np.arange(n), np.arange(n)])], axis=1)  # undirected + self-loops
    e = np.unique(e, axis=1)
    labels = y.copy()
    n_lab = int(n * 0.6)
    labels[n_lab:] = -1
    return make_bundle(x, e, labels, classes), y
