"""A service process for the stop tests: `methods.serve`'s own serving loop (signals, lifeline, grace) around a
servicer whose fits nap, ``nap`` checking between short naps as the SDK asks, ``stubborn`` in one nap that never
checks (a GFM's long step). A fit touches the file ``FIT_STARTED_ENV`` names once it runs, so a test signals the
process mid-fit: ``python -m tests.methods.napping_service`` prints the port line as `methods.serve` does."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from contract.wire import GraphBundle
from methods.sdk import Config, FitContext, FloatParam
from methods.sdk.service import MethodServicer, build_server
from methods.serve import serve
from tests.methods.helpers import Sleeper

FIT_STARTED_ENV = "NODEGROUND_TEST_FIT_STARTED"


class Nap(Sleeper):
    name = "nap"
    default_config: Config = {"seconds": 0.1}
    search_space = (FloatParam("seconds", 0.0, 1e6),)

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> Any:
        Path(os.environ[FIT_STARTED_ENV]).touch()
        return super().fit(graph, train, val, config, ctx)


class Stubborn(Nap):
    name = "stubborn"

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> Any:
        Path(os.environ[FIT_STARTED_ENV]).touch()
        time.sleep(float(config["seconds"]))
        return graph.num_classes


def main() -> None:
    servicer = MethodServicer("test", [Nap, Stubborn])
    server, port = build_server(servicer, "127.0.0.1:0")
    serve(servicer, server, port)


if __name__ == "__main__":
    main()
