"""The sweep: for every (dataset, regime, split, method), run the configuration sequence.

For each cell the graph bundle (labels of test and unlabeled nodes hidden as
-1) is uploaded once per service; each trial is fit, predict, release; the
orchestrator computes the validation loss and test metrics itself and writes
one record per trial, failures included. Trials already in the store are
skipped, so rerunning an interrupted sweep completes only what is missing.
"""

from __future__ import annotations

import json
import os
import platform
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

import grpc
import numpy as np

from methods.sdk.wire import GraphBundle, make_bundle
from orchestrator import __version__
from orchestrator.data.graph import Graph
from orchestrator.data.registry import load_dataset
from orchestrator.data.splits import Split, graph_split
from orchestrator.metrics import evaluate, primary_metric_name, probabilities_ok
from orchestrator.records import (
    STATUS_FAILED,
    STATUS_NONFINITE,
    STATUS_OK,
    STATUS_OOM,
    STATUS_TIMEOUT,
    STATUS_UNAVAILABLE,
    TrialRecord,
    config_hash,
    trial_key,
)
from orchestrator.sampling import config_sequence, sequence_key
from orchestrator.services.client import MethodClient, MethodSpec, ServiceUnavailable
from orchestrator.store import Store

_STATUS_BY_CODE = {
    grpc.StatusCode.DEADLINE_EXCEEDED: STATUS_TIMEOUT,
    grpc.StatusCode.RESOURCE_EXHAUSTED: STATUS_OOM,
    grpc.StatusCode.UNAVAILABLE: STATUS_UNAVAILABLE,
    grpc.StatusCode.CANCELLED: STATUS_UNAVAILABLE,
}


@dataclass(frozen=True)
class SweepPlan:
    methods: tuple[str, ...]
    datasets: tuple[str, ...]
    regimes: tuple[str, ...]
    splits: tuple[int, ...]
    budget: int
    time_limit: float | None = None


class Directory:
    """Where each method's service is; able to restart a dead one when it owns it."""

    def client(self, method: str) -> MethodClient:
        raise NotImplementedError

    def recover(self, method: str) -> bool:
        """Try to bring the method's service back after it stopped answering."""
        raise NotImplementedError


@dataclass
class Progress:
    """Callbacks the CLI hooks a display onto."""

    on_total: Callable[[int], None] = lambda total: None
    on_trial: Callable[[TrialRecord], None] = lambda record: None
    on_skip: Callable[[int], None] = lambda count: None


def host_info() -> str:
    import torch

    return json.dumps(
        {
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "orchestrator": __version__,
        },
        sort_keys=True,
    )


def hidden_label_bundle(graph: Graph, split: Split) -> GraphBundle:
    """The bundle a service receives: only train and validation labels are visible."""
    labels = np.full(graph.num_nodes, -1, dtype=np.int64)
    seen = np.concatenate([split.train, split.val])
    labels[seen] = graph.y[seen]
    return make_bundle(graph.x, graph.edge_index, labels, graph.num_classes)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class Sweep:
    plan: SweepPlan
    store: Store
    directory: Directory
    progress: Progress = field(default_factory=Progress)
    _specs: dict[str, MethodSpec] = field(default_factory=dict)

    def spec(self, method: str) -> MethodSpec:
        if method not in self._specs:
            client = self.directory.client(method)
            hosted = {s.name: s for s in client.describe()}
            if method not in hosted:
                raise ServiceUnavailable(f"the service at {client.endpoint} does not host {method!r} (it hosts {', '.join(hosted)})")
            self._specs[method] = hosted[method]
        return self._specs[method]

    def run(self) -> list[TrialRecord]:
        done = self.store.done_keys()
        sequences = {
            (m, d, r, s): config_sequence(self.spec(m).default_config, self.spec(m).search_space, sequence_key(m, d, r, s), self.plan.budget)
            for d in self.plan.datasets
            for r in self.plan.regimes
            for s in self.plan.splits
            for m in self.plan.methods
        }
        keyed = {
            cell: [trial_key(cell[0], self.spec(cell[0]).version, cell[1], cell[2], cell[3], config_hash(c)) for c in configs]
            for cell, configs in sequences.items()
        }
        total = sum(len(k) for k in keyed.values())
        skipped = sum(1 for keys in keyed.values() for k in keys if k in done)
        self.progress.on_total(total)
        self.progress.on_skip(skipped)
        records: list[TrialRecord] = []
        host = host_info()
        for dataset in self.plan.datasets:
            cells = [c for c in sequences if c[1] == dataset and any(k not in done for k in keyed[c])]
            if not cells:
                continue
            graph = load_dataset(dataset)
            for regime in self.plan.regimes:
                for split_index in self.plan.splits:
                    todo = [c for c in cells if c[2] == regime and c[3] == split_index]
                    if not todo:
                        continue
                    split = graph_split(graph, regime, split_index)
                    bundle = hidden_label_bundle(graph, split)
                    for cell in todo:
                        for index, (config, key) in enumerate(zip(sequences[cell], keyed[cell])):
                            if key in done:
                                continue
                            record = self._trial(cell[0], graph, split, bundle, index, config, key, host)
                            self.store.write(record)
                            records.append(record)
                            self.progress.on_trial(record)
        return records

    def _trial(self, method: str, graph: Graph, split: Split, bundle: GraphBundle, index: int, config: dict, key: str, host: str) -> TrialRecord:
        spec = self.spec(method)
        record = TrialRecord(
            trial_key=key,
            method=method,
            method_version=spec.version,
            family=spec.family,
            kind=spec.kind,
            dataset=graph.name,
            dataset_hash=graph.content_hash,
            task_type=graph.task_type,
            num_classes=graph.num_classes,
            regime=split.regime,
            split=split.index,
            trial_index=index,
            is_default=index == 0,
            config_json=json.dumps(config, sort_keys=True),
            config_hash=config_hash(config),
            seed=split.index,
            status=STATUS_OK,
            host_json=host,
            started_at=_now(),
        )
        try:
            client = self.directory.client(method)
            record.endpoint = client.endpoint
            self._execute(client, method, graph, split, bundle, config, record)
        except grpc.RpcError as exc:
            record.status = _STATUS_BY_CODE.get(exc.code(), STATUS_FAILED)
            record.error = f"{exc.code().name}: {exc.details()}"
            if record.status == STATUS_UNAVAILABLE:
                self.directory.recover(method)
        except ServiceUnavailable as exc:
            record.status, record.error = STATUS_UNAVAILABLE, str(exc)
        record.finished_at = _now()
        return record

    def _execute(self, client: MethodClient, method: str, graph: Graph, split: Split, bundle: GraphBundle, config: dict, record: TrialRecord) -> None:
        upload = client.ensure_graph(bundle)
        record.upload_e2e_s = upload.e2e_seconds if upload.value else 0.0
        try:
            fit = client.fit(method, bundle.graph_hash, split.train, split.val, config, split.index, self.plan.time_limit)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            client.ensure_graph(bundle)  # the service evicted or lost the graph: upload again, once
            fit = client.fit(method, bundle.graph_hash, split.train, split.val, config, split.index, self.plan.time_limit)
        reply = fit.value
        record.fit_e2e_s = fit.e2e_seconds
        record.fit_service_s = reply.stats.seconds
        record.fit_peak_rss_bytes = reply.stats.peak_rss_bytes
        record.fit_peak_gpu_bytes = reply.stats.peak_gpu_bytes
        record.fit_info_json = json.dumps({k: getattr(v, v.WhichOneof("kind")) for k, v in reply.info.items()}, sort_keys=True)
        try:
            predicted = client.predict(reply.model_handle, graph.num_nodes, timeout=self.plan.time_limit)
        finally:
            client.release(reply.model_handle)
        record.predict_e2e_s = predicted.e2e_seconds
        record.predict_service_s = predicted.stats.seconds
        record.predict_peak_rss_bytes = predicted.stats.peak_rss_bytes
        record.predict_peak_gpu_bytes = predicted.stats.peak_gpu_bytes
        self._score(predicted.value, graph, split, record)

    @staticmethod
    def _score(probs: np.ndarray, graph: Graph, split: Split, record: TrialRecord) -> None:
        problem = probabilities_ok(probs)
        if problem is not None:
            record.status, record.error = STATUS_NONFINITE, problem
            return
        val = evaluate(probs[split.val], graph.y[split.val], graph.task_type, graph.num_classes)
        test = evaluate(probs[split.test], graph.y[split.test], graph.task_type, graph.num_classes)
        if not np.isfinite(val["cross_entropy"]):
            record.status, record.error = STATUS_NONFINITE, "validation loss is not finite"
            return
        record.val_loss = val["cross_entropy"]
        record.val_accuracy = val["accuracy"]
        record.val_auroc = val.get("auroc")
        record.test_accuracy = test["accuracy"]
        record.test_cross_entropy = test["cross_entropy"]
        record.test_macro_f1 = test.get("macro_f1")
        record.test_auroc = test.get("auroc")
        record.test_precision = test.get("precision")
        record.primary_metric = primary_metric_name(graph.task_type)
        record.test_primary = test[record.primary_metric]
