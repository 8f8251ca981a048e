"""Tiny graphs, a CPU fit context, a method that sleeps, the in-context GFMs' tiny architecture and frozen-encoder
checks for the method tests."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from contract.weights import load_weights_catalog
from contract.wire import GraphBundle, make_bundle
from methods.sdk import Capabilities, Config, Method
from methods.sdk.frozen import load_state_dict
from methods.sdk.method import FitContext
from methods.sdk.service import MethodServicer, build_server
from orchestrator.data.graph import canonical_edges
from orchestrator.services.client import MethodClient
from tests.conftest import HANG_S, tiny_graph


@contextlib.contextmanager
def in_process_service(servicer: MethodServicer, graph_dir: str = "") -> Iterator[MethodClient]:
    """``servicer`` over real gRPC on a free loopback port, in this process: a healthy client of it (given
    ``graph_dir`` to hand graphs over in)."""
    server, port = build_server(servicer, "127.0.0.1:0")
    server.start()
    client = MethodClient(f"127.0.0.1:{port}", graph_dir=graph_dir)
    try:
        client.wait_healthy(HANG_S)
        yield client
    finally:
        client.close()
        servicer.stop()
        server.stop(0)


class Sleeper(Method):
    """Works for ``config["seconds"]`` in small steps, checking its deadline between steps (as the SDK asks), then
    predicts uniform probabilities. A subclass gives its name, its default ``seconds`` and their search space."""

    version = "test"
    capabilities = Capabilities(uses_gpu=False)

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> Any:
        end = time.monotonic() + float(config["seconds"])
        while time.monotonic() < end:
            ctx.check()
            time.sleep(0.01)
        return graph.num_classes

    def predict(self, state: Any, graph: GraphBundle) -> np.ndarray:
        return np.full((graph.num_nodes, state), 1.0 / state, dtype=np.float32)


#: A short training run for the frozen-encoder GFMs' heads.
QUICK = {"max_epochs": 30, "patience": 10}


def tiny_bundle(
    n: int = 48, classes: int = 3, features: int = 6, seed: int = 0
) -> tuple[GraphBundle, np.ndarray, np.ndarray]:
    """A ring with chords and class-informative features; returns (bundle, train, val)."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    x = (rng.normal(size=(n, features)) + y[:, None]).astype(np.float32)
    ring = np.stack([np.arange(n), (np.arange(n) + 1) % n])
    chords = np.stack([np.arange(0, n, 2), (np.arange(0, n, 2) + classes) % n])
    edges = canonical_edges(np.concatenate([ring, chords], axis=1), n)
    idx = rng.permutation(n)
    train, val = np.sort(idx[: n // 2]), np.sort(idx[n // 2 : 3 * n // 4])
    visible = np.full(n, -1)
    visible[train], visible[val] = y[train], y[val]
    return make_bundle(x, edges, visible, classes), train, val


def homophilous_bundle(
    n: int = 90, classes: int = 3, seed: int = 0
) -> tuple[GraphBundle, np.ndarray, np.ndarray, np.ndarray]:
    """A small homophilous SBM graph every graph method should learn; returns (bundle, train, val, labels)."""
    from orchestrator.data.synthetic import sbm_graph

    g = sbm_graph(
        "learnable",
        num_nodes=n,
        num_classes=classes,
        num_features=8,
        avg_degree=6,
        homophily=0.9,
        feature_signal=0.8,
        seed=seed,
    )
    idx = np.random.default_rng(seed).permutation(n)
    train, val = np.sort(idx[: n // 2]), np.sort(idx[n // 2 : 3 * n // 4])
    visible = np.full(n, -1)
    visible[train], visible[val] = g.y[train], g.y[val]
    return make_bundle(g.x, g.edge_index, visible, classes), train, val, g.y


def cpu_context(seed: int = 0) -> FitContext:
    return FitContext(seed=seed, device=torch.device("cpu"))


def ring_graph(n: int, classes: int, features: int = 6, seed: int = 0):
    """An undirected ring with chords and self-loops, 60 % of its nodes labelled: (bundle, all labels)."""
    x, e, y = tiny_graph(n, classes=classes, features=features, seed=seed)
    e = np.concatenate([e, e[::-1], np.stack([np.arange(n), np.arange(n)])], axis=1)  # undirected + self-loops
    e = np.unique(e, axis=1)
    labels = y.copy()
    n_lab = int(n * 0.6)
    labels[n_lab:] = -1
    return make_bundle(x, e, labels, classes), y


def frozen_checkpoint(weights, weights_id):
    """The state dict of a catalog entry in the weights directory ``weights``."""
    return load_state_dict(weights / load_weights_catalog()[weights_id].relative_path)


def assert_frozen(module, reference):
    """``module`` trains nothing and holds exactly the ``reference`` weights."""
    assert not any(p.requires_grad for p in module.parameters())
    for key, value in module.state_dict().items():
        torch.testing.assert_close(value, reference[key], rtol=0, atol=0)


def assert_probs(probs, n=48, c=3):
    """Finite class probabilities, one row per node, each summing to one."""
    assert probs.shape == (n, c) and np.isfinite(probs).all()
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-5)
