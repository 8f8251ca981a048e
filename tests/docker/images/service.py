"""A fixture method service that misbehaves on purpose (see Dockerfile)."""

from __future__ import annotations

import os
import signal
import socket
import threading

import numpy as np

from methods.sdk import Capabilities, FloatParam, Method
from methods.sdk.service import MethodServicer, build_server

MODE = os.environ.get("FIXTURE_MODE", "crash-isolated")
TARGETS = [t for t in os.environ.get("PROBE_TARGETS", "").split(",") if t]
OUTSIDE = ["/pwned", "/opt/fixture/pwned", "/home/nodeground/pwned", "/weights/pwned", "/etc/pwned"]


def try_network() -> str:
    opened = []
    for target in TARGETS:
        host, _, port = target.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=2):
                opened.append(target)
        except OSError:
            pass
    return "OPEN:" + ",".join(opened) if opened else "blocked"


def try_writes() -> str:
    wrote = []
    for path in OUTSIDE:
        try:
            with open(path, "w") as f:
                f.write("pwned")
            wrote.append(path)
        except OSError:
            pass
    return "WROTE:" + ",".join(wrote) if wrote else "blocked"


class Probe(Method):
    name, version = "probe", "2026-11-29"
    capabilities = Capabilities(uses_gpu=False)
    default_config = {"temperature": 1.0}
    search_space = (FloatParam("temperature", 0.1, 10.0, log=True),)

    def fit(self, graph, train, val, config, ctx):
        ctx.check()
        if MODE == "crash-isolated":
            src, dst = graph.edge_index
            if np.bincount(src[src != dst], minlength=graph.num_nodes).min() == 0:
                os._exit(3)  # a hard crash: the whole service dies
        if MODE == "hostile":
            ctx.info["network"] = try_network()
            ctx.info["write_outside_tmp"] = try_writes()
            with open("/tmp/scratch", "w") as f:
                f.write("fine")
            ctx.info["tmp_write"] = "ok"
            weights = os.environ.get("NODEGROUND_WEIGHTS", "")
            ctx.info["weights_read"] = open(os.path.join(weights, "w.bin")).read() if weights else "none"
        x, y = graph.features, graph.labels
        return np.stack(
            [
                x[train][y[train] == c].mean(0) if (y[train] == c).any() else np.zeros(x.shape[1])
                for c in range(graph.num_classes)
            ]
        )

    def predict(self, centroids, graph):
        x = graph.features
        d = (x**2).sum(1)[:, None] - 2 * x @ centroids.T + (centroids**2).sum(1)[None]
        logits = -d / max(float(d.mean()), 1e-9)
        p = np.exp(logits - logits.max(1, keepdims=True))
        return (p / p.sum(1, keepdims=True)).astype(np.float32)


if __name__ == "__main__":
    server, port = build_server(MethodServicer("fixture", [Probe]), "0.0.0.0:50051")
    server.start()
    print("NODEGROUND_LISTENING", port, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    server.stop(grace=1)
