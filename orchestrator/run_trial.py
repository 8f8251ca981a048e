"""One trial on a replica the sweep holds: upload, fit, predict, release, score, and the record that says how it went.

The sweep (``orchestrator.sweep``) schedules; this module runs what it hands over. ``TrialRunner.new_record`` starts a
trial's record, ``TrialRunner.run`` fills it on one replica and says what the try showed of the replica; nothing
a service does or returns is raised from it.

Outcomes: an environment failure (the service died, went silent under the client's
health watchdog, or is not ready) is recorded ``unavailable``, which a rerun retries
(the sweep also runs it once more at once when the replica went down). A method failure
(``failed``, ``oom``, ``timeout``, ``nonfinite``) is the trial's outcome and stays.
Everything a service returns is validated inside the trial: a malformed reply makes
that trial ``failed``, never the sweep abort.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import grpc
import numpy as np

from contract.descriptions import MethodSpec
from contract.v1 import method_service_pb2 as pb
from contract.wire import GraphBundle, make_bundle
from orchestrator.data.graph import Graph
from orchestrator.data.splits import Split
from orchestrator.host import host_json
from orchestrator.metrics import evaluate, probabilities_ok
from orchestrator.plan import PlannedTrial, SweepPlan
from orchestrator.protocols import recorded_protocol
from orchestrator.records import (
    STATUS_FAILED,
    STATUS_NONFINITE,
    STATUS_OK,
    STATUS_OOM,
    STATUS_TIMEOUT,
    STATUS_UNAVAILABLE,
    TrialRecord,
    config_hash,
    primary_metric_name,
)
from orchestrator.services.client import CallResult, MethodClient, Replica, ServiceUnavailable, client_deadline
from orchestrator.services.directory import timestamp

PROVENANCE_PREFIX = "weights_"  # fit info keys copied into extra_json (weights_id, weights_sha256, weights_official)

_STATUS_BY_CODE = {
    grpc.StatusCode.DEADLINE_EXCEEDED: STATUS_TIMEOUT,
    grpc.StatusCode.RESOURCE_EXHAUSTED: STATUS_OOM,
    grpc.StatusCode.UNAVAILABLE: STATUS_UNAVAILABLE,
    grpc.StatusCode.CANCELLED: STATUS_UNAVAILABLE,
    # the service is not ready (weights): fixed outside the method, and restarting it fixes nothing
    grpc.StatusCode.FAILED_PRECONDITION: STATUS_UNAVAILABLE,
}
# NOT_FOUND is not mapped: a Predict's NOT_FOUND (the model it just fitted is gone) is the method failing,
# and a Fit's NOT_FOUND (the graph is not held) is answered by one upload and one more fit (``GraphNotHeld``).


class ReplyError(ValueError):
    """A service's reply cannot be used: malformed, or not the shape the trial asked for."""


class GraphNotHeld(RuntimeError):
    """A fit answered NOT_FOUND for its graph again right after the graph was uploaded to it.

    The service is keeping nothing it is sent (memory pressure, a misbehaving service): recorded as
    ``unavailable``, like a service that is not ready, and nothing is restarted for it.
    """


class Bundles:
    """One dataset's bundles, each built (and hashed) once, when first asked for, by whichever trial asks first.

    ``shared`` has every label hidden: the one upload per service that every split and regime fits on, their
    labels sent with each fit. ``of_split`` (only for a service that does not take a fit's labels) shows one
    split's training and validation labels, as every bundle did before.
    """

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._shared: GraphBundle | None = None
        self._splits: dict[tuple[str, int], GraphBundle] = {}
        self._lock = threading.Lock()

    def shared(self) -> GraphBundle:
        with self._lock:
            if self._shared is None:
                hidden = np.full(self.graph.num_nodes, -1, dtype=np.int64)
                self._shared = make_bundle(self.graph.x, self.graph.edge_index, hidden, self.graph.num_classes)
            return self._shared

    def of_split(self, split: Split) -> GraphBundle:
        with self._lock:
            where = (split.regime, split.index)
            if where not in self._splits:
                self._splits[where] = hidden_label_bundle(self.graph, split)
            return self._splits[where]


@dataclass
class Job:
    """A trial as the sweep hands it over: its plan entry, its dataset and split, the dataset's bundles."""

    trial: PlannedTrial
    graph: Graph
    split: Split
    bundles: Bundles


def hidden_label_bundle(graph: Graph, split: Split) -> GraphBundle:
    """The bundle a service receives: only train and validation labels are visible."""
    labels = np.full(graph.num_nodes, -1, dtype=np.int64)
    seen = np.concatenate([split.train, split.val])
    labels[seen] = graph.y[seen]
    return make_bundle(graph.x, graph.edge_index, labels, graph.num_classes)


class Outcome(NamedTuple):
    """What one try showed of the replica it ran on (how the trial went is in its record)."""

    lost: bool  # the replica went down during this try: the trial is worth another
    recover: bool  # the replica needs recovering: the directory has it (in the background) instead of a release


@dataclass
class TrialRunner:
    """Runs a sweep's trials, several at once (one per worker thread), each on the replica the sweep holds for it."""

    plan: SweepPlan
    spec: Callable[[str], MethodSpec]  # the method as the plan knows it (``Sweep.spec``)
    on_scored: Callable[[float], None]  # the seconds one trial's scoring took (``SweepTiming.score_s``)
    host: dict[str, Any] = field(default_factory=dict)  # host_facts(), taken when the sweep's run starts
    _devices: dict[str, dict[str, str | int]] = field(default_factory=dict)  # endpoint -> its service's device

    def run(self, replica: Replica, job: Job, record: TrialRecord) -> Outcome:
        """One try of the trial on ``replica``, into ``record``; what it showed of the replica.

        What a service's calls end in (a gRPC status, a service gone or silent, a graph not held, a malformed
        reply) is the trial's outcome, recorded here and not raised.
        """
        lost = False
        recover = False
        try:
            record.endpoint = replica.endpoint
            record.host_json = self._host_json(replica)
            record.started_at = timestamp()
            self._execute(replica.client, job, record)
        except grpc.RpcError as exc:
            record.status = _STATUS_BY_CODE.get(exc.code(), STATUS_FAILED)
            record.error = f"{exc.code().name}: {exc.details()}"
            if record.status == STATUS_UNAVAILABLE and exc.code() != grpc.StatusCode.FAILED_PRECONDITION:
                lost = recover = True
            elif client_deadline(exc):
                if not replica.client.responsive():  # not the method: the service went silent
                    record.status = STATUS_UNAVAILABLE
                    record.error = (
                        f"the service at {replica.endpoint} stopped answering (no reply within the time limit, "
                        "no health answer)"
                    )
                    lost = recover = True
                elif replica.source == "embedded":
                    # The service did not stop at its own limit (a method that never checks its deadline):
                    # it may still be computing, so start a fresh one rather than queue behind it.
                    recover = True
        except ServiceUnavailable as exc:
            record.status, record.error = STATUS_UNAVAILABLE, str(exc)
            lost = recover = True
        except GraphNotHeld as exc:
            record.status, record.error = STATUS_UNAVAILABLE, str(exc)
        except ReplyError as exc:
            record.status, record.error = STATUS_FAILED, f"malformed reply: {exc}"
        return Outcome(lost, recover)

    def _host_json(self, replica: Replica) -> str:
        """This host's facts plus the device of the service that runs the trial (asked once per endpoint)."""
        known = self._devices.get(replica.endpoint)
        if known is None:
            try:
                known = self._devices[replica.endpoint] = replica.client.device()
            except ServiceUnavailable:
                return host_json(self.host)  # the trial's own calls will record what is wrong with the service
        return host_json(self.host, known)

    def new_record(self, job: Job) -> TrialRecord:
        """The trial's record before it runs (``ok`` until a try says otherwise), written even if no replica is had."""
        trial, graph, spec = job.trial, job.graph, self.spec(job.trial.method)
        return TrialRecord(
            trial_key=trial.key,
            method=trial.method,
            method_version=spec.version,
            family=spec.family,
            kind=spec.kind,
            dataset=graph.name,
            dataset_hash=graph.content_hash,
            task_type=graph.task_type,
            num_classes=graph.num_classes,
            regime=job.split.regime,
            split=job.split.index,
            trial_index=trial.index,
            is_default=trial.index == 0,
            config_json=json.dumps(trial.config, sort_keys=True),
            config_hash=config_hash(trial.config),
            seed=job.split.index,
            status=STATUS_OK,
            time_limit_s=self.plan.time_limit,
            host_json=host_json(self.host),
            started_at=timestamp(),
            protocol=recorded_protocol(self.plan.protocol, job.split.regime, job.split.index, trial.index),
        )

    def _fit(self, client: MethodClient, job: Job, bundle: GraphBundle, labels: np.ndarray | None) -> CallResult:
        """The trial's fit; a graph the service no longer holds (NOT_FOUND: evicted, lost) is uploaded again, once."""
        split = job.split

        def fit() -> CallResult:
            return client.fit(
                job.trial.method,
                bundle.graph_hash,
                split.train,
                split.val,
                job.trial.config,
                split.index,
                self.plan.time_limit,
                labels,
            )

        try:
            return fit()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                raise
        client.forget_graph(bundle.graph_hash)
        client.ensure_graph(bundle)
        try:
            return fit()
        except grpc.RpcError as again:
            if again.code() != grpc.StatusCode.NOT_FOUND:
                raise
            raise GraphNotHeld(
                f"NOT_FOUND: {again.details()} (answered again right after the graph was uploaded)"
            ) from None

    def _execute(self, client: MethodClient, job: Job, record: TrialRecord) -> None:
        graph, split = job.graph, job.split
        shared = client.takes_fit_labels()  # the graph's one bundle, this split's labels sent with the fit
        bundle = job.bundles.shared() if shared else job.bundles.of_split(split)
        upload = client.ensure_graph(bundle)
        record.upload_e2e_s = upload.e2e_seconds if upload.value else 0.0
        fit = self._fit(client, job, bundle, graph.y if shared else None)
        reply = fit.value
        stats = _check_stats(reply.stats if reply.HasField("stats") else None, "fit")
        record.fit_e2e_s = fit.e2e_seconds
        record.fit_service_s = stats.seconds
        record.fit_cpu_s = stats.cpu_seconds or None
        record.fit_peak_rss_bytes = stats.peak_rss_bytes
        record.fit_peak_gpu_bytes = stats.peak_gpu_bytes
        info = _fit_info(reply)
        record.fit_info_json = json.dumps(info, sort_keys=True)
        provenance = {k: v for k, v in info.items() if k.startswith(PROVENANCE_PREFIX)}
        if provenance:  # which pretrained weights produced this result, and whether they are the official file
            record.extra_json = json.dumps(provenance, sort_keys=True)
        if not reply.model_handle:
            raise ReplyError("the fit returned no model handle")
        try:
            predicted = client.predict(
                reply.model_handle, graph.num_nodes, graph.num_classes, timeout=self.plan.time_limit
            )
        except ServiceUnavailable:
            raise  # gone or hung: it holds nothing worth releasing, and would not answer
        except BaseException as exc:
            try:  # free the model, but report what went wrong with the predict
                client.release(reply.model_handle)
            except (grpc.RpcError, ServiceUnavailable):
                pass
            if isinstance(exc, ValueError):  # BundleError and any other decoding error of the reply
                raise ReplyError(str(exc)) from None
            raise
        warning = _release(client, reply.model_handle)
        if warning is not None:  # the predictions are valid: the trial stands, the failed release is noted on it
            extra = json.loads(record.extra_json) if record.extra_json else {}
            record.extra_json = json.dumps({**extra, "release_warning": warning}, sort_keys=True)
        stats = _check_stats(predicted.stats, "predict")
        record.predict_e2e_s = predicted.e2e_seconds
        record.predict_service_s = stats.seconds
        record.predict_cpu_s = stats.cpu_seconds or None
        record.predict_peak_rss_bytes = stats.peak_rss_bytes
        record.predict_peak_gpu_bytes = stats.peak_gpu_bytes
        scoring = time.perf_counter()
        self._score(predicted.value, graph, split, record)
        self.on_scored(time.perf_counter() - scoring)

    @staticmethod
    def _score(probs: np.ndarray, graph: Graph, split: Split, record: TrialRecord) -> None:
        problem = probabilities_ok(probs)
        if problem is not None:
            record.status, record.error = STATUS_NONFINITE, problem
            return
        val = evaluate(probs[split.val], graph.y[split.val], graph.task_type, graph.num_classes, full=False)
        if not np.isfinite(val["cross_entropy"]):
            record.status, record.error = STATUS_NONFINITE, "validation loss is not finite"
            return
        test = evaluate(probs[split.test], graph.y[split.test], graph.task_type, graph.num_classes)
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


def _release(client: MethodClient, handle: str) -> str | None:
    """Free a model after a valid predict; what went wrong, if anything (a warning on the trial, not its outcome).

    A service that stops answering (ServiceUnavailable) still propagates: the replica needs recovering.
    """
    try:
        released = client.release(handle)
    except grpc.RpcError as exc:
        return f"release failed: {exc.code().name}: {exc.details()}"
    return None if released else f"release of model {handle!r} answered released=false"


def _check_stats(stats: pb.CallStats | None, call: str) -> pb.CallStats:
    """The call's own measurements, refused (ReplyError) when missing or not a finite, non-negative time and memory."""
    if stats is None:
        raise ReplyError(f"{call} reply carries no stats")
    times = (stats.seconds, stats.cpu_seconds)
    if not (all(np.isfinite(t) and t >= 0 for t in times) and stats.peak_rss_bytes >= 0 and stats.peak_gpu_bytes >= 0):
        raise ReplyError(
            f"{call} stats are not finite, non-negative times and memory: {stats.seconds!r} s, "
            f"{stats.cpu_seconds!r} CPU s, {stats.peak_rss_bytes} / {stats.peak_gpu_bytes} bytes"
        )
    return stats


def _fit_info(reply: pb.FitResponse) -> dict[str, Any]:
    """The fit's ``info`` map as plain values; ReplyError on a value that carries none."""
    info = {}
    for key, value in reply.info.items():
        kind = value.WhichOneof("kind")
        if kind is None:
            raise ReplyError(f"fit info {key!r} carries no value")
        info[key] = getattr(value, kind)
    return info
