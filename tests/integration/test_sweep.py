"""Sweeps end to end: label isolation, records, resume, and a service that dies mid-sweep."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from contract.families import load_families
from methods.gnn import GCN, MLP
from methods.sdk.service import MethodServicer, build_server
from orchestrator.data.registry import load_dataset
from orchestrator.data.splits import make_split
from orchestrator.services.directory import ServiceDirectory, resolve_methods
from orchestrator.services.embedded import EmbeddedServices
from orchestrator.store import Store
from orchestrator.sweep import Progress, Sweep, SweepPlan


class SpyServicer(MethodServicer):
    """Keeps every graph it was sent and every fit's labels, to check what a service can see."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.received = []
        self.fits = []  # (train nodes, train labels, val nodes, val labels) of each fit

    def Fit(self, request, context):
        self.fits.append(
            tuple(
                np.asarray(v)
                for v in (request.train_nodes, request.train_labels, request.val_nodes, request.val_labels)
            )
        )
        return super().Fit(request, context)

    def UploadGraph(self, request_iterator, context):
        reply = super().UploadGraph(request_iterator, context)
        self.received.append(self.graphs.get(reply.graph_hash))
        return reply


def test_services_never_see_test_labels(tmp_path):
    spy = SpyServicer("gnn", [MLP, GCN])
    server, port = build_server(spy, "127.0.0.1:0")
    server.start()
    try:
        plan = SweepPlan(
            methods=("mlp", "gcn"),
            datasets=("synthetic-tiny",),
            regimes=("10/10/80", "50/25/25"),
            splits=(0, 1),
            budget=1,
        )
        directory = ServiceDirectory(resolve_methods(["mlp", "gcn"]), endpoints={"gnn": f"127.0.0.1:{port}"})
        with Store(tmp_path / "runs.sqlite") as store:
            records = Sweep(plan, store, directory).run()
        directory.close()
    finally:
        server.stop(0)
    assert len(records) == 8 and all(r.status == "ok" for r in records)
    (bundle,) = spy.received  # one upload, shared by both methods and every (regime, split)
    assert (bundle.labels == -1).all()  # it shows no label at all
    graph = load_dataset("synthetic-tiny")
    matches = [make_split("synthetic-tiny", graph.y, r, i) for r in plan.regimes for i in plan.splits]
    assert len(spy.fits) == 8
    for train, train_labels, val, val_labels in spy.fits:  # each fit's labels: its split's train and val, no other
        split = next(s for s in matches if np.array_equal(train, s.train) and np.array_equal(val, s.val))
        assert not np.intersect1d(np.concatenate([train, val]), split.test).size
        np.testing.assert_array_equal(train_labels, graph.y[split.train])
        np.testing.assert_array_equal(val_labels, graph.y[split.val])


@pytest.mark.slow  # a sweep over every family's service: about a minute
def test_records_carry_costs_metrics_and_provenance(tmp_path):
    plan = SweepPlan(methods=("gcn",), datasets=("synthetic-binary",), regimes=("10/10/80",), splits=(0,), budget=2)
    with EmbeddedServices() as embedded, Store(tmp_path / "runs.sqlite") as store:
        directory = ServiceDirectory(resolve_methods(["gcn"]), embedded=embedded)
        Sweep(plan, store, directory).run()
        frame = store.frame()
    assert list(frame["trial_index"]) == [0, 1] and list(frame["is_default"]) == [1, 0]
    row = frame.iloc[0]
    assert row["status"] == "ok" and row["task_type"] == "binary" and row["primary_metric"] == "auroc"
    assert 0.5 < row["test_auroc"] <= 1.0 and row["val_loss"] > 0 and row["test_precision"] is not None
    assert row["fit_service_s"] > 0 and row["fit_e2e_s"] >= row["fit_service_s"] and row["predict_e2e_s"] > 0
    assert row["fit_peak_rss_bytes"] > 0 and row["upload_e2e_s"] > 0 and frame.iloc[1]["upload_e2e_s"] == 0
    assert json.loads(row["config_json"])["hidden"] == 64 and row["seed"] == 0
    host = json.loads(row["host_json"])
    assert host["torch"] and row["endpoint"].startswith("127.0.0.1:")
    assert host["device"] in (
        "cpu",
        "cuda:0",
    )  # the service's device, as it describes it (with name, driver, CUDA on a GPU)
    assert host["cuda_version"] == torch.version.cuda if torch.version.cuda else "cuda_version" not in host


def test_a_killed_service_is_restarted_and_its_trial_run_again_within_the_run(tmp_path):
    plan = SweepPlan(methods=("mlp",), datasets=("synthetic-tiny",), regimes=("10/10/80",), splits=(1,), budget=3)
    path = tmp_path / "runs.sqlite"
    with EmbeddedServices() as embedded, Store(path) as store:
        directory = ServiceDirectory(resolve_methods(["mlp"]), embedded=embedded)
        sweep = Sweep(plan, store, directory)
        killed = []

        def kill_after_first(record):
            if not killed:
                killed.append(embedded.services["gnn"].process.pid)
                embedded.services["gnn"].process.kill()
                embedded.services["gnn"].process.wait()

        sweep.progress = Progress(on_trial=kill_after_first)
        first = sweep.run()
        directory.close()
        assert [r.status for r in first] == ["ok", "ok", "ok"]  # the second trial met the dead service, then ran again
        assert embedded.services["gnn"].process.pid != killed[0]  # restarted, and the sweep went on
        assert len(store.services_frame()) == 2  # the first start and the restart

        directory = ServiceDirectory(resolve_methods(["mlp"]), embedded=embedded)
        second = Sweep(plan, store, directory).run()
        directory.close()
        frame = store.frame()
    assert second == []
    assert len(frame) == 3 and frame["trial_key"].is_unique and (frame["status"] == "ok").all()


def test_manifest_methods_match_the_family_module():
    from methods.families import method_classes

    for family in load_families().values():
        assert [m.name for m in method_classes(family)] == list(family.methods)


@pytest.mark.usefixtures("mirror")
def test_gcn_default_on_cora_reaches_082(tmp_path):
    plan = SweepPlan(methods=("gcn",), datasets=("cora",), regimes=("10/10/80",), splits=(0,), budget=1)
    with EmbeddedServices() as embedded, Store(tmp_path / "runs.sqlite") as store:
        directory = ServiceDirectory(resolve_methods(["gcn"]), embedded=embedded)
        (record,) = Sweep(plan, store, directory).run()
        directory.close()
    assert record.status == "ok" and record.dataset == "cora"
    assert record.test_accuracy >= 0.82
