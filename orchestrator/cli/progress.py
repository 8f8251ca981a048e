"""A sweep's progress on the console: a low-rate bar on a terminal, a plain line at most every 30 s otherwise
(and at least every 5 min while trials run, so a log tells a long fit from a hung sweep)."""

from __future__ import annotations

import resource
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from orchestrator.records import STATUS_OK, TrialRecord
from orchestrator.sweep import Progress as SweepProgress
from orchestrator.sweep import Sweep

BAR_REFRESH_HZ = 2  # a terminal bar redraws at most this often (rich's default, 10 Hz, cost ~11% of a long sweep)
PLAIN_INTERVAL_S = 30.0  # without a terminal (a file, a SLURM log): one line at most this often, and one at the end
HEARTBEAT_S = 300.0  # ... and one at least this often while trials remain, even when none ends (a long fit)


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def eta_text(seconds: float | None) -> str:
    return f"eta {_clock(seconds)}"


@dataclass
class Tally:
    """Trials planned, done (stored before or run now), failed and run in this session; the ETA from this session's
    rate."""

    clock: Callable[[], float] = time.monotonic
    total: int = 0
    done: int = 0
    failed: int = 0
    ran: int = 0
    began: float = field(default=0.0)
    start: float = field(default=0.0)  # when the rate starts counting (after skipped trials are known)

    def __post_init__(self) -> None:
        self.began = self.start = self.clock()

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.done)

    def eta(self) -> float | None:
        if not self.ran:
            return None
        return self.remaining * max(1e-9, self.clock() - self.start) / self.ran

    def skip(self, count: int) -> None:
        self.done += count
        self.start = self.clock()  # the rate counts only trials run now

    def trial(self, record: TrialRecord) -> None:
        self.done += 1
        self.ran += 1
        self.failed += record.status != STATUS_OK

    def line(self) -> str:
        return (
            f"sweep: {self.done}/{self.total} trials, {self.failed} failed, {self.remaining} remaining, "
            f"elapsed {_clock(self.clock() - self.began)}, {eta_text(self.eta())}"
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
        heartbeat: float = HEARTBEAT_S,
    ) -> None:
        self.tally = Tally(clock=clock)
        self._write, self._interval, self._clock, self._heartbeat = write, interval, clock, heartbeat
        self._last: float | None = None
        self._lock = threading.Lock()  # trials end on the sweep's threads, beats come from the heartbeat's

    def _emit(self) -> None:
        with self._lock:
            self._last = self._clock()
            self._write(self.tally.line())

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
        if self.tally.remaining and self._last is not None and self._clock() - self._last >= self._heartbeat:
            self._emit()

    def finish(self) -> None:
        if self.tally.total:
            self._emit()

    def hooks(self) -> SweepProgress:
        return SweepProgress(on_total=self.on_total, on_skip=self.on_skip, on_trial=self.on_trial)


def _stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _beat_until(plain: PlainProgress, stop: threading.Event, every: float = PLAIN_INTERVAL_S) -> None:
    while not stop.wait(every):
        plain.beat()


def run_with_progress(sweep_run: Callable[[SweepProgress], list[TrialRecord]], console: Console) -> list[TrialRecord]:
    """Run ``sweep_run(hooks)``, showing its progress on ``console``: a bar redrawn at ``BAR_REFRESH_HZ`` on a
    terminal, plain lines (``PlainProgress``) otherwise."""
    if not console.is_terminal:
        plain = PlainProgress(_stderr_line)
        stop = threading.Event()
        threading.Thread(target=_beat_until, args=(plain, stop), name="progress-heartbeat", daemon=True).start()
        try:
            return sweep_run(plain.hooks())
        finally:
            stop.set()
            plain.finish()
    tally = Tally()
    with Progress(
        TextColumn("[bold]sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} failed, {task.fields[remaining]} remaining"),
        TimeElapsedColumn(),
        TextColumn("{task.fields[eta]}"),
        console=console,
        transient=False,
        refresh_per_second=BAR_REFRESH_HZ,
    ) as bar:
        task = bar.add_task("sweep", total=None, failed=0, remaining="?", eta=eta_text(None))

        def refresh() -> None:
            eta = eta_text(tally.eta())
            bar.update(task, completed=tally.done, failed=tally.failed, remaining=tally.remaining, eta=eta)

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

        return sweep_run(SweepProgress(on_total=on_total, on_skip=on_skip, on_trial=on_trial))


def sweep_with_progress(sweep: Sweep) -> list[TrialRecord]:
    """Run the sweep, its progress drawn on stderr (a bar on a terminal, plain lines otherwise)."""

    def run(hooks: SweepProgress) -> list[TrialRecord]:
        sweep.progress = hooks
        return sweep.run()

    return run_with_progress(run, Console(stderr=True))


def cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended (embedded services, once stopped)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
