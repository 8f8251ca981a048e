"""The sweep: for every (dataset, regime, split, method), run the configuration sequence.

Each graph is uploaded once per service, its features and edges with every label
hidden (-1), and every split and regime fits on it: a fit carries its own training
and validation labels, never test labels (a service that does not take them, an
older one, gets one bundle per split with that split's labels, as before); each
trial is fit, predict, release; the
orchestrator computes the validation loss and test metrics itself and writes
one record per trial, failures included. Trials already in the store are
skipped, so rerunning an interrupted sweep completes only what is missing.

Execution: up to ``parallel`` trials are in flight at once, each on its own
service replica (``Directory.acquire``); the calling thread is the only one
that writes to the store, one transaction per record, as trials complete.
With ``parallel=1`` trials run strictly one after another. Every trial's
seed is fixed by its split, so a parallel sweep stores the same records
(keys, configurations, metrics) as a serial one.

Outcomes: an environment failure (the service died, went silent under the client's
health watchdog, or is not ready) is recorded ``unavailable``, which a rerun retries;
a trial whose service was brought back is also run once more at once. A method failure
(``failed``, ``oom``, ``timeout``, ``nonfinite``) is the trial's outcome and stays.
Everything a service returns is validated inside the trial: a malformed reply makes
that trial ``failed``, never the sweep abort. Before any trial, ``prepare`` refuses a
plan that cannot run (a public split that does not exist, a service not ready).

Warm-up: when a replica comes up (a start, a restart, a remote endpoint first
dialled) it runs one tiny fit+predict per method on a small built-in graph;
its start and warm-up seconds go to the store's ``services`` table, so
first-call costs (imports, CUDA context, checkpoint loading) are charged to no
trial.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np

from contract.descriptions import GENERATOR, DescriptionError, MethodSpec, spec_differences
from contract.space import capped_epochs
from contract.v1 import method_service_pb2 as pb
from contract.wire import BundleError, GraphBundle, make_bundle
from orchestrator.data.graph import Graph
from orchestrator.data.registry import dataset_hash, ensure_dataset, is_catalog_task, load_dataset
from orchestrator.data.splits import PUBLIC, Split, SplitError, graph_split
from orchestrator.host import host_facts, host_json
from orchestrator.metrics import evaluate, probabilities_ok
from orchestrator.plan import Plan, PlannedTrial, SweepPlan, make_plan
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
from orchestrator.services.client import CallResult, MethodClient, Replica, ServiceNotReady, ServiceUnavailable
from orchestrator.services.directory import Directory, timestamp
from orchestrator.store import ServiceRecord, ShardPlan, Store

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

UNAVAILABLE_RETRIES = 1  # a trial whose replica went down is run again this many times (on it, recovered, or another)


class ReplyError(ValueError):
    """A service's reply cannot be used: malformed, or not the shape the trial asked for."""


class GraphNotHeld(RuntimeError):
    """A fit answered NOT_FOUND for its graph again right after the graph was uploaded to it.

    The service is keeping nothing it is sent (memory pressure, a misbehaving service): recorded as
    ``unavailable``, like a service that is not ready, and nothing is restarted for it.
    """


WARMUP_EPOCHS = 2  # a warm-up fit trains at most this many epochs (contract.space.capped_epochs)
WARMUP_TIME_LIMIT_S = 120.0
WARMUP_MODES = ("all", "embedded", "none")


@dataclass
class Progress:
    """Callbacks the CLI hooks a display onto (called from the thread that runs the sweep)."""

    on_total: Callable[[int], None] = lambda total: None
    on_trial: Callable[[TrialRecord], None] = lambda record: None
    on_skip: Callable[[int], None] = lambda count: None
    on_service: Callable[[ServiceRecord], None] = lambda record: None


@dataclass
class SweepTiming:
    """Where a sweep's time went (seconds, summed over trials): for benchmarks and overhead checks."""

    trials: int = 0
    wall_s: float = 0.0  # run() from planning to the last record
    job_s: float = 0.0  # inside trial workers: acquire, RPCs, scoring, release
    score_s: float = 0.0  # metrics on returned probabilities (part of job_s)
    write_s: float = 0.0  # store writes of trial records (the writer thread)


class _Bundles:
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
class _Job:
    trial: PlannedTrial
    graph: Graph
    split: Split
    bundles: _Bundles


def hidden_label_bundle(graph: Graph, split: Split) -> GraphBundle:
    """The bundle a service receives: only train and validation labels are visible."""
    labels = np.full(graph.num_nodes, -1, dtype=np.int64)
    seen = np.concatenate([split.train, split.val])
    labels[seen] = graph.y[seen]
    return make_bundle(graph.x, graph.edge_index, labels, graph.num_classes)


def warmup_bundle() -> tuple[GraphBundle, np.ndarray, np.ndarray]:
    """A 60-node, 3-class built-in graph for warm-up fits: train 0-19, validation 20-39, the rest hidden."""
    from orchestrator.data.synthetic import sbm_graph

    graph = sbm_graph("warmup", num_nodes=60, num_classes=3, num_features=8, avg_degree=4.0, seed=0)
    labels = graph.y.astype(np.int64).copy()
    labels[40:] = -1
    return make_bundle(graph.x, graph.edge_index, labels, graph.num_classes), np.arange(0, 20), np.arange(20, 40)


@dataclass
class Sweep:
    plan: SweepPlan
    store: Store
    directory: Directory
    progress: Progress = field(default_factory=Progress)
    parallel: int = 1  # trials in flight at once
    warmup: str = "embedded"  # which replicas get warm-up fits: all, embedded (processes this sweep started), none
    record_plan: bool = False  # a shard run: record the plan in the store (a merge checks completeness against it)
    # Methods as their families' committed descriptions say (``contract.descriptions``): planned without a
    # service, and each checked against its service's Describe before its first trial. A method not in it
    # is planned from its service's Describe (a family without a description starts to be planned).
    described: Mapping[str, MethodSpec] = field(default_factory=dict)
    _specs: dict[str, MethodSpec] = field(default_factory=dict)
    _plan: Plan | None = None
    _shard_trials: list[PlannedTrial] | None = None
    _services: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    _warmup: tuple | None = None
    _deferred: list[Replica] | None = None  # replicas that came up while describing: warmed once all are ready
    _prepared: bool = False
    _host: dict[str, Any] = field(default_factory=dict)  # host_facts(), taken when run() starts
    _devices: dict[str, dict[str, str | int]] = field(default_factory=dict)  # endpoint -> its service's device
    timing: SweepTiming = field(default_factory=SweepTiming)
    _timing_lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)  # run() is ending early: no trial is retried

    def __post_init__(self) -> None:
        if self.warmup not in WARMUP_MODES:
            raise ValueError(f"warmup must be one of {', '.join(WARMUP_MODES)}, got {self.warmup!r}")
        if self.parallel < 1:
            raise ValueError(f"parallel must be at least 1, got {self.parallel}")
        self.directory.on_ready = self._on_ready

    def spec(self, method: str) -> MethodSpec:
        """The method as the plan knows it: its committed description, else its service's Describe."""
        if method in self.described:
            return self.described[method]
        if method not in self._specs:
            self._specs[method] = self._live_spec(method)
        return self._specs[method]

    def _live_spec(self, method: str) -> MethodSpec:
        """What the method's service describes (this starts the service when it is not up yet)."""
        client = self.directory.client(method)
        hosted = {s.name: s for s in client.describe()}
        if method not in hosted:
            raise ServiceUnavailable(
                f"the service at {client.endpoint} does not host {method!r} (it hosts {', '.join(hosted)})"
            )
        live = hosted[method]
        described = self.described.get(method)
        if described is not None:
            differences = spec_differences(described, live)
            if differences:
                raise DescriptionError(
                    f"the service at {client.endpoint} describes {method} ({live.version}) otherwise than its "
                    f"family's description ({described.version}): {', '.join(differences)} differ; run a service "
                    f"built from this checkout, or regenerate the description with `{GENERATOR} {described.family}`"
                )
        return live

    def prepare(self) -> None:
        """All that can refuse the run, before its first trial: the plan's checks, then the services it needs ready.

        Only what this shard still has to run is asked for: the datasets of its trials not yet stored
        (public splits) and the services of their methods, each checked against its description.
        """
        if self._prepared:
            return
        todo = self._todo()
        self.check_plan(dict.fromkeys(t.dataset for t in todo))
        self.describe_all(dict.fromkeys(t.method for t in todo))
        self._prepared = True

    def check_plan(self, datasets: Iterable[str] | None = None) -> None:
        """Plan-level checks, before any service starts or any trial runs: every dataset asked for is fetched and
        verified (a missing file is said in seconds, not after the services have started), every public split
        asked for exists."""
        names = list(self.plan.datasets if datasets is None else datasets)
        for name in names:
            ensure_dataset(name)
        if PUBLIC not in self.plan.regimes:
            return
        problems = []
        for name in names:
            graph = load_dataset(name)
            for index in self.plan.splits:
                try:
                    graph_split(graph, PUBLIC, index)
                except SplitError as exc:
                    problems.append(str(exc))
                    break
        if problems:
            raise SplitError(f"--regimes public: {'; '.join(problems)}")

    def describe_all(self, methods: Iterable[str] | None = None) -> None:
        """Describe methods before any trial (this starts their first services), then warm those up.

        ServiceNotReady names every method whose service cannot fit (weights missing), not
        only the first, so that one fetch command covers them all; it comes before any
        warm-up, so a run that cannot start says so at once.
        """
        wanted = list(self.plan.methods if methods is None else methods)
        groups: dict[str, list[str]] = {}
        for method in wanted:  # one group per set of replicas: they start at once, each group's methods in turn
            groups.setdefault(self.directory.pool_key(method), []).append(method)
        found: dict[str, MethodSpec | ServiceNotReady] = {}

        def describe(group: list[str]) -> None:
            for method in group:
                try:
                    found[method] = self._live_spec(method)
                except ServiceNotReady as exc:
                    found[method] = exc

        self._deferred = []
        try:
            _all_at_once(describe, list(groups.values()), "describe")
        finally:
            deferred, self._deferred = self._deferred, None
        not_ready = [found[m] for m in wanted if isinstance(found[m], ServiceNotReady)]
        if not_ready:
            raise ServiceNotReady.combine(not_ready)  # type: ignore[arg-type]
        self._specs.update({m: spec for m, spec in found.items() if isinstance(spec, MethodSpec)})
        if deferred and self._warmup is None:
            self._warmup = warmup_bundle()
        _all_at_once(self._on_ready, deferred, "warmup")

    # ---- the plan ----------------------------------------------------------

    def planned(self) -> Plan:
        """The whole plan's cells (every shard's), from the methods' specs and the datasets' identities."""
        if self._plan is None:
            self._plan = make_plan(self.plan, {m: self.spec(m) for m in self.plan.methods})
        return self._plan

    def planned_trials(self) -> list[PlannedTrial]:
        """This shard's trials in execution order: dataset, regime, split, method, then sequence position.

        Spelled out once (only this shard's cells): the checks, the record of the plan, the run and its results
        all read the same list.
        """
        if self._shard_trials is None:
            self._shard_trials = list(self.planned().trials(self.planned().shard_cells(*self.plan.shard)))
        return self._shard_trials

    def shard_record(self) -> ShardPlan:
        """What this shard's store records of the plan before its first trial (a merge checks completeness by it):
        the plan's id and shard sizes from its cells, this shard's keys; no other shard's trial is spelled out."""
        index, count = self.plan.shard
        return self.planned().shard_record(index, count, (t.key for t in self.planned_trials()))

    def _todo(self) -> list[PlannedTrial]:
        """This shard's trials the store does not hold yet (its keys upgraded first, see ``_upgrade_keys``)."""
        planned = self.planned_trials()
        self._upgrade_keys(dict.fromkeys(t.dataset for t in planned))
        done = self.store.done_keys(self.plan.time_limit)
        return [t for t in planned if t.key not in done]

    def _upgrade_keys(self, datasets: Iterable[str]) -> None:
        """Stored keys of catalog tasks that name the dataset's content hash (written before keys carried the
        catalog's identity) gain that identity when the content is the catalog's today, so a rerun skips
        exactly what it skipped before. Finding today's content reads the cache, or loads the dataset once."""
        identities = self.planned().identities
        for dataset in datasets:
            identity = identities[dataset]
            if not is_catalog_task(dataset):
                continue
            stale = self.store.contents_keyed_otherwise(dataset, identity)
            if stale:
                content = dataset_hash(dataset)
                if content in stale:
                    self.store.rekey_content(dataset, content, identity)

    def _jobs(self, todo: list[PlannedTrial]) -> Iterator[_Job]:
        """Jobs in plan order; each dataset is loaded, and each split drawn, only when reached."""
        loaded: dict[str, tuple[Graph, _Bundles]] = {}
        splits: dict[tuple[str, int], Split] = {}
        for trial in todo:
            if trial.dataset not in loaded:
                loaded.clear()
                splits.clear()
                graph = load_dataset(trial.dataset)
                loaded[trial.dataset] = (graph, _Bundles(graph))
            graph, bundles = loaded[trial.dataset]
            where = (trial.regime, trial.split)
            if where not in splits:
                splits[where] = graph_split(graph, trial.regime, trial.split)
            yield _Job(trial, graph, splits[where], bundles)

    # ---- running -------------------------------------------------------------

    def run(self) -> list[TrialRecord]:
        started = time.perf_counter()
        self.store.claim()  # one writer per store: a second orchestrator is refused, not run twice
        self.prepare()
        planned = self.planned_trials()
        if self.record_plan:
            self.store.write_plan(self.shard_record())
        todo = self._todo()
        self.progress.on_total(len(planned))
        self.progress.on_skip(len(planned) - len(todo))
        self._drain_services()
        self._host = host_facts()
        records: list[TrialRecord] = []
        jobs = self._jobs(todo)
        pool = ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix="trial")
        in_flight: dict[Future[TrialRecord], int] = {}
        order = 0
        try:
            while True:
                while len(in_flight) < self.parallel:
                    job = next(jobs, None)
                    if job is None:
                        break
                    in_flight[pool.submit(self._run_job, job)] = order
                    order += 1
                if not in_flight:
                    break
                finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in sorted(finished, key=in_flight.__getitem__):
                    del in_flight[future]
                    record = future.result()
                    self._drain_services()
                    wrote = time.perf_counter()
                    self.store.write(record)  # the one writer: this thread, one transaction per record
                    self.timing.write_s += time.perf_counter() - wrote
                    self.timing.trials += 1
                    records.append(record)
                    self.progress.on_trial(record)
        except BaseException:  # interrupted (Ctrl-C) or the store failed: in-flight trials are not retried
            self._stopping.set()
            raise
        finally:
            pool.shutdown(wait=not in_flight, cancel_futures=True)
            self._drain_services()
            self.timing.wall_s += time.perf_counter() - started
        return records

    def _drain_services(self) -> None:
        while True:
            try:
                service = self._services.get_nowait()
            except queue.Empty:
                return
            self.store.write_service(service)
            self.progress.on_service(service)

    def _run_job(self, job: _Job) -> TrialRecord:
        started = time.perf_counter()
        try:
            return self._run_trial(job)
        finally:
            with self._timing_lock:
                self.timing.job_s += time.perf_counter() - started

    def _run_trial(self, job: _Job) -> TrialRecord:
        """Run one trial; one whose replica went down is run again, at most ``UNAVAILABLE_RETRIES`` times:
        on an idle sibling at once, else on whichever replica is free first (the restarted one once it
        is back), else the directory says none is left and that is the record."""
        for _ in range(UNAVAILABLE_RETRIES):
            record, lost = self._attempt(job)
            if not lost or self._stopping.is_set():
                return record
        return self._attempt(job)[0]

    def _attempt(self, job: _Job) -> tuple[TrialRecord, bool]:
        """One try of a trial: its record, and whether the replica it held went down (worth a retry).

        A replica that went down goes to the directory to be recovered (restarted, or waited for) or
        else marked down, in the background: the retry's ``acquire`` hands out whichever replica is
        free first (an idle sibling at once, the recovered one once it is back), or ServiceUnavailable.
        """
        record = self._new_record(job)
        lost = False  # the replica went down during this try: the trial is worth another
        handed = False  # the replica needs recovering: the directory has it (in the background) instead of a release
        try:
            replica = self.directory.acquire(job.trial.method)
        except ServiceUnavailable as exc:
            record.status, record.error, record.finished_at = STATUS_UNAVAILABLE, str(exc), timestamp()
            return record, False
        try:
            record.endpoint = replica.endpoint
            record.host_json = self._host_json(replica)
            record.started_at = timestamp()
            self._execute(replica.client, job, record)
        except grpc.RpcError as exc:
            record.status = _STATUS_BY_CODE.get(exc.code(), STATUS_FAILED)
            record.error = f"{exc.code().name}: {exc.details()}"
            if record.status == STATUS_UNAVAILABLE and exc.code() != grpc.StatusCode.FAILED_PRECONDITION:
                lost = handed = True
            elif _client_deadline(exc):
                if not replica.client.responsive():  # not the method: the service went silent
                    record.status = STATUS_UNAVAILABLE
                    record.error = (
                        f"the service at {replica.endpoint} stopped answering (no reply within the time limit, "
                        "no health answer)"
                    )
                    lost = handed = True
                elif replica.source == "embedded":
                    # The service did not stop at its own limit (a method that never checks its deadline):
                    # it may still be computing, so start a fresh one rather than queue behind it.
                    handed = True
        except ServiceUnavailable as exc:
            record.status, record.error = STATUS_UNAVAILABLE, str(exc)
            lost = handed = True
        except GraphNotHeld as exc:
            record.status, record.error = STATUS_UNAVAILABLE, str(exc)
        except ReplyError as exc:
            record.status, record.error = STATUS_FAILED, f"malformed reply: {exc}"
        finally:
            if handed:
                self.directory.lost(replica)  # recovered (restarted, waited for) while the retry takes a free replica
            else:
                self.directory.release(replica)
        record.finished_at = timestamp()
        return record, lost

    def _host_json(self, replica: Replica) -> str:
        """This host's facts plus the device of the service that runs the trial (asked once per endpoint)."""
        known = self._devices.get(replica.endpoint)
        if known is None:
            try:
                known = self._devices[replica.endpoint] = replica.client.device()
            except ServiceUnavailable:
                return host_json(self._host)  # the trial's own calls will record what is wrong with the service
        return host_json(self._host, known)

    def _new_record(self, job: _Job) -> TrialRecord:
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
            host_json=host_json(self._host),
            started_at=timestamp(),
            protocol=recorded_protocol(self.plan.protocol, job.split.regime, job.split.index, trial.index),
        )

    def _fit(self, client: MethodClient, job: _Job, bundle: GraphBundle, labels: np.ndarray | None) -> CallResult:
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

    def _execute(self, client: MethodClient, job: _Job, record: TrialRecord) -> None:
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
        record.predict_peak_rss_bytes = stats.peak_rss_bytes
        record.predict_peak_gpu_bytes = stats.peak_gpu_bytes
        scoring = time.perf_counter()
        self._score(predicted.value, graph, split, record)
        with self._timing_lock:
            self.timing.score_s += time.perf_counter() - scoring

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

    # ---- warm-up ---------------------------------------------------------------

    def _on_ready(self, replica: Replica) -> None:
        """Measure a fresh replica's warm-up (never raises: a failed warm-up is recorded, the sweep goes on)."""
        if self._deferred is not None:
            self._deferred.append(replica)
            return
        service = ServiceRecord(
            endpoint=replica.endpoint,
            family=replica.family,
            source=replica.source,
            pool=replica.pool,
            started_at=replica.started_at or timestamp(),
            start_seconds=replica.start_seconds,
            pid=replica.pid,
        )
        wanted = [m for m in self.plan.methods if m in replica.methods]
        if self.warmup == "all" or (self.warmup == "embedded" and replica.source == "embedded"):
            service.warmup_seconds, service.warmup_methods, service.warmup_error = self._warm(replica.client, wanted)
        self._services.put(service)

    def _warm(self, client: MethodClient, methods: list[str]) -> tuple[float, str, str | None]:
        if self._warmup is None:
            self._warmup = warmup_bundle()
        bundle, train, val = self._warmup
        started = time.perf_counter()
        errors = []
        try:
            hosted = {s.name: s for s in client.describe()}
            client.ensure_graph(bundle)
            for method in methods:
                spec = hosted.get(method)
                if spec is None:
                    errors.append(f"{method}: not hosted")
                    continue
                config = {**spec.default_config, **capped_epochs(spec.default_config, WARMUP_EPOCHS)}
                try:
                    fit = client.fit(method, bundle.graph_hash, train, val, config, 0, WARMUP_TIME_LIMIT_S)
                    try:
                        client.predict(
                            fit.value.model_handle, bundle.num_nodes, bundle.num_classes, timeout=WARMUP_TIME_LIMIT_S
                        )
                    finally:
                        client.release(fit.value.model_handle)
                except grpc.RpcError as exc:
                    errors.append(f"{method}: {exc.code().name}: {exc.details()}")
                except (BundleError, ServiceUnavailable) as exc:
                    errors.append(f"{method}: {exc}")
        except grpc.RpcError as exc:
            errors.append(f"{exc.code().name}: {exc.details()}")
        except ServiceUnavailable as exc:
            errors.append(str(exc))
        return time.perf_counter() - started, ",".join(methods), "; ".join(errors) or None


def _all_at_once(work: Callable[[Any], None], items: list[Any], name: str) -> None:
    """``work`` on every item, each in its own thread (service starts and warm-ups overlap: the slowest one is the
    wait, not their sum); the first item's exception, in order, is raised once all have ended. An interrupt (Ctrl-C)
    does not wait for them: what they started is stopped with the sweep's services."""
    if len(items) <= 1:
        for item in items:
            work(item)
        return
    pool = ThreadPoolExecutor(max_workers=len(items), thread_name_prefix=name)
    try:
        futures = [pool.submit(work, item) for item in items]
        wait(futures)
        for future in futures:
            future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


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
    if not (
        np.isfinite(stats.seconds) and stats.seconds >= 0 and stats.peak_rss_bytes >= 0 and stats.peak_gpu_bytes >= 0
    ):
        raise ReplyError(
            f"{call} stats are not a finite, non-negative time and memory: {stats.seconds!r} s, "
            f"{stats.peak_rss_bytes} / {stats.peak_gpu_bytes} bytes"
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


def _client_deadline(exc: grpc.RpcError) -> bool:
    """The deadline ran out on the client's side (the service never answered), not in the service."""
    return (
        exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED and (exc.details() or "").strip().lower() == "deadline exceeded"
    )
