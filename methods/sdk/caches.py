"""What a service holds for its clients, each bounded so that a client cannot make it hold more: graphs in an
LRU cache bounded in bytes and in count, fitted models in one bounded in count (a client that never calls Release
loses its least recently used models; Predict on one answers NOT_FOUND), and each graph's split views.

A split view is the held graph as one fit's split sees it: its features and edges, that fit's labels, -1
elsewhere (``FitRequest.train_labels`` and ``val_labels``). It keeps its own derived tensors (``cache``: some
depend on labels); a graph keeps its last ``MAX_VIEWS_PER_GRAPH`` views and drops them with itself.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from contract import settings
from contract.wire import GraphBundle
from methods.sdk.method import Method

log = logging.getLogger("nodeground.service")

# The limits a flag or variable sets (contract.settings says what each is and what it accepts).
DEFAULT_GRAPH_CACHE_BYTES = int(settings.GRAPH_CACHE_BYTES.default or 0)
DEFAULT_MAX_MODELS = int(settings.MAX_MODELS.default or 0)  # fitted models held (the orchestrator holds one per trial)
DEFAULT_MAX_GRAPHS = 16
MAX_VIEWS_PER_GRAPH = 4  # split views a held graph keeps (each with its derived tensors); a sweep uses one at a time
VIEWS_KEY = "nodeground-split-views"  # the held graph's cache entry that keeps them (no method's key is a str)


class FittedModel:
    """A fitted model as the service holds it under its handle: the method, its state, the graph it was fitted on."""

    def __init__(self, method: Method, state: Any, graph: GraphBundle) -> None:
        self.method, self.state, self.graph = method, state, graph


class GraphCache:
    """Graphs by content hash, least recently used evicted first once over the byte or count budget."""

    def __init__(self, max_bytes: int, max_graphs: int = DEFAULT_MAX_GRAPHS) -> None:
        self._max = max_bytes
        self._max_graphs = max_graphs
        self._graphs: OrderedDict[str, GraphBundle] = OrderedDict()
        self._lock = threading.Lock()
        self.received = 0  # graphs put that were not held already, since start (uploads run on several threads)

    def get(self, graph_hash: str) -> GraphBundle | None:
        with self._lock:
            graph = self._graphs.get(graph_hash)
            if graph is not None:
                self._graphs.move_to_end(graph_hash)
            return graph

    def put(self, graph: GraphBundle) -> None:
        with self._lock:
            self.received += graph.graph_hash not in self._graphs
            self._graphs[graph.graph_hash] = graph
            self._graphs.move_to_end(graph.graph_hash)
            total = sum(g.nbytes for g in self._graphs.values())
            while (total > self._max or len(self._graphs) > self._max_graphs) and len(self._graphs) > 1:
                _, evicted = self._graphs.popitem(last=False)
                total -= evicted.nbytes

    def __contains__(self, graph_hash: str) -> bool:
        with self._lock:
            return graph_hash in self._graphs

    def __len__(self) -> int:
        with self._lock:
            return len(self._graphs)


class ModelCache:
    """Fitted models by handle; past ``max_models`` the least recently used is dropped.

    So a client that never Releases cannot fill the memory.
    """

    def __init__(self, max_models: int) -> None:
        self._max = max(1, max_models)
        self._models: OrderedDict[str, FittedModel] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, handle: str, model: FittedModel) -> None:
        with self._lock:
            self._models[handle] = model
            while len(self._models) > self._max:
                evicted, _ = self._models.popitem(last=False)
                log.warning("dropped model %s: more than %d held without Release", evicted, self._max)

    def get(self, handle: str) -> FittedModel | None:
        with self._lock:
            model = self._models.get(handle)
            if model is not None:
                self._models.move_to_end(handle)
            return model

    def pop(self, handle: str) -> FittedModel | None:
        with self._lock:
            return self._models.pop(handle, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._models)


class SplitViews:
    """Each held graph's split views, made once per split's labels and kept with the graph (``graph.cache``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def view(self, graph: GraphBundle, parts: list[tuple[str, np.ndarray, np.ndarray]]) -> GraphBundle:
        """The view of ``graph`` that shows the labels of ``parts`` ((name, node ids, labels), checked) only."""
        digest = hashlib.sha256()
        for what, ids, values in parts:
            digest.update(f"{what} {ids.size}\n".encode())
            digest.update(ids.tobytes())
            digest.update(values.tobytes())
        key = digest.hexdigest()
        with self._lock:
            views = graph.cache.setdefault(VIEWS_KEY, OrderedDict())
            view = views.get(key)
            if view is None:
                labels = np.full(graph.num_nodes, -1, dtype=np.int64)
                for _, ids, values in parts:
                    labels[ids] = values
                view = views[key] = GraphBundle(
                    graph.features, graph.edge_index, labels, graph.num_classes, graph_hash=graph.graph_hash
                )
                while len(views) > MAX_VIEWS_PER_GRAPH:
                    views.popitem(last=False)
            views.move_to_end(key)
            return view
