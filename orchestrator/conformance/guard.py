"""No test label reaches a service: a client that checks what it sends.

Services receive -1 for every node outside train ∪ val. ``GuardedClient``
enforces that from the orchestrator side on the bytes it streams: it records
which nodes of each uploaded graph carry a label, and refuses any fit whose
train ∪ val does not cover them (the graph would leak labels the fit must
not see). The conformance check and ``orchestrator submit`` both go through it.
"""

from __future__ import annotations

import numpy as np

from contract.security import Security
from contract.wire import GraphBundle
from orchestrator.services.client import CallResult, MethodClient


class LabelLeak(RuntimeError):
    """A graph about to be used shows labels outside the fit's train ∪ val."""


class GuardedClient(MethodClient):
    def __init__(self, endpoint: str) -> None:
        super().__init__(endpoint, Security())  # the sandboxed image, on loopback: plaintext
        self.remembers_graphs = False  # the checks ask the service each time (HasGraph is part of what they check)
        self.visible: dict[str, np.ndarray] = {}  # graph hash -> node ids whose label was sent
        self.uploads = 0
        self.fits_checked = 0

    def note_graph(self, bundle: GraphBundle) -> None:
        labels = np.asarray(bundle.labels)
        self.visible[bundle.graph_hash] = np.flatnonzero(labels >= 0)

    def ensure_graph(self, bundle: GraphBundle, timeout: float | None = None) -> CallResult:
        self.note_graph(bundle)
        result = super().ensure_graph(bundle, timeout=timeout)
        self.uploads += bool(result.value)
        return result

    def check_fit(self, graph_hash: str, train: np.ndarray, val: np.ndarray) -> None:
        visible = self.visible.get(graph_hash)
        if visible is None:
            raise LabelLeak(f"fit on graph {graph_hash[:12]} whose labels this client never checked")
        allowed = np.union1d(np.asarray(train), np.asarray(val))
        leaked = np.setdiff1d(visible, allowed)
        if leaked.size:
            raise LabelLeak(
                f"graph {graph_hash[:12]} shows the labels of {leaked.size} node(s) outside train ∪ val "
                f"(first: {leaked[:5].tolist()}); refusing to send the fit"
            )
        self.fits_checked += 1

    def fit(self, method, graph_hash, train, val, config, seed, time_limit, labels=None):
        self.check_fit(graph_hash, train, val)  # a fit's own labels are those of train and val only (MethodClient.fit)
        return super().fit(method, graph_hash, train, val, config, seed, time_limit, labels)
