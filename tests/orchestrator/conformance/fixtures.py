"""Method services for the conformance tests: one honest, several deliberately broken.

All run in-process on a loopback port (``serve``), so each costs milliseconds.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import grpc
import numpy as np

from contract.v1 import method_service_pb2 as pb
from contract.wire import GraphBundle, encode_probabilities
from methods.sdk import Capabilities, FitContext, FloatParam, Method, ResourceError
from methods.sdk.service import MethodServicer, build_server
from tests.conftest import HANG_S

RELEASE_HANGS = threading.Event()  # set at teardown so that hung fits end


class Centroid(Method):
    """Honest and cheap: nearest class centroid on the features, softmax of negative distances."""

    name, version = "centroid", "2026-11-29"
    capabilities = Capabilities(uses_gpu=False)
    default_config = {"temperature": 1.0}
    search_space = (FloatParam("temperature", 0.1, 10.0, log=True),)

    def fit(self, graph: GraphBundle, train, val, config, ctx: FitContext):
        ctx.check()
        x, y = graph.features, graph.labels
        centroids = np.stack(
            [
                x[train][y[train] == c].mean(axis=0) if (y[train] == c).any() else np.zeros(x.shape[1])
                for c in range(graph.num_classes)
            ]
        )
        return centroids, float(config["temperature"])

    def predict(self, state, graph: GraphBundle) -> np.ndarray:
        centroids, temperature = state
        d = (
            ((graph.features[:, None, :] - centroids[None]) ** 2).sum(-1)
            if graph.num_nodes < 5000
            else _chunked(graph.features, centroids)
        )
        logits = -d / (temperature * d.mean())
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        return (p / p.sum(axis=1, keepdims=True)).astype(np.float32)


class CountsEpochs(Centroid):
    """Honest, with a training length in its defaults; records the ``max_epochs`` each fit was given."""

    default_config = {"temperature": 1.0, "max_epochs": 500}
    given: list[int] = []

    def fit(self, graph: GraphBundle, train, val, config, ctx: FitContext):
        type(self).given.append(int(config["max_epochs"]))
        return super().fit(graph, train, val, config, ctx)


def _chunked(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    return (x**2).sum(1)[:, None] - 2 * x @ c.T + (c**2).sum(1)[None]


class NotSumming(Centroid):
    """Rows sum to two."""

    def predict(self, state, graph):
        return 2 * super().predict(state, graph)


class HangsPastDeadline(Centroid):
    """Ignores a short time limit: such a fit never returns (until the test releases it)."""

    def fit(self, graph, train, val, config, ctx):
        if ctx.deadline is not None and ctx.deadline - time.monotonic() < 5:
            RELEASE_HANGS.wait(HANG_S)
        return super().fit(graph, train, val, config, ctx)


class CrashesOnIsolated(Centroid):
    """Assumes every node has a neighbour besides itself."""

    def fit(self, graph, train, val, config, ctx):
        src, dst = graph.edge_index
        degree = np.bincount(src[src != dst], minlength=graph.num_nodes)
        if degree.min() == 0:
            raise ZeroDivisionError("node without neighbours")
        return super().fit(graph, train, val, config, ctx)


class RefusesLarge(Centroid):
    """Honest about its memory: refuses the large graph with an estimate, as check_resources would."""

    def fit(self, graph, train, val, config, ctx):
        if graph.features.nbytes > 4 << 20:  # the large case: over 4 MiB of features
            raise ResourceError(f"centroid: {graph.num_nodes} nodes need about 9.00 GiB, but only 1.00 GiB is free")
        return super().fit(graph, train, val, config, ctx)


class DropsLastRow(MethodServicer):
    """A broken service (not method): predict streams one row fewer than the graph has nodes."""

    def Predict(self, request, context):
        model = self.models.get(request.model_handle)
        if model is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "no such model")
        probs = model.method.predict(model.state, model.graph)[:-1]
        yield from encode_probabilities(probs, pb.CallStats(seconds=0.0))


@contextlib.contextmanager
def serve(method: type[Method], servicer_cls: type[MethodServicer] = MethodServicer) -> Iterator[str]:
    server, port = build_server(servicer_cls("fixture", [method]), "127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        RELEASE_HANGS.set()
        server.stop(grace=0)
        RELEASE_HANGS.clear()
