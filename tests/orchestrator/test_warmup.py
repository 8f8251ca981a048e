"""Warm-up: a replica's first calls are charged to no trial, and a warm-up that runs past its limit leaves no trial
queued behind a service still computing."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from contract.wire import GraphBundle
from methods.sdk import ChoiceParam, Config, FitContext
from methods.sdk.service import MethodServicer, build_server
from orchestrator import warmup
from orchestrator.services import client as client_module
from orchestrator.services.client import MethodClient, Replica
from orchestrator.services.directory import Directory
from orchestrator.store import Store
from orchestrator.sweep import Sweep, SweepPlan
from tests.conftest import HANG_S
from tests.methods.helpers import Sleeper

RELEASE = threading.Event()  # ends the stuck warm-up fits when the test is over


class FirstCallSlow(Sleeper):
    """A method whose first fit on a service (the warm-up's 60-node graph) initialises for longer than any limit and
    does not check its deadline meanwhile, as a first call may on a slow machine; other fits are brief and check it."""

    name = "firstslow"
    default_config: Config = {"seconds": 0.02}
    search_space = (ChoiceParam("seconds", (0.02,)),)

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> Any:
        if graph.num_nodes == 60:  # the warm-up graph (orchestrator.warmup.warmup_bundle)
            RELEASE.wait(HANG_S)
        return super().fit(graph, train, val, config, ctx)


class InProcess(Directory):
    """One replica that counts as embedded (this sweep started it), served in this process; recovering it starts a
    fresh server in its place, as ``ServiceDirectory`` restarts an embedded process."""

    def __init__(self) -> None:
        self.servers: list[Any] = []
        self.replica: Replica | None = None
        self.recoveries = 0

    def _serve(self) -> str:
        server, port = build_server(MethodServicer("test", [FirstCallSlow]), "127.0.0.1:0")
        server.start()
        self.servers.append(server)
        return f"127.0.0.1:{port}"

    def client(self, method: str) -> MethodClient:
        return self.acquire(method).client

    def acquire(self, method: str) -> Replica:
        if self.replica is None:
            endpoint = self._serve()
            self.replica = Replica("test", "test", endpoint, MethodClient(endpoint), "embedded", (FirstCallSlow.name,))
            if self.on_ready is not None:
                self.on_ready(self.replica)
        return self.replica

    def recover(self, replica: Replica) -> bool:
        self.recoveries += 1
        replica.endpoint = self._serve()
        replica.client = MethodClient(replica.endpoint)
        if self.on_ready is not None:
            self.on_ready(replica)
        return True


@pytest.fixture
def directory():
    RELEASE.clear()
    found = InProcess()
    yield found
    RELEASE.set()
    for server in found.servers:
        server.stop(0)


def test_a_warm_up_past_its_limit_replaces_the_service_before_any_trial(tmp_path, directory, monkeypatch):
    """Finding 8: the warm-up's client gave up at its limit, the service went on computing, and the next trial ran
    on it, queued behind the stuck call, and was stored ``timeout`` without having run (kept by reruns)."""
    monkeypatch.setattr(warmup, "WARMUP_TIME_LIMIT_S", 0.5)
    monkeypatch.setattr(client_module, "FIT_DEADLINE_GRACE_S", 0.5)
    plan = SweepPlan((FirstCallSlow.name,), ("synthetic-tiny",), ("10/10/80",), (0,), budget=1, time_limit=20.0)
    with Store(tmp_path / "runs.sqlite") as store:
        records = Sweep(plan, store, directory).run()
        services = store.services_frame()
    assert [r.status for r in records] == ["ok"], [r.error for r in records]
    fresh, stuck = services.sort_values("id").to_dict("records")  # the fresh one records itself while replacing
    assert directory.recoveries == 1 and records[0].endpoint == fresh["endpoint"] != stuck["endpoint"]
    assert "DEADLINE_EXCEEDED" in stuck["warmup_error"] and stuck["warmup_error"].endswith(
        "replaced by a fresh service"
    )
    assert fresh["warmup_error"] == "not warmed up: the warm-up of the service it replaced ran past its time limit"
