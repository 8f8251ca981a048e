"""Sweep progress without a terminal: plain lines, at most one per 30 s, at least one per 5 min while trials run,
and a last one; the bar's low rate."""

from __future__ import annotations

import io
import threading
import time
from types import SimpleNamespace

from rich.console import Console

from orchestrator.cli import progress as progress_module
from orchestrator.cli.progress import (
    BAR_REFRESH_HZ,
    HEARTBEAT_S,
    PLAIN_INTERVAL_S,
    PlainProgress,
    _beat_until,
    run_with_progress,
)
from tests.conftest import HANG_S


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ok(status: str = "ok") -> SimpleNamespace:
    return SimpleNamespace(status=status)


def test_plain_lines_at_most_every_interval_then_a_last_one():
    clock, lines = FakeClock(), []
    plain = PlainProgress(lines.append, clock=clock)
    hooks = plain.hooks()
    hooks.on_total(1000)
    hooks.on_skip(100)  # resumed: 100 already stored
    assert lines == ["sweep: 100/1000 trials, 0 failed, 900 remaining, elapsed 0:00:00, eta -:--:--"]
    for i in range(600):  # one trial per second for 10 minutes, every 7th fails
        clock.now += 1.0
        hooks.on_trial(ok("failed" if i % 7 == 0 else "ok"))
    assert len(lines) == 1 + 600 // int(PLAIN_INTERVAL_S)  # one line per 30 s, not one per trial
    assert lines[1] == "sweep: 130/1000 trials, 5 failed, 870 remaining, elapsed 0:00:30, eta 0:14:30"
    plain.finish()
    assert lines[-1] == "sweep: 700/1000 trials, 86 failed, 300 remaining, elapsed 0:10:00, eta 0:05:00"


def test_plain_first_trial_prints_when_nothing_was_skipped():
    clock, lines = FakeClock(), []
    plain = PlainProgress(lines.append, clock=clock)
    plain.on_total(3)
    for _ in range(3):
        clock.now += 0.5
        plain.on_trial(ok())
    plain.finish()
    assert lines == [
        "sweep: 1/3 trials, 0 failed, 2 remaining, elapsed 0:00:00, eta 0:00:01",
        "sweep: 3/3 trials, 0 failed, 0 remaining, elapsed 0:00:02, eta 0:00:00",
    ]


def test_a_long_fit_still_prints_a_line_every_heartbeat_and_nothing_more():
    clock, lines = FakeClock(), []
    plain = PlainProgress(lines.append, clock=clock)
    plain.on_total(2)
    clock.now += 1.0
    plain.on_trial(ok())  # the first line; then one fit runs for 20 minutes
    for _ in range(40):
        clock.now += PLAIN_INTERVAL_S
        plain.beat()
    assert len(lines) == 1 + int(40 * PLAIN_INTERVAL_S // HEARTBEAT_S) == 5
    assert lines[1] == "sweep: 1/2 trials, 0 failed, 1 remaining, elapsed 0:05:01, eta 0:05:01"
    plain.on_trial(ok())
    written = len(lines)
    for _ in range(40):  # nothing remains: no heartbeat after the last trial
        clock.now += PLAIN_INTERVAL_S
        plain.beat()
    assert len(lines) == written


def test_the_heartbeat_thread_beats_until_stopped():
    beats = []
    plain = SimpleNamespace(beat=lambda: beats.append(1))
    stop = threading.Event()
    thread = threading.Thread(target=_beat_until, args=(plain, stop, 0.001))
    thread.start()
    while len(beats) < 3:
        time.sleep(0.001)
    stop.set()
    thread.join(HANG_S)
    assert not thread.is_alive()


def test_no_terminal_gets_plain_lines_and_a_last_line_even_when_the_run_fails(monkeypatch):
    lines: list[str] = []
    monkeypatch.setattr(progress_module, "_stderr_line", lines.append)
    console = Console(file=io.StringIO(), force_terminal=False)

    def run(hooks):
        hooks.on_total(2)
        hooks.on_skip(0)
        hooks.on_trial(ok())
        raise KeyboardInterrupt

    try:
        run_with_progress(run, console)
    except KeyboardInterrupt:
        pass
    assert console.file.getvalue() == ""  # no bar drawn into a file
    assert [line.split(",")[0] for line in lines] == ["sweep: 0/2 trials", "sweep: 1/2 trials"]


def test_terminal_bar_redraws_at_a_low_rate(monkeypatch):
    seen = {}
    real = progress_module.Progress

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(progress_module, "Progress", spy)
    console = Console(file=io.StringIO(), force_terminal=True, width=100)

    def run(hooks):
        hooks.on_total(1)
        hooks.on_trial(ok())
        return ["record"]

    assert run_with_progress(run, console) == ["record"]
    assert seen["refresh_per_second"] == BAR_REFRESH_HZ <= 2
    assert "1/1" in console.file.getvalue()
