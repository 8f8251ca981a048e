"""A sweep's progress on the console, so long work talks: the trials running now and for how long, and an ETA.

On a terminal a live display (a bar, then the running trials) redraws ``BAR_REFRESH_HZ`` times a second, so a
running trial's clock moves while nothing ends; without one (a file, a SLURM log) a plain line at most every
``PLAIN_INTERVAL_S`` as trials end and at least every ``HEARTBEAT_S`` while trials run, naming the running ones, so
a log tells a long fit from a hung sweep.

The ETA comes from the price (``orchestrator.price``, learned from the run's own store and this machine's cost
probe, read only: no probe runs for it) where the records price the remaining trials, and says so; else from the mean of
the trials finished in this run, labelled so. A run the price puts above ``LONG_RUN_S`` says so before its first
trial.
"""

from __future__ import annotations

import resource
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

from orchestrator.plan import Plan, PlannedTrial
from orchestrator.price import calibration_store
from orchestrator.records import STATUS_OK, TrialRecord
from orchestrator.sweep import Progress as SweepProgress
from orchestrator.sweep import Sweep

BAR_REFRESH_HZ = 1  # a terminal display redraws this often: a running trial's clock ticks in seconds (rich's 10 Hz
# default cost ~11% of a long sweep)
PLAIN_INTERVAL_S = 30.0  # without a terminal (a file, a SLURM log): one line at most this often as trials end ...
HEARTBEAT_S = 30.0  # ... and one at least this often while trials run, even when none ends (a long fit)
LONG_RUN_S = 3600.0  # a run the price puts above this says so, with the price, before its first trial
RUNNING_SHOWN = 3  # the running trials a line names (the longest-running first), then how many more


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def eta_text(seconds: float | None) -> str:
    return f"eta {_clock(seconds)}"


def trial_name(trial: PlannedTrial) -> str:
    """A running trial as a line names it: method, dataset, regime, split and its place in the sequence."""
    return f"{trial.method} on {trial.dataset} ({trial.regime}, split {trial.split}, configuration {trial.index + 1})"


@dataclass(frozen=True)
class Prices:
    """The estimated service seconds of the trials a run will run (by trial key), and why the others have none."""

    seconds: dict[str, float] = field(default_factory=dict)
    why_not: str = "not priced"  # what the unpriced trials lack, in a few words


def _cell(trial: PlannedTrial) -> tuple[str, str, int, str]:
    return trial.dataset, trial.regime, trial.split, trial.method


def price_trials(plan: Plan, todo: Sequence[PlannedTrial], stores: Sequence[Path]) -> Prices:
    """Each trial of ``todo`` at its cell's estimated seconds per trial (``estimate_cells``), from the records of the
    ``stores`` that exist: the run's own store and this machine's cost probe, read only. A price is a nicety of the
    display, so anything that keeps the estimate from pricing (too few records, a store it cannot read) is a reason
    shown beside the ETA, never an error of the run."""
    from orchestrator.price import EstimateError, estimate_cells, learn_cost_model, read_records

    present = [path for path in dict.fromkeys(stores) if path.exists()]
    if not todo:
        return Prices({}, "")
    if not present:
        return Prices({}, "no records")
    try:
        model = learn_cost_model(read_records(present))
        wanted = {_cell(t) for t in todo}
        cells = tuple(c for c in plan.cells if (c.dataset, c.regime, c.split, c.method) in wanted)
        costs = estimate_cells(replace(plan, cells=cells), model)
    except EstimateError:
        return Prices({}, "no records")  # none of their trials ended ok yet
    except Exception as exc:  # a display nicety: the run goes on, and the reason is shown beside the ETA
        return Prices({}, f"the estimate failed: {str(exc).splitlines()[0][:80]}")
    per_trial = {
        (c.dataset, c.regime, c.split, c.method): cost.seconds / c.trials
        for c, cost in zip(cells, costs, strict=True)
        if cost.seconds is not None and c.trials
    }
    seconds = {t.key: per_trial[_cell(t)] for t in todo if _cell(t) in per_trial}
    missing = sorted({t.method for t in todo if t.method not in model.methods})
    why = f"no records of {', '.join(missing)}" if missing else "graph sizes unknown"
    return Prices(seconds, "" if len(seconds) == len(todo) else why)


@dataclass
class Tally:
    """Trials planned, done (stored before or run now), failed, run in this session and running now; the ETA.

    Trials start on their own threads and end on the sweep's, while a display reads from its own: one lock."""

    clock: Callable[[], float] = time.monotonic
    total: int = 0
    done: int = 0
    failed: int = 0
    ran: int = 0
    parallel: int = 1  # trials in flight at once: the price's seconds are spread over them
    began: float = field(default=0.0)
    start: float = field(default=0.0)  # when the rate starts counting (after skipped trials are known)
    prices: Prices | None = None
    running: dict[str, tuple[str, float]] = field(default_factory=dict)  # key -> (name, started)
    priced_left: float = 0.0  # priced seconds of the trials not finished
    unpriced_left: int = 0  # trials without a price not finished
    paced: tuple[float, float] = (0.0, 0.0)  # priced trials finished now: their priced seconds, their wall seconds
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.began = self.start = self.clock()

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.done)

    def skip(self, count: int) -> None:
        self.done += count
        self.start = self.clock()  # the rate counts only trials run now

    def priced(self, prices: Prices, todo: Sequence[PlannedTrial]) -> None:
        """The run's trials are known and priced (as far as the records go)."""
        with self._lock:
            self.prices = prices
            self.priced_left = sum(prices.seconds.get(t.key, 0.0) for t in todo)
            self.unpriced_left = sum(t.key not in prices.seconds for t in todo)

    def started(self, trial: PlannedTrial) -> None:
        with self._lock:
            self.running[trial.key] = (trial_name(trial), self.clock())

    def trial(self, record: TrialRecord) -> None:
        with self._lock:
            self.done += 1
            self.ran += 1
            self.failed += record.status != STATUS_OK
            _, started = self.running.pop(record.trial_key, ("", None))
            price = self.prices.seconds.get(record.trial_key) if self.prices is not None else None
            if price is not None:
                self.priced_left = max(0.0, self.priced_left - price)
                if started is not None:
                    self.paced = (self.paced[0] + price, self.paced[1] + self.clock() - started)
            elif self.prices is not None:
                self.unpriced_left = max(0, self.unpriced_left - 1)

    def _pace(self) -> float:
        """This run's wall seconds per priced second, from its finished priced trials (1 before any): the price
        orders the trials by size, the pace scales it to this machine's load and the calls' overhead."""
        priced, wall = self.paced
        return wall / priced if priced > 0 and wall > 0 else 1.0

    def priced_hours(self) -> float | None:
        """The wall hours the price gives the run's priced trials (None when none is priced)."""
        if self.prices is None or not self.prices.seconds:
            return None
        return self.priced_left / max(1, min(self.parallel, len(self.prices.seconds))) / 3600

    def eta(self) -> tuple[float | None, str]:
        """The seconds left and where they come from: the price, else the finished trials' mean (labelled)."""
        now = self.clock()
        with self._lock:
            seconds = self.prices.seconds if self.prices else {}
            running = [(seconds.get(key), now - started) for key, (_, started) in self.running.items()]
            rate = (now - self.start) / self.ran if self.ran else None
            prices, priced_left, unpriced_left, pace = self.prices, self.priced_left, self.unpriced_left, self._pace()
            paced = self.paced[0] > 0
        if prices is None or not prices.seconds:
            why = prices.why_not if prices is not None else "not priced"
            if rate is None:
                return None, f"(no price: {why}; none finished yet)"
            return self.remaining * rate, f"by the mean trial (no price: {why})"
        spent = sum(min(price * pace, elapsed) for price, elapsed in running if price is not None)
        left = max(0.0, priced_left * pace - spent) / max(1, min(self.parallel, self.remaining or 1))
        source = f"by price x{pace:.2g} (this run's pace)" if paced else "by price"
        if not unpriced_left:
            return left, source
        if rate is None:
            return None, f"{source}; {unpriced_left:,} unpriced ({prices.why_not}), none finished yet"
        return left + unpriced_left * rate, f"{source} + {unpriced_left:,} unpriced at the mean trial"

    def running_text(self) -> str:
        """The running trials, the longest-running first: up to RUNNING_SHOWN named with their time, then a count."""
        now = self.clock()
        with self._lock:
            running = sorted(self.running.values(), key=lambda item: item[1])
        if not running:
            return ""
        named = "; ".join(f"{name} for {_clock(now - started)}" for name, started in running[:RUNNING_SHOWN])
        more = f"; and {len(running) - RUNNING_SHOWN} more" if len(running) > RUNNING_SHOWN else ""
        return f"running: {named}{more}"

    def summary(self) -> str:
        seconds, source = self.eta()
        return (
            f"{self.done}/{self.total} trials, {self.failed} failed, {self.remaining} remaining, "
            f"elapsed {_clock(self.clock() - self.began)}, {eta_text(seconds)} {source}"
        )

    def line(self) -> str:
        running = self.running_text()
        return f"sweep: {self.summary()}" + (f"; {running}" if running else "")


def long_run_line(tally: Tally) -> str | None:
    """A line for a run the price puts above LONG_RUN_S, said before its first trial; None for a shorter one."""
    hours = tally.priced_hours()
    if hours is None or hours * 3600 <= LONG_RUN_S or tally.prices is None:
        return None
    priced = len(tally.prices.seconds)
    unpriced = f"; {tally.unpriced_left:,} more unpriced" if tally.unpriced_left else ""
    return (
        f"sweep: this run will take about {hours:,.1f} h by the price ({priced:,} trials, {tally.parallel} side by side"
        f"{unpriced}); Ctrl-C stops it and the same command resumes it"
    )


class PlainProgress:
    """Progress as plain lines: the first when the plan is known, then at most one per ``interval`` s as trials end,
    one from ``beat`` when nothing was written for ``heartbeat`` s while trials remain, and a last one from
    ``finish``."""

    def __init__(
        self,
        write: Callable[[str], None],
        interval: float = PLAIN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: float | None = None,
    ) -> None:
        self.tally = Tally(clock=clock)
        self._write, self._interval, self._clock = write, interval, clock
        self.heartbeat = HEARTBEAT_S if heartbeat is None else heartbeat  # read now, so a test can shorten it
        self._last: float | None = None
        self._lock = threading.Lock()  # trials end on the sweep's threads, beats come from the heartbeat's

    def _emit(self) -> None:
        self.say(self.tally.line())

    def say(self, text: str) -> None:
        """Write one line now (it counts as the latest line)."""
        with self._lock:
            self._last = self._clock()
            self._write(text)

    def on_total(self, total: int) -> None:
        self.tally.total = total

    def on_skip(self, count: int) -> None:
        self.tally.skip(count)
        self._emit()

    def on_trial(self, record: TrialRecord) -> None:
        self.tally.trial(record)
        if self._last is None or self._clock() - self._last >= self._interval:
            self._emit()

    def beat(self) -> None:
        """A line if none was written for ``heartbeat`` s while trials remain: a 20-minute fit ends no trial."""
        if self.tally.remaining and self._last is not None and self._clock() - self._last >= self.heartbeat:
            self._emit()

    def finish(self) -> None:
        if self.tally.total:
            self._emit()

    def hooks(self, priced: Callable[[list[PlannedTrial]], None] = lambda todo: None) -> SweepProgress:
        return SweepProgress(
            on_total=self.on_total,
            on_skip=self.on_skip,
            on_trial=self.on_trial,
            on_plan=priced,
            on_start=self.tally.started,
        )


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _beat_until(plain: PlainProgress, stop: threading.Event) -> None:
    """Beat until ``stop``, waking ten times per heartbeat so no gap between lines passes it by much."""
    while not stop.wait(plain.heartbeat / 10):
        plain.beat()


class _Live(ProgressColumn):
    """A column computed at every redraw (a clock that moves while nothing ends), not when a trial ends."""

    def __init__(self, text: Callable[[], str]) -> None:
        super().__init__()
        self._text = text

    def render(self, task: Task) -> Text:
        return Text(self._text(), no_wrap=True, overflow="ellipsis")


class _SweepDisplay(Progress):
    """The bar and, under it, the trials running now with their time: both drawn at every refresh."""

    def __init__(self, tally: Tally, console: Console) -> None:
        def eta() -> str:
            seconds, source = tally.eta()
            return f"{eta_text(seconds)} {source}"

        self.tally = tally  # before rich's constructor, which draws the display once
        super().__init__(
            TextColumn("[bold]sweep"),
            BarColumn(bar_width=30),
            MofNCompleteColumn(),
            TextColumn("{task.fields[failed]} failed, {task.fields[remaining]} remaining"),
            TimeElapsedColumn(),
            _Live(eta),
            console=console,
            transient=False,
            refresh_per_second=BAR_REFRESH_HZ,
        )

    def get_renderables(self) -> Iterable[RenderableType]:
        yield from super().get_renderables()
        running = self.tally.running_text()
        if running:
            yield Text(running, overflow="ellipsis", no_wrap=True)


Pricer = Callable[[list[PlannedTrial]], Prices]


def _plan_known(
    tally: Tally, pricer: Pricer | None, say: Callable[[str], None]
) -> Callable[[list[PlannedTrial]], None]:
    """The hook for the run's trials once known: price them, and say first when the price puts the run above an
    hour."""

    def known(todo: list[PlannedTrial]) -> None:
        tally.priced(pricer(todo) if pricer else Prices({}, "not priced"), todo)
        line = long_run_line(tally)
        if line:
            say(line)

    return known


def run_with_progress(
    sweep_run: Callable[[SweepProgress], list[TrialRecord]],
    console: Console,
    pricer: Pricer | None = None,
    parallel: int = 1,
) -> list[TrialRecord]:
    """Run ``sweep_run(hooks)``, showing its progress on ``console``: a live display redrawn at ``BAR_REFRESH_HZ`` on
    a terminal, plain lines (``PlainProgress``) otherwise. ``pricer`` prices the run's trials once they are known."""
    if not console.is_terminal:
        plain = PlainProgress(_stderr_line)
        plain.tally.parallel = parallel
        stop = threading.Event()
        threading.Thread(target=_beat_until, args=(plain, stop), name="progress-heartbeat", daemon=True).start()
        try:
            return sweep_run(plain.hooks(_plan_known(plain.tally, pricer, plain.say)))
        finally:
            stop.set()
            plain.finish()
    tally = Tally(parallel=parallel)
    with _SweepDisplay(tally, console) as bar:
        task = bar.add_task("sweep", total=None, failed=0, remaining="?")

        def refresh() -> None:
            bar.update(task, completed=tally.done, failed=tally.failed, remaining=tally.remaining)

        def on_total(total: int) -> None:
            tally.total = total
            bar.update(task, total=total)
            refresh()

        def on_skip(count: int) -> None:
            tally.skip(count)
            refresh()

        def on_trial(record: TrialRecord) -> None:
            tally.trial(record)
            refresh()

        def say(line: str) -> None:
            bar.console.print(line, markup=False, highlight=False)

        on_plan = _plan_known(tally, pricer, say)
        return sweep_run(
            SweepProgress(
                on_total=on_total, on_skip=on_skip, on_trial=on_trial, on_plan=on_plan, on_start=tally.started
            )
        )


def sweep_with_progress(sweep: Sweep, stores: Sequence[Path] | None = None) -> list[TrialRecord]:
    """Run the sweep, its progress drawn on stderr (a live display on a terminal, plain lines otherwise), its ETA
    priced from ``stores`` (default: the sweep's own store and this machine's cost probe)."""
    learn = list(stores) if stores is not None else [sweep.store.path, calibration_store()]

    def run(hooks: SweepProgress) -> list[TrialRecord]:
        sweep.progress = hooks
        return sweep.run()

    def pricer(todo: list[PlannedTrial]) -> Prices:
        return price_trials(sweep.planned(), todo, learn)

    return run_with_progress(run, Console(stderr=True), pricer, sweep.parallel)


def cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended (embedded services, once stopped)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
