"""The sweep protocol against in-process services: determinism, budget prefixes, failures kept
as rows, time limits, OOM, parallel = serial, dead remote endpoints, warm-up recorded apart."""

from __future__ import annotations

import json
import threading
from functools import partial
from typing import Any

import grpc
import numpy as np
import pytest
import torch

from contract.families import Family
from contract.wire import GraphBundle
from methods.gnn import MLP
from methods.sdk import Capabilities, ChoiceParam, Config, FitContext, Method, ResourceError
from methods.sdk.caches import GraphCache
from methods.sdk.service import MethodServicer, build_server
from orchestrator.results import selected_results, selected_with_workflow
from orchestrator.services.client import MethodClient, ServiceUnavailable
from orchestrator.services.directory import Directory, ServiceDirectory, resolve_methods
from orchestrator.store import Store
from orchestrator.sweep import Sweep, SweepPlan
from tests.conftest import HANG_S
from tests.methods.helpers import Sleeper


class QuickMLP(MLP):
    """The MLP with a short training budget, so a trial takes a fraction of a second."""

    name = "qmlp"
    default_config = {**MLP.default_config, "max_epochs": 25, "patience": 25}
    search_space = tuple(p for p in MLP.search_space if p.name != "patience")


class Modes(Method):
    """One configuration per outcome: ok, non-finite probabilities, a crash, out of memory."""

    name = "modes"
    version = "test"
    capabilities = Capabilities(uses_gpu=False)
    default_config: Config = {"mode": "ok"}
    search_space = (ChoiceParam("mode", ("ok", "nan", "crash", "oom")),)

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> Any:
        if config["mode"] == "crash":
            raise RuntimeError("boom")
        if config["mode"] == "oom":
            raise ResourceError("needs 81 GiB, 80 GiB available")
        return config["mode"], graph.num_classes

    def predict(self, state: Any, graph: GraphBundle) -> np.ndarray:
        mode, classes = state
        probs = np.full((graph.num_nodes, classes), 1.0 / classes, dtype=np.float32)
        if mode == "nan":
            probs[0, 0] = np.nan
        return probs


# The time limit of a sweep whose one trial must time out and the other end ok: the ok trial's predict runs under it
# too, so it is ~100x what that predict takes on idle cores (0.5 s was near what a loaded two-core machine gave it).
TIME_LIMIT_S = 3.0


class Sleepy(Sleeper):
    """The default sleeps past any wait of a test (``HANG_S``) unless stopped; the one sample does no work at all.

    The default checks its deadline between steps (as the SDK asks), so the service stops it at its time limit or when
    its caller goes away; the sample never checks it, so no load can make it time out."""

    name = "sleepy"
    default_config: Config = {"seconds": 2 * HANG_S}
    search_space = (ChoiceParam("seconds", (2 * HANG_S, 0.0)),)


FAMILY = Family("test", "nodeground/test", "tests.orchestrator.test_sweep_engine", ("qmlp", "modes", "sleepy"))
OTHER = Family("other", "nodeground/other", "tests.orchestrator.test_sweep_engine", ("modes",))


@pytest.fixture(autouse=True)
def one_torch_thread():
    """In-process services compute in this process: one thread, as embedded services use in tests."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def servers():
    """Start in-process servers on demand; all stopped at the end."""
    started = []

    def start(methods=(QuickMLP, Modes, Sleepy), servicer_cls=MethodServicer):
        servicer = servicer_cls("test", list(methods))
        server, port = build_server(servicer, "127.0.0.1:0")
        server.start()
        started.append(server)
        return f"127.0.0.1:{port}", server, servicer

    yield start
    for server in started:
        server.stop(0)


def sweep(plan, store, endpoints, parallel=1, warmup="embedded", families=None):
    directory = ServiceDirectory(resolve_methods(list(plan.methods), families or {"test": FAMILY}), endpoints=endpoints)
    return Sweep(plan, store, directory, parallel=parallel, warmup=warmup), directory


def run(plan, path, endpoints, **kwargs):
    with Store(path) as store:
        s, directory = sweep(plan, store, endpoints, **kwargs)
        try:
            records = s.run()
        finally:
            directory.close()
        return records, store.frame()


METRICS = ["val_loss", "val_accuracy", "test_accuracy", "test_macro_f1", "test_cross_entropy", "test_primary"]


def test_same_arguments_same_sequences_and_selections(tmp_path, servers):
    endpoint, _, _ = servers()
    plan = SweepPlan(("qmlp",), ("synthetic-tiny",), ("10/10/80",), (0, 1), budget=3)
    _, a = run(plan, tmp_path / "a.sqlite", {"test": endpoint})
    _, b = run(plan, tmp_path / "b.sqlite", {"test": endpoint})
    assert len(a) == 6 and (a["status"] == "ok").all()
    for column in ("trial_key", "config_json", "trial_index", *METRICS):
        assert list(a[column]) == list(b[column]), column
    pick = ["method", "dataset", "regime", "split", "trial_index", "config_json"]
    assert selected_results(a)[pick].equals(selected_results(b)[pick])


def test_a_small_budget_is_a_prefix_of_a_large_one(tmp_path, servers):
    endpoint, _, _ = servers()
    plans = {k: SweepPlan(("qmlp",), ("synthetic-tiny",), ("10/10/80", "50/25/25"), (0, 3), budget=k) for k in (5, 20)}
    with Store(tmp_path / "plan.sqlite") as store:
        planned = {k: sweep(p, store, {"test": endpoint})[0].planned_trials() for k, p in plans.items()}
    cells = {(t.regime, t.split) for t in planned[20]}
    assert len(cells) == 4
    for cell in cells:
        small = [(t.key, t.config) for t in planned[5] if (t.regime, t.split) == cell]
        large = [(t.key, t.config) for t in planned[20] if (t.regime, t.split) == cell]
        assert len(small) == 5 and len(large) == 20 and large[:5] == small
        assert len({k for k, _ in large}) == 20  # unique configurations
    # Growing the budget on the same store runs only the new slots.
    path = tmp_path / "grow.sqlite"
    plan2 = SweepPlan(("qmlp",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=2)
    first, _ = run(plan2, path, {"test": endpoint})
    second, frame = run(
        SweepPlan(("qmlp",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=3), path, {"test": endpoint}
    )
    assert [r.trial_index for r in first] == [0, 1] and [r.trial_index for r in second] == [2]
    assert list(frame["trial_key"]) == [t.key for t in planned[20] if (t.regime, t.split) == ("10/10/80", 0)][:3]


def test_failed_nonfinite_and_oom_trials_are_rows_and_are_not_replaced(tmp_path, servers):
    endpoint, _, _ = servers()
    plan = SweepPlan(("modes",), ("synthetic-binary",), ("10/10/80",), (0,), budget=10)
    records, frame = run(plan, tmp_path / "r.sqlite", {"test": endpoint})
    by_mode = {json.loads(r.config_json)["mode"]: r for r in records}
    assert len(records) == 4 and set(by_mode) == {
        "ok",
        "nan",
        "crash",
        "oom",
    }  # the space holds 4; nothing drawn in their place
    assert by_mode["ok"].status == "ok" and by_mode["ok"].test_auroc is not None
    assert by_mode["nan"].status == "nonfinite" and "NaN" in by_mode["nan"].error
    assert by_mode["crash"].status == "failed" and "RuntimeError: boom" in by_mode["crash"].error
    assert by_mode["oom"].status == "oom" and "needs 81 GiB, 80 GiB available" in by_mode["oom"].error
    chosen = selected_with_workflow(frame).iloc[0]
    assert chosen["selected_trial_index"] == by_mode["ok"].trial_index and chosen["n_failed"] == 3
    # a rerun keeps every outcome: nothing is retried but `unavailable`
    again, _ = run(plan, tmp_path / "r.sqlite", {"test": endpoint})
    assert again == []


def test_a_trial_past_the_time_limit_is_a_timeout_and_the_next_one_succeeds(tmp_path, servers):
    endpoint, _, _ = servers()
    plan = SweepPlan(("sleepy",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=2, time_limit=TIME_LIMIT_S)
    records, _ = run(plan, tmp_path / "r.sqlite", {"test": endpoint})
    assert [r.status for r in records] == ["timeout", "ok"], records[0].error
    # the service stopped the fit at its time limit (its own words), not the client's gRPC deadline after the grace
    assert "the fit ran past its time limit" in records[0].error, records[0].error
    assert records[0].endpoint == records[1].endpoint == endpoint


def test_parallel_stores_the_same_records_as_serial(tmp_path, servers):
    a, _, servicer_a = servers()
    b, _, servicer_b = servers()
    # Two services in one process share torch's global RNG, which separate service processes do
    # not: here they share one compute lock, so each fit seeds and draws undisturbed. (The kill -9
    # test compares parallel embedded processes with a serial run without this.)
    servicer_b._compute = servicer_a._compute
    plan = SweepPlan(("qmlp",), ("synthetic-tiny",), ("10/10/80",), (0, 2), budget=3)
    _, serial = run(plan, tmp_path / "serial.sqlite", {"test": a})
    records, parallel = run(plan, tmp_path / "parallel.sqlite", {"test": [a, b]}, parallel=2)
    assert {r.endpoint for r in records} == {a, b}  # both replicas ran trials
    assert len(parallel) == 6 and (parallel["status"] == "ok").all()
    for column in ("trial_key", "config_json", *METRICS):
        assert list(serial[column]) == list(parallel[column]), column


def test_a_dead_remote_endpoint_is_dropped_and_the_sweep_goes_on(tmp_path, servers):
    a, server_a, _ = servers()
    b, server_b, _ = servers(methods=(Modes,))
    families = {"test": FAMILY}
    plan = SweepPlan(("qmlp", "modes"), ("synthetic-tiny",), ("10/10/80",), (0,), budget=3)
    with Store(tmp_path / "r.sqlite") as store:
        s, directory = sweep(plan, store, {"qmlp": a, "modes": b}, families=families)
        directory.recovery_timeout, directory.recovery_attempts = 0.6, 2
        s.progress.on_trial = lambda record: (
            record.method == "qmlp" and record.trial_index == 0 and server_a.stop(0).wait()
        )
        records = s.run()
        directory.close()
    qmlp = [r for r in records if r.method == "qmlp"]
    assert [r.status for r in qmlp] == ["ok", "unavailable", "unavailable"]
    assert "stopped answering" in qmlp[2].error  # given up after retries: not dialled again
    modes = [r.status for r in records if r.method == "modes"]
    assert len(modes) == 3 and modes[0] == "ok" and "unavailable" not in modes  # the other pool goes on


def test_a_trial_whose_replica_dies_runs_again_on_another_replica(tmp_path, servers):
    """As a killed Swarm task's trial must: the replica is dropped, its trial goes to a sibling, nothing is stored
    unavailable."""
    a, server_a, _ = servers()
    b, _, _ = servers()
    plan = SweepPlan(("qmlp",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=3)
    with Store(tmp_path / "r.sqlite") as store:
        s, directory = sweep(plan, store, {"test": [a, b]})
        directory.recovery_timeout, directory.recovery_attempts = 0.6, 2
        s.progress.on_trial = lambda record: record.trial_index == 0 and server_a.stop(0).wait()
        records = s.run()
        directory.close()
        frame = store.frame()
    assert [r.status for r in records] == ["ok", "ok", "ok"], [r.error for r in records]
    assert [r.endpoint for r in records] == [a, b, b]
    assert len(frame) == 3 and (frame["status"] == "ok").all()


class SpyServicer(MethodServicer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fits = []

    def Fit(self, request, context):
        self.fits.append((request.method, request.graph_hash, dict(request.config)))
        return super().Fit(request, context)


def test_warm_up_runs_before_the_first_trial_and_is_stored_apart(tmp_path, servers):
    endpoint, _, spy = servers(servicer_cls=SpyServicer)
    plan = SweepPlan(("qmlp",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=1)
    with Store(tmp_path / "r.sqlite") as store:
        s, directory = sweep(plan, store, {"test": endpoint}, warmup="all")
        records = s.run()
        directory.close()
        services = store.services_frame()
    assert len(records) == 1 and len(spy.fits) == 2
    warm_hash = spy.fits[0][1]
    assert warm_hash != spy.fits[1][1]  # the warm-up used its own small graph, not the task's
    assert len(services) == 1
    row = services.iloc[0]
    assert row["endpoint"] == endpoint and row["source"] == "remote" and row["warmup_methods"] == "qmlp"
    assert row["warmup_seconds"] > 0 and row["warmup_error"] is None and pd_isna(row["start_seconds"])


def pd_isna(value) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


class OneClient(Directory):
    """A directory with only ``client`` and ``recover`` (as a sandbox launcher writes one)."""

    def __init__(self, endpoint):
        self.endpoint, self._client, self.recovered = endpoint, None, []

    def client(self, method):
        if self._client is None:
            self._client = MethodClient(self.endpoint)
            self._client.wait_healthy(HANG_S)
        return self._client

    def recover(self, replica):
        self.recovered.append(replica)
        return False

    def close(self):
        if self._client is not None:
            self._client.close()


def test_a_directory_with_only_client_and_recover_still_runs_sweeps(tmp_path, servers):
    endpoint, _, _ = servers()
    directory = OneClient(endpoint)
    plan = SweepPlan(("modes",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=2)
    with Store(tmp_path / "r.sqlite") as store:
        records = Sweep(plan, store, directory).run()
    directory.close()
    assert (
        len(records) == 2 and records[0].status == "ok" and records[0].endpoint == endpoint and not directory.recovered
    )


def test_a_dataset_registered_anew_is_run_again_and_never_served_stale(tmp_path, servers, monkeypatch):
    """`datasets add --replace` with other content: the rerun executes its trials and results show only the new
    graph."""
    from orchestrator.data.registry import add_user_dataset
    from tests.conftest import tiny_graph

    monkeypatch.setenv("NODEGROUND_CACHE", str(tmp_path / "cache"))
    x, e, y = tiny_graph(90)
    np.savez(tmp_path / "a.npz", x=x, edge_index=e, y=y)
    np.savez(tmp_path / "b.npz", x=-x, edge_index=e, y=y)
    first = add_user_dataset(tmp_path / "a.npz", "mine")
    endpoint, _, _ = servers()
    plan = SweepPlan(("qmlp",), ("mine",), ("50/25/25",), (0,), budget=2)
    records, frame = run(plan, tmp_path / "r.sqlite", {"test": endpoint})
    assert len(records) == 2 and set(frame["dataset_hash"]) == {first.content_hash}
    records, _ = run(plan, tmp_path / "r.sqlite", {"test": endpoint})
    assert records == [], "an unchanged dataset is not run again"
    second = add_user_dataset(tmp_path / "b.npz", "mine", replace=True)
    records, frame = run(plan, tmp_path / "r.sqlite", {"test": endpoint})
    assert len(records) == 2, "the replaced dataset's trials were skipped as done"
    assert set(frame["dataset_hash"]) == {second.content_hash} and len(frame) == 2
    assert all(key.endswith(second.content_hash) for key in frame["trial_key"])


def _described(*classes, family: str = "test") -> dict:
    """What committed descriptions of ``classes`` say: Describe's own MethodInfo, read as a spec."""
    from contract.descriptions import spec_from_proto
    from methods.sdk.service import describe_method

    return {cls.name: spec_from_proto(describe_method(cls, family)) for cls in classes}


class Watched(ServiceDirectory):
    """A directory that notes which methods' services the sweep asked for."""

    asked: list[str]

    def client(self, method):
        self.asked.append(method)
        return super().client(method)

    def acquire(self, method):
        self.asked.append(method)
        return super().acquire(method)


def test_a_shard_asks_only_for_its_methods_services_and_loads_only_its_datasets(tmp_path, servers, monkeypatch):
    import orchestrator.preflight as preflight_module
    import orchestrator.sweep as sweep_module

    loaded = []
    real_load = sweep_module.load_dataset
    for module in (sweep_module, preflight_module):  # the plan's checks and the run's jobs load datasets
        monkeypatch.setattr(module, "load_dataset", lambda name: loaded.append(name) or real_load(name))
    first, _, _ = servers()
    second, _, _ = servers()
    families = {"fa": Family("fa", "nodeground/fa", FAMILY.module, ("qmlp",)), "fb": Family("fb", "", "", ("modes",))}
    # cells in plan order: tiny/qmlp, tiny/modes, binary/qmlp, binary/modes; 4 shards: one cell each
    plan = SweepPlan(("qmlp", "modes"), ("synthetic-tiny", "synthetic-binary"), ("10/10/80",), (0,), 2, shard=(1, 4))
    with Store(tmp_path / "r.sqlite") as store:
        directory = Watched(resolve_methods(["qmlp", "modes"], families), endpoints={"fa": [first], "fb": [second]})
        directory.asked = []
        try:
            records = Sweep(plan, store, directory, described=_described(QuickMLP, Modes)).run()
        finally:
            directory.close()
    assert [(r.dataset, r.method) for r in records] == [("synthetic-tiny", "modes")] * 2
    assert set(directory.asked) == {"modes"} and loaded == ["synthetic-tiny"]


def test_a_shard_with_nothing_left_to_run_starts_no_service(tmp_path, servers):
    endpoint, _, _ = servers()
    plan = SweepPlan(("qmlp",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=2)
    run(plan, tmp_path / "r.sqlite", {"test": endpoint})
    with Store(tmp_path / "r.sqlite") as store:
        directory = Watched(resolve_methods(["qmlp"], {"test": FAMILY}), endpoints={"test": [endpoint]})
        directory.asked = []
        try:
            assert Sweep(plan, store, directory, described=_described(QuickMLP)).run() == []
        finally:
            directory.close()
    assert directory.asked == []


def test_a_service_that_describes_a_method_otherwise_than_its_description_is_refused_before_any_trial(
    tmp_path, servers
):
    import dataclasses

    from contract.descriptions import DescriptionError

    endpoint, _, _ = servers()
    stale = {"qmlp": dataclasses.replace(_described(QuickMLP)["qmlp"], version="2020-01-01")}
    plan = SweepPlan(("qmlp",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=2)
    with Store(tmp_path / "r.sqlite") as store:
        directory = ServiceDirectory(resolve_methods(["qmlp"], {"test": FAMILY}), endpoints={"test": [endpoint]})
        try:
            with pytest.raises(
                DescriptionError,
                match=rf"describes qmlp \({QuickMLP.version}\) otherwise .*\(2020-01-01\): version differ",
            ):
                Sweep(plan, store, directory, described=stale).run()
        finally:
            directory.close()
        assert store.frame().empty


def test_a_store_keyed_by_content_hashes_is_upgraded_and_skips_exactly_what_it_skipped(tmp_path, servers, mirror):
    """A store written before keys carried the catalog's identity resumes: same trials skipped, none lost."""
    import sqlite3

    from orchestrator.data.registry import dataset_hash, dataset_identity

    endpoint, _, _ = servers()
    small = SweepPlan(("qmlp",), ("texas",), ("10/10/80",), (0,), budget=2)
    first, frame = run(small, tmp_path / "r.sqlite", {"test": endpoint})
    identity, content = dataset_identity("texas"), dataset_hash("texas")
    assert len(first) == 2 and all(k.endswith(f"|{identity}") for k in frame["trial_key"])
    with sqlite3.connect(tmp_path / "r.sqlite") as db:  # as today's stores hold them: the content hash ends the key
        db.execute("UPDATE trials SET trial_key = replace(trial_key, ?, ?)", (identity, content))
        old = dict(frame.iloc[0])  # and a row of an earlier content of texas, which must not count as done
        old.update(trial_key=old["trial_key"].replace(identity, "0" * 64), dataset_hash="0" * 64, trial_index=7)
        db.execute(f"INSERT INTO trials ({', '.join(old)}) VALUES ({', '.join('?' for _ in old)})", list(old.values()))
    again, frame = run(
        SweepPlan(("qmlp",), ("texas",), ("10/10/80",), (0,), budget=3), tmp_path / "r.sqlite", {"test": endpoint}
    )
    assert [r.trial_index for r in again] == [2]  # the two stored trials skipped, the new slot run
    current = frame[frame["dataset_hash"] == content]
    assert len(current) == 3 and all(k.endswith(f"|{identity}") for k in current["trial_key"])
    assert "0" * 64 not in set(frame["dataset_hash"])  # the earlier content moved to superseded_trials


class Uploads(MethodServicer):
    """Counts the graph uploads it is sent."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.upload_count = 0

    def UploadGraph(self, request_iterator, context):
        self.upload_count += 1
        return super().UploadGraph(request_iterator, context)


class Forgetful(Uploads):
    """Loses every graph it holds before each of its first ``forget`` fits (an eviction between HasGraph and Fit)."""

    def __init__(self, *args, forget: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        self.forget = forget

    def Fit(self, request, context):
        if self.forget:
            self.forget -= 1
            self.graphs = GraphCache(1 << 30)
        return super().Fit(request, context)


class NotReady(Uploads):
    """Every fit refused as not ready (what a service whose weights are missing answers)."""

    def Fit(self, request, context):
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"{request.method} is not ready: weights missing")


class LostModels(MethodServicer):
    """Every predict answers NOT_FOUND: the model the trial just fitted is gone."""

    def Predict(self, request, context):
        context.abort(grpc.StatusCode.NOT_FOUND, f"no model with handle {request.model_handle!r}")


def one_trial(tmp_path, endpoint):
    directory = OneClient(endpoint)
    plan = SweepPlan(("modes",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=1)
    with Store(tmp_path / "r.sqlite") as store:
        (record,) = Sweep(plan, store, directory, warmup="none").run()
    directory.close()
    return record, directory.recovered


def test_a_fit_whose_graph_is_not_held_uploads_it_again_once_and_succeeds(tmp_path, servers):
    endpoint, _, servicer = servers(methods=(Modes,), servicer_cls=partial(Forgetful, forget=1))
    record, recovered = one_trial(tmp_path, endpoint)
    assert record.status == "ok" and servicer.upload_count == 2 and not recovered


def test_a_graph_not_held_even_after_the_upload_is_unavailable_and_restarts_nothing(tmp_path, servers):
    endpoint, _, servicer = servers(methods=(Modes,), servicer_cls=partial(Forgetful, forget=2))
    record, recovered = one_trial(tmp_path, endpoint)
    assert record.status == "unavailable" and record.error.startswith("NOT_FOUND: graph ")
    assert servicer.upload_count == 2 and not recovered  # one re-upload, no loop, no restart


class Asked(Uploads):
    """Counts the HasGraph questions it is asked; loses every graph it holds before its fourth fit (an eviction)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked = self.fits = 0

    def HasGraph(self, request, context):
        self.asked += 1
        return super().HasGraph(request, context)

    def Fit(self, request, context):
        self.fits += 1
        if self.fits == 4:
            self.graphs = GraphCache(1 << 30)
        return super().Fit(request, context)


def test_a_sweep_asks_a_service_for_a_graph_it_delivered_once_not_every_trial(tmp_path, servers):
    """HasGraph was a fifth of a trivial trial's calls: the client remembers what it delivered; a graph evicted
    since is answered NOT_FOUND by its fit, forgotten, asked for and delivered again, and the trial goes on."""
    endpoint, _, servicer = servers(methods=(QuickMLP,), servicer_cls=Asked)
    plan = SweepPlan(("qmlp",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=6)
    records, _ = run(plan, tmp_path / "r.sqlite", {"test": endpoint}, warmup="none")
    assert [r.status for r in records] == ["ok"] * 6
    assert servicer.fits == 7 and servicer.asked == 2 and servicer.upload_count == 2


def test_a_service_that_is_not_ready_is_unavailable_and_nothing_is_uploaded_again_or_restarted(tmp_path, servers):
    endpoint, _, servicer = servers(methods=(Modes,), servicer_cls=NotReady)
    record, recovered = one_trial(tmp_path, endpoint)
    assert record.status == "unavailable" and record.error.startswith("FAILED_PRECONDITION: modes is not ready")
    assert servicer.upload_count == 1 and not recovered


def test_a_predict_whose_model_is_gone_is_a_failed_trial_not_a_missing_graph(tmp_path, servers):
    endpoint, _, _ = servers(methods=(Modes,), servicer_cls=LostModels)
    record, recovered = one_trial(tmp_path, endpoint)
    assert record.status == "failed" and record.error.startswith("NOT_FOUND: no model") and not recovered


class Peek(Method):
    """Records what each fit sees of the graph: its feature matrix and which labels it shows."""

    name = "peek"
    version = "test"
    capabilities = Capabilities(uses_gpu=False)
    default_config: Config = {"mode": "ok"}
    seen: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> Any:
        Peek.seen.append((graph.features, graph.labels.copy(), train, val))
        return graph.num_classes

    def predict(self, state: Any, graph: GraphBundle) -> np.ndarray:
        return np.full((graph.num_nodes, state), 1.0 / state, dtype=np.float32)


class OlderService(Uploads):
    """A service from before fit labels: its Describe has no ``fit_labels``, and it drops a fit's labels (as an
    unknown field is dropped), so it fits on the labels its bundle shows."""

    def Describe(self, request, context):
        reply = super().Describe(request, context)
        reply.fit_labels = False
        return reply

    def Fit(self, request, context):
        del request.train_labels[:]
        del request.val_labels[:]
        return super().Fit(request, context)


def test_every_split_and_regime_of_a_graph_fits_on_its_one_upload_and_sees_only_its_own_labels(tmp_path, servers):
    from orchestrator.data.registry import load_dataset

    endpoint, _, servicer = servers(methods=(Peek,), servicer_cls=Uploads)
    directory = OneClient(endpoint)
    Peek.seen.clear()
    plan = SweepPlan(("peek",), ("synthetic-tiny",), ("10/10/80", "50/25/25"), (0, 1, 2, 3, 4), budget=1)
    with Store(tmp_path / "r.sqlite") as store:
        records = Sweep(plan, store, directory, warmup="none").run()
    received = directory.client("peek").graphs_received()
    directory.close()
    assert len(records) == 10 and {r.status for r in records} == {"ok"}
    assert servicer.upload_count == 1 and received == 1  # 5 splits x 2 regimes, one upload, counted by the service
    y = load_dataset("synthetic-tiny").y
    assert all(features is Peek.seen[0][0] for features, *_ in Peek.seen)  # one held matrix, not a copy per split
    for _, labels, train, val in Peek.seen:
        seen = np.union1d(train, val)
        assert np.array_equal(np.flatnonzero(labels >= 0), seen)  # no test label, nothing but train and val
        assert np.array_equal(labels[seen], y[seen])


def test_a_service_without_fit_labels_gets_one_bundle_per_split_and_the_same_records(tmp_path, servers):
    plan = SweepPlan(("qmlp",), ("synthetic-tiny",), ("10/10/80",), (0, 1), budget=1)
    runs = []
    for servicer_cls in (Uploads, OlderService):
        endpoint, _, servicer = servers(methods=(QuickMLP,), servicer_cls=servicer_cls)
        directory = OneClient(endpoint)
        with Store(tmp_path / f"{servicer_cls.__name__}.sqlite") as store:
            records = Sweep(plan, store, directory, warmup="none").run()
        directory.close()
        runs.append((servicer.upload_count, [(r.trial_key, r.status, r.val_loss, r.test_accuracy) for r in records]))
    (shared, records), (per_split, older) = runs
    assert shared == 1 and per_split == 2 and records == older and {r[1] for r in records} == {"ok"}


class NoServices(Directory):
    """A directory that must not be asked for any service."""

    def __init__(self):
        self.asked: list[str] = []

    def client(self, method):
        self.asked.append(method)
        raise AssertionError(f"a service for {method} was asked for before the plan's datasets were checked")


def test_a_missing_dataset_is_said_before_any_service_starts(tmp_path, monkeypatch):
    from orchestrator.data import fetch
    from orchestrator.data.fetch import FetchError

    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setenv("NODEGROUND_CACHE", str(tmp_path / "cache"))  # texas not processed here
    monkeypatch.setenv("NODEGROUND_MIRROR", str(tmp_path / "empty-mirror"))
    monkeypatch.setattr(fetch.pooch, "retrieve", offline)
    directory = NoServices()
    plan = SweepPlan(("modes",), ("synthetic-tiny", "texas"), ("10/10/80",), (0,), budget=1)
    with Store(tmp_path / "r.sqlite") as store, pytest.raises(FetchError, match="could not download"):
        Sweep(plan, store, directory, described={"modes": _spec_of(Modes)}).prepare()
    assert directory.asked == []


def _spec_of(method):
    from contract.descriptions import spec_from_proto
    from methods.sdk.service import describe_method

    return spec_from_proto(describe_method(method, "test"))


class Apart(Directory):
    """One service per method, each start waiting until every other start has begun (a serial start never would)."""

    def __init__(self, endpoints: dict[str, str]):
        self.endpoints, self.clients = endpoints, {}
        self.everyone = threading.Barrier(len(endpoints), timeout=HANG_S)  # threads start in ms; serial: never

    def pool_key(self, method):
        return method

    def client(self, method):
        if method not in self.clients:
            self.everyone.wait()
            self.clients[method] = MethodClient(self.endpoints[method])
        return self.clients[method]

    def recover(self, replica):
        return False

    def close(self):
        for client in self.clients.values():
            client.close()


def test_the_services_of_a_sweep_start_at_once_not_one_after_another(tmp_path, servers):
    endpoints = {m.name: servers(methods=(m,))[0] for m in (QuickMLP, Modes, Sleepy)}
    directory = Apart(endpoints)
    plan = SweepPlan(tuple(endpoints), ("synthetic-tiny",), ("10/10/80",), (0,), budget=1)
    with Store(tmp_path / "r.sqlite") as store:
        sweep = Sweep(plan, store, directory, warmup="none")
        sweep.describe_all()
    directory.close()
    assert set(sweep._specs) == set(endpoints) and not directory.everyone.broken


def test_an_interrupted_sweep_cancels_its_fit_in_flight_stores_what_finished_and_retries_nothing(tmp_path, servers):
    """Ctrl-C as the CLI meets it: KeyboardInterrupt in the thread that writes records, then the directory closed.
    The fit in flight, which would sleep past HANG_S, is cancelled (its trial thread ends within HANG_S), nothing is
    retried."""
    endpoints = [servers(methods=(Sleepy,))[0] for _ in range(2)]
    directory = ServiceDirectory(resolve_methods(["sleepy"], {"test": FAMILY}), endpoints={"sleepy": endpoints})
    plan = SweepPlan(("sleepy",), ("synthetic-tiny",), ("10/10/80",), (0,), budget=2)  # 2 x HANG_S, then none

    def interrupt(record):
        raise KeyboardInterrupt

    with Store(tmp_path / "r.sqlite") as store:
        sweep = Sweep(plan, store, directory, parallel=2, warmup="none")
        sweep.progress.on_trial = interrupt
        with pytest.raises(KeyboardInterrupt):
            sweep.run()
        directory.close()  # what open_sweep does on the way out
        trials = [t for t in threading.enumerate() if t.name.startswith("trial")]
        for thread in trials:
            thread.join(HANG_S)
        frame = store.frame()
    assert list(frame["config_json"]) == ['{"seconds": 0.0}'] and list(frame["status"]) == ["ok"]
    waiting = [t.name for t in trials if t.is_alive()]
    assert not waiting, f"{waiting} waited for the fit to finish instead of cancelling it"
    assert sweep._stopping.is_set()  # so no trial lost to the closing is run again
    with pytest.raises(ServiceUnavailable, match="the sweep is ending"):  # nor waits for a replica (a restart)
        directory.acquire("sleepy")
