"""An SDK method run in this process, as a sweep runs it through a service: the same trials, the same records.

``run`` is ``orchestrator run`` with one difference, the transport. The plan (configurations, keys, protocol tags),
the sweep (warm-up, resume, retries), each trial (fit, predict, release, scoring by the orchestrator's code) and the
service's own code (``methods.sdk.service.MethodServicer``: the request checks, the split views, the compute lock,
the ``ResourceProbe`` around each fit and predict) are those of a sweep; only the client calls the servicer's
methods directly instead of over gRPC (``InProcessClient``). So a breakpoint in a method's ``fit`` stops this
process, and with ``debug=True`` a method's exception ends the run with its own traceback instead of being recorded
as a ``failed`` trial.

The process computes as a service does: on the thread rule's torch threads (``NODEGROUND_THREADS``, else a SLURM
task's CPUs, else one; restored when the run ends), with the kernels the process was started with (a run under
``NODEGROUND_KERNELS=pinned`` needs the pinned kernels in effect from the start), and with glibc malloc tuned as a
service tunes it (``methods.sdk.allocator``; this stays for the rest of the process). Its records name that hardware
line, so a run on the reference's machine keeps the reference's costs beside it in a comparison.

Every record of an in-process run says so: its ``endpoint`` is ``in-process`` (``IN_PROCESS``), as is the
``source`` of its row in the store's ``services`` table.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

import grpc
import torch

from contract.descriptions import spec_from_proto
from contract.errors import UserError
from contract.families import family_of, load_families
from contract.hardware import PINNED, PINNED_KERNELS, KernelPolicyError, kernel_policy, kernels_in_effect
from contract.security import Security
from contract.settings import THREADS
from contract.v1 import method_service_pb2_grpc as pb_grpc
from methods.sdk.allocator import keep_freed_memory
from methods.sdk.method import Method
from methods.sdk.service import MethodServicer, describe_method
from nodeground.catalog import check_regime, check_split, task_name
from orchestrator.plan import DEFAULT_TIME_LIMIT_S, MAX_TIME_LIMIT_S, SweepPlan
from orchestrator.protocols import protocol_named
from orchestrator.records import TrialRecord
from orchestrator.services.client import MethodClient, Replica, ServiceNotReady
from orchestrator.services.directory import Directory, timestamp
from orchestrator.services.embedded import service_threads
from orchestrator.store import Store, read_trials
from orchestrator.sweep import Progress, Sweep

if TYPE_CHECKING:
    import pandas as pd

IN_PROCESS = "in-process"  # the endpoint of every record an in-process run writes, and its services row's source
#: What ``Method`` describes of a method (its class attributes); an instance that sets one on itself describes that.
DESCRIBED = (
    "name",
    "version",
    "kind",
    "description",
    "capabilities",
    "default_config",
    "search_space",
    "settings",
    "weights",
)
#: The service's calls as a client's stub offers them.
CALLS = ("Describe", "HasGraph", "UploadGraph", "AttachGraph", "Fit", "Predict", "Release")


class MethodError(TypeError, UserError):
    """What ``run`` was given is not an SDK method it can host."""


class LocalStatus(grpc.RpcError):
    """A status the servicer ended a call with, raised where a gRPC client raises the call's error."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class LocalContext:
    """What the servicer asks of a call's context, for a caller in this process (no deadline: the fit's time limit
    bounds it; active until the run is cancelled)."""

    def __init__(self, debug: bool) -> None:
        self.debug = debug
        self.cancelled = threading.Event()

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        failure = sys.exc_info()[1]
        if self.debug and code == grpc.StatusCode.INTERNAL and failure is not None:
            raise failure  # the method's own exception, traceback and all (the servicer reports INTERNAL for it)
        raise LocalStatus(code, details)

    def time_remaining(self) -> float | None:
        return None

    def is_active(self) -> bool:
        return not self.cancelled.is_set()

    def peer(self) -> str:
        return IN_PROCESS


class LocalStub:
    """``stub.Fit(request, timeout=...)`` and the other calls, answered by the servicer in this process."""

    def __init__(self, servicer: MethodServicer, context: LocalContext) -> None:
        self._servicer, self._context = servicer, context

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in CALLS:
            raise AttributeError(name)
        call = getattr(self._servicer, name)
        return lambda request, timeout=None: call(request, self._context)


class InProcessClient(MethodClient):
    """A ``MethodClient`` whose transport is a direct call: every request is built, and every reply read and timed,
    by the client's own code; the calls need no watchdog (the service is this process)."""

    def __init__(self, servicer: MethodServicer, debug: bool = False) -> None:
        self.servicer = servicer
        self.context = LocalContext(debug)
        super().__init__(IN_PROCESS, Security())

    def _connect(self) -> None:
        self._stub = cast(pb_grpc.MethodServiceStub, LocalStub(self.servicer, self.context))  # answers as the stub does

    def close(self) -> None:
        self._watchdog.close()

    def cancel(self) -> None:
        """End the fit in flight at its next check, and refuse further fits (the run is over or interrupted)."""
        self.context.cancelled.set()
        self.servicer.stop()

    def wait_healthy(self, timeout: float) -> None:
        """ServiceNotReady (one line naming the weights to fetch) while a method's weights are missing."""
        not_ready = self.described().not_ready
        if not_ready:
            raise ServiceNotReady([(r.method, r.weights_id, r.reason) for r in not_ready])

    def responsive(self, timeout: float = 0.0) -> bool:
        return True

    @contextlib.contextmanager
    def _watched(self, call: Any, what: str) -> Iterator[None]:
        yield

    def _unary(self, method: Any, request: Any, timeout: float | None, what: str) -> Any:
        return method(request)

    def _short(self, method: Any, request: Any, what: str) -> Any:
        return method(request)


class InProcessDirectory(Directory):
    """The one replica of an in-process run, described, warmed up (``on_ready``) and held by every trial in turn."""

    def __init__(self, client: InProcessClient, family: str, methods: tuple[str, ...]) -> None:
        self.replica = Replica(
            pool=family,
            family=family,
            endpoint=IN_PROCESS,
            client=client,
            source=IN_PROCESS,
            methods=methods,
            started_at=timestamp(),
            pid=os.getpid(),
        )
        self._up = False

    def client(self, method: str) -> MethodClient:
        if not self._up:
            self.replica.client.wait_healthy(0.0)
            self._up = True
            if self.on_ready is not None:
                self.on_ready(self.replica)
        return self.replica.client

    def acquire(self, method: str) -> Replica:
        self.client(method)
        self.replica.busy = True
        return self.replica

    def release(self, replica: Replica) -> None:
        replica.busy = False

    def recover(self, replica: Replica) -> bool:
        """Nothing to restart: the service is this process; it serves again unless the run was cancelled."""
        assert isinstance(replica.client, InProcessClient)
        return replica.client.context.is_active()


@dataclass(frozen=True)
class InProcessRun:
    """A finished in-process run: its store, its plan's trial keys, and the records it wrote now (a rerun resumes:
    trials already stored are not run again, and are read from the store)."""

    store: Path
    trial_keys: tuple[str, ...]
    records: tuple[TrialRecord, ...]

    def trials(self) -> pd.DataFrame:
        """Every trial of this run's plan, as the store holds it (resumed ones included)."""
        frame = read_trials(self.store)
        return frame[frame["trial_key"].isin(set(self.trial_keys))].reset_index(drop=True)

    def selected(self) -> pd.DataFrame:
        """Per method, dataset, regime and split: the trial the selection rule picks (what `orchestrator show`
        prints)."""
        from orchestrator.results import selected_results

        return selected_results(self.trials())

    def summary(self) -> pd.DataFrame:
        """Per method, dataset and regime: mean ± std of the primary test metric over splits (`show --summary`)."""
        from orchestrator.results import summarize

        return summarize(self.trials())


def method_class(method: type[Method] | Method) -> type[Method]:
    """The class a servicer hosts for ``method``: an SDK ``Method`` subclass as given, or, for an instance, a class
    whose every instance is a fresh copy of it (a service makes one instance per fit)."""
    if isinstance(method, Method):
        return _copies_of(method)
    if not (isinstance(method, type) and issubclass(method, Method)):
        raise MethodError(f"run takes a methods.sdk.Method subclass or an instance of one, got {method!r}")
    missing = [attribute for attribute in ("name", "version", "default_config") if not hasattr(method, attribute)]
    if missing or inspect.isabstract(method):
        what = f"sets no {', '.join(missing)}" if missing else f"leaves {', '.join(sorted(method.__abstractmethods__))}"
        raise MethodError(f"{method.__qualname__} {what}: a method states name, version, default_config, fit, predict")
    return method


def _copies_of(template: Method) -> type[Method]:
    cls = method_class(type(template))
    state = vars(template)

    def __init__(self: Method) -> None:
        self.__dict__.update(copy.deepcopy(state))

    described = {attribute: state[attribute] for attribute in DESCRIBED if attribute in state}
    return type(
        cls.__name__,
        (cls,),
        {"__init__": __init__, "__module__": cls.__module__, "__qualname__": cls.__qualname__, **described},
    )


def family_name(cls: type[Method]) -> str:
    """The family a method's records name: a shipped family for its own class; the method's name for any other.

    A class that takes a shipped method's name is refused: its trials would carry that method's keys.
    """
    family = family_of(cls.name, load_families())
    if family is None:
        return cls.name
    if cls.__module__ == f"methods.{family.name}" or cls.__module__.startswith(f"methods.{family.name}."):
        return family.name
    raise MethodError(f"{cls.name!r} is a shipped method's name (family {family.name}); name your method otherwise")


def compute_threads() -> int:
    """The torch threads a service computes on (the thread rule, ``orchestrator.services.embedded.service_threads``
    for one service, then ``NODEGROUND_THREADS`` as ``methods.serve`` reads it)."""
    return service_threads(1) or int(THREADS.read() or 1)


def check_kernels() -> None:
    """A run under ``NODEGROUND_KERNELS=pinned`` needs those kernels in effect: libraries pick them as they load."""
    if kernel_policy() == PINNED and kernels_in_effect() != PINNED:
        pinned = " ".join(f"{name}={value!r}" for name, value in PINNED_KERNELS.items())
        raise KernelPolicyError(
            f"NODEGROUND_KERNELS=pinned: this process started without the pinned kernels; start Python with {pinned}"
        )


def sweep_plan(
    method: str,
    datasets: str | Sequence[str],
    protocol: str,
    regimes: Sequence[str] | None,
    splits: Sequence[int] | None,
    budget: int | None,
    time_limit: float,
) -> SweepPlan:
    """The plan `orchestrator run --protocol P` makes, each of regimes, splits and budget the protocol's unless given;
    a one-line error for a value that does not exist."""
    named = protocol_named(protocol)
    names = [datasets] if isinstance(datasets, str) else list(datasets)
    if not names:
        raise ValueError("run needs at least one dataset")
    regimes = [check_regime(r) for r in (regimes if regimes is not None else named.regimes)]
    splits = [check_split(s, ", ".join(regimes)) for s in (splits if splits is not None else named.splits)]
    budget = named.budget if budget is None else budget
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive number of trials per cell, got {budget!r}")
    if not 0 < time_limit <= MAX_TIME_LIMIT_S:
        raise ValueError(f"time_limit must be seconds in (0, {MAX_TIME_LIMIT_S:.0f}], got {time_limit!r}")
    return SweepPlan(
        methods=(method,),
        datasets=tuple(dict.fromkeys(task_name(n) for n in names)),
        regimes=tuple(dict.fromkeys(regimes)),
        splits=tuple(dict.fromkeys(splits)),
        budget=budget,
        time_limit=float(time_limit),
        protocol=named.name,
    )


def run(
    method: type[Method] | Method,
    datasets: str | Sequence[str],
    protocol: str = "lite",
    store: str | Path = "runs.sqlite",
    *,
    regimes: Sequence[str] | None = None,
    splits: Sequence[int] | None = None,
    budget: int | None = None,
    time_limit: float = DEFAULT_TIME_LIMIT_S,
    debug: bool = False,
    verbose: bool = True,
) -> InProcessRun:
    """Run ``method`` (an SDK ``Method`` subclass, or an instance) on ``datasets`` under ``protocol`` in this process,
    every trial recorded in ``store`` (created, or resumed).

    ``regimes``, ``splits`` and ``budget`` narrow or widen the protocol's (a trial the protocol holds is still
    recorded as the protocol's). ``debug``: a method's exception ends the run with its traceback instead of being
    recorded as a failed trial. ``verbose``: one line per trial on stderr.
    """
    cls = method_class(method)
    family = family_name(cls)
    plan = sweep_plan(cls.name, datasets, protocol, regimes, splits, budget, time_limit)
    check_kernels()
    threads = compute_threads()
    keep_freed_memory()
    client = InProcessClient(MethodServicer(family, [cls]), debug)
    directory = InProcessDirectory(client, family, (cls.name,))
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with Store(Path(store)) as run_store:
            # planned from the class's own description, so that a run with nothing left to do starts nothing
            described = {cls.name: spec_from_proto(describe_method(cls, family))}
            sweep = Sweep(plan, run_store, directory, _progress(verbose), warmup="all", described=described)
            records = sweep.run()
            keys = tuple(t.key for t in sweep.planned_trials())
    finally:
        client.cancel()  # a fit still in flight (an interrupted run) ends at its next check
        client.close()
        torch.set_num_threads(previous)
    return InProcessRun(Path(store), keys, tuple(records))


def _progress(verbose: bool) -> Progress:
    """One line per trial on stderr (``verbose``), and how many trials a resumed run found stored."""
    if not verbose:
        return Progress()

    def trial(record: TrialRecord) -> None:
        outcome = record.status if record.error is None else f"{record.status}: {record.error[:200]}"
        if record.val_loss is not None:
            outcome += f", val loss {record.val_loss:.4f}"
        cell = f"{record.method} {record.dataset} {record.regime} split {record.split}"
        say(f"{cell} trial {record.trial_index}: {outcome}")

    def skipped(count: int) -> None:
        if count:
            say(f"{count} trial(s) already in the store: not run again")

    return Progress(on_trial=trial, on_skip=skipped)


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
