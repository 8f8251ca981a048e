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

Running one trial (upload, fit, predict, release, score; its record and its outcome) is
``orchestrator.run_trial``'s; what can refuse the run before its first trial, ``orchestrator.preflight``'s
(``prepare`` asks it: a public split that does not exist, a service not ready); each replica's start
and warm-up, ``orchestrator.warmup``'s. A trial whose replica went down (recorded ``unavailable``,
which a rerun retries) is also run once more at once, on whichever replica is free first.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from contract.descriptions import MethodSpec
from orchestrator.data.graph import Graph
from orchestrator.data.registry import dataset_hash, is_catalog_task, load_dataset
from orchestrator.data.splits import Split, graph_split
from orchestrator.host import host_facts
from orchestrator.plan import Plan, PlannedTrial, SweepPlan, make_plan
from orchestrator.preflight import check_datasets, describe_services, live_spec
from orchestrator.records import STATUS_UNAVAILABLE, TrialRecord
from orchestrator.run_trial import Bundles, Job, Outcome, TrialRunner
from orchestrator.services.client import ServiceNotReady, ServiceUnavailable
from orchestrator.services.directory import Directory, timestamp
from orchestrator.store import ServiceRecord, ShardPlan, Store
from orchestrator.warmup import WARMUP_MODES, Warmups

UNAVAILABLE_RETRIES = 1  # a trial whose replica went down is run again this many times (on it, recovered, or another)


@dataclass
class Progress:
    """Callbacks the CLI hooks a display onto: called from the thread that runs the sweep, except ``on_start``,
    which a trial's own thread calls as the trial begins (so a display can name what runs and for how long)."""

    on_total: Callable[[int], None] = lambda total: None
    on_trial: Callable[[TrialRecord], None] = lambda record: None
    on_skip: Callable[[int], None] = lambda count: None
    on_service: Callable[[ServiceRecord], None] = lambda record: None
    on_plan: Callable[[list[PlannedTrial]], None] = lambda todo: None  # the trials this run will run, in order
    on_start: Callable[[PlannedTrial], None] = lambda trial: None


@dataclass
class SweepTiming:
    """Where a sweep's time went (seconds, summed over trials): for benchmarks and overhead checks."""

    trials: int = 0
    wall_s: float = 0.0  # run() from planning to the last record
    job_s: float = 0.0  # inside trial workers: acquire, RPCs, scoring, release
    score_s: float = 0.0  # metrics on returned probabilities (part of job_s)
    write_s: float = 0.0  # store writes of trial records (the writer thread)


@dataclass
class Sweep:
    """The scheduler: this shard's trials not yet stored, in plan order, ``parallel`` at once, each on a replica
    held for it, every record written by the thread that calls ``run``."""

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
    _prepared: bool = False
    timing: SweepTiming = field(default_factory=SweepTiming)
    _timing_lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)  # run() is ending early: no trial is retried
    _warmups: Warmups = field(init=False, repr=False)
    _trials: TrialRunner = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.warmup not in WARMUP_MODES:
            raise ValueError(f"warmup must be one of {', '.join(WARMUP_MODES)}, got {self.warmup!r}")
        if self.parallel < 1:
            raise ValueError(f"parallel must be at least 1, got {self.parallel}")
        self._warmups = Warmups(self.plan.methods, self.warmup, replace=self.directory.recover)
        self._trials = TrialRunner(self.plan, self.spec, self._scored)
        self.directory.on_ready = self._warmups.on_ready

    def spec(self, method: str) -> MethodSpec:
        """The method as the plan knows it: its committed description, else its service's Describe."""
        if method in self.described:
            return self.described[method]
        if method not in self._specs:
            self._specs[method] = live_spec(self.directory, method, self.described)
        return self._specs[method]

    def prepare(self) -> None:
        """All that can refuse the run, before its first trial: the plan's checks, then the services it needs ready.

        Only what this shard still has to run is asked for: the datasets of its trials not yet stored
        (public splits) and the services of their methods, each checked against its description.
        """
        if self._prepared:
            return
        todo = self._todo()
        check_datasets(self.plan, dict.fromkeys(t.dataset for t in todo))
        self.describe_all(dict.fromkeys(t.method for t in todo))
        self._prepared = True

    def describe_all(self, methods: Iterable[str] | None = None) -> None:
        """Describe methods before any trial (this starts their first services), then warm those up.

        ServiceNotReady names every method whose service cannot fit (weights missing), not
        only the first, so that one fetch command covers them all; it comes before any
        warm-up, so a run that cannot start says so at once.
        """
        wanted = list(self.plan.methods if methods is None else methods)
        self._warmups.deferred = []
        try:
            found = describe_services(self.directory, wanted, self.described)
        finally:
            deferred, self._warmups.deferred = self._warmups.deferred, None
        not_ready = [found[m] for m in wanted if isinstance(found[m], ServiceNotReady)]
        if not_ready:
            raise ServiceNotReady.combine(not_ready)  # type: ignore[arg-type]
        self._specs.update({m: spec for m, spec in found.items() if isinstance(spec, MethodSpec)})
        self._warmups.warm_all(deferred)

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

    def _jobs(self, todo: list[PlannedTrial]) -> Iterator[Job]:
        """Jobs in plan order; each dataset is loaded, and each split drawn, only when reached."""
        loaded: dict[str, tuple[Graph, Bundles]] = {}
        splits: dict[tuple[str, int], Split] = {}
        for trial in todo:
            if trial.dataset not in loaded:
                loaded.clear()
                splits.clear()
                graph = load_dataset(trial.dataset)
                loaded[trial.dataset] = (graph, Bundles(graph))
            graph, bundles = loaded[trial.dataset]
            where = (trial.regime, trial.split)
            if where not in splits:
                splits[where] = graph_split(graph, trial.regime, trial.split)
            yield Job(trial, graph, splits[where], bundles)

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
        self.progress.on_plan(todo)
        self.progress.on_skip(len(planned) - len(todo))
        self._drain_services()
        self._trials.host = host_facts()
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
                service = self._warmups.records.get_nowait()
            except queue.Empty:
                return
            self.store.write_service(service)
            self.progress.on_service(service)

    def _run_job(self, job: Job) -> TrialRecord:
        started = time.perf_counter()
        self.progress.on_start(job.trial)
        try:
            return self._run_trial(job)
        finally:
            with self._timing_lock:
                self.timing.job_s += time.perf_counter() - started

    def _scored(self, seconds: float) -> None:
        with self._timing_lock:
            self.timing.score_s += seconds

    def _run_trial(self, job: Job) -> TrialRecord:
        """Run one trial; one whose replica went down is run again, at most ``UNAVAILABLE_RETRIES`` times:
        on an idle sibling at once, else on whichever replica is free first (the restarted one once it
        is back), else the directory says none is left and that is the record."""
        for _ in range(UNAVAILABLE_RETRIES):
            record, lost = self._attempt(job)
            if not lost or self._stopping.is_set():
                return record
        return self._attempt(job)[0]

    def _attempt(self, job: Job) -> tuple[TrialRecord, bool]:
        """One try of a trial: its record, and whether the replica it held went down (worth a retry).

        A replica that went down goes to the directory to be recovered (restarted, or waited for) or
        else marked down, in the background: the retry's ``acquire`` hands out whichever replica is
        free first (an idle sibling at once, the recovered one once it is back), or ServiceUnavailable.
        """
        record = self._trials.new_record(job)
        outcome = Outcome(lost=False, recover=False)
        try:
            replica = self.directory.acquire(job.trial.method)
        except ServiceUnavailable as exc:
            record.status, record.error, record.finished_at = STATUS_UNAVAILABLE, str(exc), timestamp()
            return record, False
        try:
            outcome = self._trials.run(replica, job, record)
        finally:
            if outcome.recover:
                self.directory.lost(replica)  # recovered (restarted, waited for) while the retry takes a free replica
            else:
                self.directory.release(replica)
        record.finished_at = timestamp()
        return record, outcome.lost
