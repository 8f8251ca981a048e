"""The three GFM families through the real gRPC service: describe as gfm, fit/predict, weights in the fit info."""

from __future__ import annotations

import numpy as np
import pytest

from methods.families import load_families, method_classes
from methods.sdk.service import MethodServicer, build_server
from methods.sdk.space import value_from_proto
from methods.sdk.weights import load_weights_catalog
from orchestrator.services.client import MethodClient

CASES = {
    "graphany": ("graphany", {}, "graphany-arxiv"),
    "gvt": ("gvt", {"depth": 1, "max_epochs": 5, "patience": 5}, "gvt-seed42"),
    "node4all": ("node4all", {"max_epochs": 5, "patience": 5}, "node4all-cgt"),
}


@pytest.fixture
def service(weights):
    families = load_families()
    classes = [c for name in CASES for c in method_classes(families[name])]
    server, port = build_server(MethodServicer("gfm-test", classes), "127.0.0.1:0")
    server.start()
    client = MethodClient(f"127.0.0.1:{port}")
    client.wait_healthy(10)
    yield client
    client.close()
    server.stop(0)


def test_families_through_service(service, graph):
    bundle, train, val = graph
    specs = {s.name: s for s in service.describe()}
    assert set(specs) == set(CASES)
    assert all(s.kind == "gfm" and s.version for s in specs.values())
    assert {p.name for p in specs["gvt"].search_space} == {"depth", "head", "checkpoint_seed", "lr"}
    assert {p.name for p in specs["graphany"].search_space} == {"checkpoint"}
    service.ensure_graph(bundle)
    for method, config, weights_id in CASES.values():
        fit = service.fit(method, bundle.graph_hash, train, val, config, seed=0, time_limit=None)
        info = {k: value_from_proto(v) for k, v in fit.value.info.items()}
        assert info["weights_sha256"] == load_weights_catalog()[weights_id].sha256
        assert info["weights_official"] is True
        assert fit.stats.seconds > 0 and fit.stats.peak_rss_bytes > 0
        probs = service.predict(fit.value.model_handle, bundle.num_nodes).value
        assert probs.shape == (48, 3)
        np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-5)
        assert service.release(fit.value.model_handle)
