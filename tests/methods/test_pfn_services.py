"""GraphPFN, NodePFN and G2T-FM through their gRPC service: a fit/predict on a mirror
dataset's published split, limits refused with a clear recorded reason, frozen
parameters, well-formed probabilities, weights provenance in every fit."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from contract.space import value_from_proto
from contract.wire import make_bundle
from methods.sdk.frozen import state_sha256
from tests.methods.helpers import ring_graph

METHODS = ("graphpfn", "nodepfn", "g2tfm")
SMALL = {
    "graphpfn": {"ensemble_size": 2, "d_pca": 16},
    "nodepfn": {"n_ensemble": 2, "n_components": 10, "smoothing_steps": 2},
    "g2tfm": {"pca_dim": 32},
}


@pytest.fixture(scope="module")
def texas_bundle():
    import os

    from tests.conftest import MIRROR

    if not (MIRROR / "MANIFEST.tsv").exists():
        pytest.skip(f"no dataset mirror at {MIRROR} (set NODEGROUND_MIRROR)")
    os.environ.setdefault("NODEGROUND_MIRROR", str(MIRROR))
    from orchestrator.data.registry import load_dataset
    from orchestrator.data.splits import graph_split

    graph = load_dataset("texas")
    split = graph_split(graph, "public", 0)
    labels = np.full(graph.num_nodes, -1, dtype=np.int64)
    seen = np.concatenate([split.train, split.val])
    labels[seen] = graph.y[seen]
    return make_bundle(graph.x, graph.edge_index, labels, graph.num_classes), split, graph.y


def _info(reply) -> dict:
    return {k: value_from_proto(v) for k, v in reply.info.items()}


@pytest.mark.parametrize("method", METHODS)
def test_fit_predict_on_texas_public_split(pfn_service, texas_bundle, method):
    servicer, client = pfn_service
    bundle, split, y = texas_bundle
    client.ensure_graph(bundle)
    fit = client.fit(method, bundle.graph_hash, split.train, split.val, SMALL[method], seed=0, time_limit=None)
    info = _info(fit.value)
    assert info["weights_id"] == "random-init" and info["weights_official"] is False
    assert len(info["weights_sha256"]) == 64 and info["memory_estimate_bytes"] <= info["memory_budget_bytes"]
    assert fit.stats.seconds > 0 and fit.stats.peak_rss_bytes > 0
    net = servicer.models.get(fit.value.model_handle).state.net
    predicted = client.predict(fit.value.model_handle, bundle.num_nodes)
    probs = predicted.value
    assert probs.shape == (bundle.num_nodes, bundle.num_classes) and np.isfinite(probs).all()
    assert (probs >= 0).all() and np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    assert predicted.stats.seconds > 0
    # frozen: the parameters after fit and predict are the ones the fit reported
    assert state_sha256(net) == info["weights_sha256"]
    assert not any(p.requires_grad for p in net.parameters())
    # deterministic for a seed
    again = client.fit(method, bundle.graph_hash, split.train, split.val, SMALL[method], seed=0, time_limit=None)
    assert _info(again.value)["weights_load_seconds"] == 0  # loaded once per process
    np.testing.assert_allclose(client.predict(again.value.model_handle, bundle.num_nodes).value, probs, atol=1e-5)


@pytest.mark.parametrize(
    "method, classes, message", [("nodepfn", 21, "at most 20 classes"), ("g2tfm", 11, "at most 10 classes")]
)
def test_too_many_classes_refused(pfn_service, method, classes, message):
    _, client = pfn_service
    bundle, _ = ring_graph(3 * classes, classes)
    client.ensure_graph(bundle)
    labeled = np.flatnonzero(bundle.labels >= 0)
    with pytest.raises(grpc.RpcError) as err:
        client.fit(method, bundle.graph_hash, labeled[::2], labeled[1::2], SMALL[method], seed=0, time_limit=None)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and message in err.value.details()


def test_graphpfn_uses_ecoc_beyond_ten_classes(pfn_service):
    _, client = pfn_service
    bundle, y = ring_graph(5 * 13, 13)
    client.ensure_graph(bundle)
    labeled = np.flatnonzero(bundle.labels >= 0)
    train, val = labeled[labeled % 2 == 0], labeled[labeled % 2 == 1]
    fit = client.fit(
        "graphpfn", bundle.graph_hash, train, val, {"ensemble_size": 2, "d_pca": 0}, seed=0, time_limit=None
    )
    assert _info(fit.value)["ecoc"] is True
    probs = client.predict(fit.value.model_handle, bundle.num_nodes).value
    assert probs.shape == (bundle.num_nodes, 13) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    with pytest.raises(grpc.RpcError) as err:  # the ECOC code needs at least 2 members for 13 classes
        client.fit("graphpfn", bundle.graph_hash, train, val, {"ensemble_size": 1}, seed=0, time_limit=None)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "ECOC" in err.value.details()


@pytest.mark.parametrize("method", METHODS)
def test_context_over_memory_budget_is_refused_with_the_estimate(pfn_service, monkeypatch, method):
    _, client = pfn_service
    bundle, _ = ring_graph(60, 3)
    client.ensure_graph(bundle)
    labeled = np.flatnonzero(bundle.labels >= 0)
    monkeypatch.setenv("NODEGROUND_MEMORY_BUDGET_BYTES", "20000")
    with pytest.raises(grpc.RpcError) as err:
        client.fit(method, bundle.graph_hash, labeled[:20], labeled[20:], SMALL[method], seed=0, time_limit=None)
    details = err.value.details()
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "estimated" in details and "memory budget of 19.5 KiB" in details and "refused before running" in details


def test_missing_weights_without_random_init_fail_clearly(pfn_service, monkeypatch):
    _, client = pfn_service
    monkeypatch.setenv("NODEGROUND_RANDOM_INIT_WEIGHTS", "0")
    from methods.sdk import frozen

    frozen._CACHE.clear()
    bundle, _ = ring_graph(30, 3)
    client.ensure_graph(bundle)
    labeled = np.flatnonzero(bundle.labels >= 0)
    with pytest.raises(grpc.RpcError) as err:
        client.fit("nodepfn", bundle.graph_hash, labeled[:9], labeled[9:], SMALL["nodepfn"], seed=0, time_limit=None)
    assert (
        "nodepfn-epoch30 not found" in err.value.details() and "NODEGROUND_RANDOM_INIT_WEIGHTS" in err.value.details()
    )
