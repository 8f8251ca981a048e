"""Sweep progress: the running trials and their time, on a terminal (a live display) and without one (plain lines at
most every 30 s as trials end, at least every 30 s while they run, and a last one); an ETA from the price, labelled
when it comes from the finished trials' mean instead; a run the price puts above an hour says so first."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from contract.wire import GraphBundle
from methods.sdk import Config, FitContext, FloatParam
from methods.sdk.service import MethodServicer, build_server
from orchestrator.cli import progress as progress_module
from orchestrator.cli.progress import (
    BAR_REFRESH_HZ,
    HEARTBEAT_S,
    LONG_RUN_S,
    PLAIN_INTERVAL_S,
    PlainProgress,
    Prices,
    Tally,
    _beat_until,
    long_run_line,
    run_with_progress,
)
from orchestrator.plan import PlannedTrial
from tests.conftest import HANG_S, wait_for
from tests.methods.helpers import Sleeper

REPO = Path(__file__).resolve().parents[3]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def planned(index: int, method: str = "gcn") -> PlannedTrial:
    return PlannedTrial(method, "cora", "10/10/80", 0, index, {}, f"{method}-{index}")


def ok(trial: PlannedTrial | None = None, status: str = "ok") -> SimpleNamespace:
    return SimpleNamespace(status=status, trial_key=trial.key if trial else "")


def test_the_defaults_refresh_a_terminal_at_least_every_10_s_and_a_log_at_least_every_30_s():
    assert 1 / BAR_REFRESH_HZ <= 10 and BAR_REFRESH_HZ <= 2  # a running clock moves; no redraw costs the sweep
    assert HEARTBEAT_S <= 30 and PLAIN_INTERVAL_S <= 30
    assert LONG_RUN_S == 3600


def test_plain_lines_at_most_every_interval_then_a_last_one():
    clock, lines = FakeClock(), []
    plain = PlainProgress(lines.append, clock=clock)
    hooks = plain.hooks()
    hooks.on_total(1000)
    hooks.on_skip(100)  # resumed: 100 already stored
    assert lines == [
        "sweep: 100/1000 trials, 0 failed, 900 remaining, elapsed 0:00:00, eta -:--:-- (no price: not priced; none "
        "finished yet)"
    ]
    for i in range(600):  # one trial per second for 10 minutes, every 7th fails
        clock.now += 1.0
        hooks.on_trial(ok(status="failed" if i % 7 == 0 else "ok"))
    assert len(lines) == 1 + 600 // int(PLAIN_INTERVAL_S)  # one line per 30 s, not one per trial
    assert lines[1].startswith("sweep: 130/1000 trials, 5 failed, 870 remaining, elapsed 0:00:30, eta 0:14:30 ")
    plain.finish()
    assert lines[-1] == (
        "sweep: 700/1000 trials, 86 failed, 300 remaining, elapsed 0:10:00, eta 0:05:00 by the mean trial (no "
        "price: not priced)"
    )


def test_plain_first_trial_prints_when_nothing_was_skipped():
    clock, lines = FakeClock(), []
    plain = PlainProgress(lines.append, clock=clock)
    plain.on_total(3)
    for _ in range(3):
        clock.now += 0.5
        plain.on_trial(ok())
    plain.finish()
    assert [line.split(", eta")[0] for line in lines] == [
        "sweep: 1/3 trials, 0 failed, 2 remaining, elapsed 0:00:00",
        "sweep: 3/3 trials, 0 failed, 0 remaining, elapsed 0:00:02",
    ]


def test_a_long_fit_prints_a_heartbeat_naming_it_and_its_time_and_nothing_after_the_last_trial():
    clock, lines = FakeClock(), []
    plain = PlainProgress(lines.append, clock=clock)
    first, long = planned(0), planned(1)
    plain.on_total(2)
    plain.tally.started(first)
    clock.now += 1.0
    plain.on_trial(ok(first))  # the first line; then one fit runs for 20 minutes
    plain.tally.started(long)
    for _ in range(40 * 10):
        clock.now += HEARTBEAT_S / 10  # as the heartbeat thread wakes
        plain.beat()
    assert len(lines) == 1 + 40
    assert lines[1].endswith("; running: gcn on cora (10/10/80, split 0, configuration 2) for 0:00:30")
    assert lines[-1].endswith("; running: gcn on cora (10/10/80, split 0, configuration 2) for 0:20:00")
    plain.on_trial(ok(long))
    written = len(lines)
    for _ in range(40):  # nothing remains: no heartbeat after the last trial
        clock.now += HEARTBEAT_S
        plain.beat()
    assert len(lines) == written


def test_the_running_trials_longest_first_then_how_many_more():
    clock = FakeClock()
    tally = Tally(clock=clock)
    for index in range(5):
        tally.started(planned(index))
        clock.now += 10
    assert tally.running_text() == (
        "running: gcn on cora (10/10/80, split 0, configuration 1) for 0:00:50; gcn on cora (10/10/80, split 0, "
        "configuration 2) for 0:00:40; gcn on cora (10/10/80, split 0, configuration 3) for 0:00:30; and 2 more"
    )


def test_the_eta_comes_from_the_price_scaled_to_the_runs_pace_and_says_so():
    clock = FakeClock()
    tally = Tally(clock=clock, total=4, parallel=1)
    todo = [planned(i) for i in range(4)]
    tally.priced(Prices({t.key: 100.0 for t in todo[:3]} | {todo[3].key: 700.0}, ""), todo)
    assert tally.eta() == (1000.0, "by price")  # the largest trial last: a mean of the first ones would miss it
    tally.started(todo[0])
    clock.now += 200.0  # twice its price
    assert tally.eta() == (900.0, "by price")  # the running trial's price is spent; the pace is known at its end
    tally.trial(ok(todo[0]))
    seconds, source = tally.eta()
    assert seconds == pytest.approx(2 * 900.0) and source == "by price x2 (this run's pace)"


def test_without_a_price_the_eta_is_the_finished_trials_mean_and_says_why():
    clock = FakeClock()
    tally = Tally(clock=clock, total=3)
    todo = [planned(i) for i in range(3)]
    tally.priced(Prices({}, "no records"), todo)
    assert tally.eta() == (None, "(no price: no records; none finished yet)")
    tally.started(todo[0])
    clock.now += 60.0
    tally.trial(ok(todo[0]))
    assert tally.eta() == (120.0, "by the mean trial (no price: no records)")
    half = Tally(clock=clock, total=2)
    half.priced(Prices({todo[0].key: 30.0}, "no records of mlp"), todo[:2])
    assert half.eta() == (None, "by price; 1 unpriced (no records of mlp), none finished yet")
    half.started(todo[0])
    clock.now += 30.0
    half.trial(ok(todo[0]))
    assert half.eta() == (30.0, "by price x1 (this run's pace) + 1 unpriced at the mean trial")


def test_a_run_the_price_puts_above_an_hour_says_so_with_the_price_before_its_first_trial(monkeypatch):
    todo = [planned(i) for i in range(4)]
    lines: list[str] = []
    monkeypatch.setattr(progress_module, "_stderr_line", lines.append)

    def run(hooks):
        hooks.on_total(4)
        hooks.on_plan(todo)
        hooks.on_skip(0)
        return []

    def pricer(trials):
        return Prices({t.key: 2 * 3600.0 for t in trials}, "")

    run_with_progress(run, Console(file=io.StringIO(), force_terminal=False), pricer, parallel=2)
    assert lines[0] == (
        "sweep: this run will take about 4.0 h by the price (4 trials, 2 side by side); Ctrl-C stops it and the same "
        "command resumes it"
    )
    assert lines[1].startswith("sweep: 0/4 trials") and "eta 4:00:00 by price" in lines[1]
    short = Tally(parallel=1)
    short.priced(Prices({todo[0].key: LONG_RUN_S}, ""), todo[:1])
    assert long_run_line(short) is None  # an hour is not more than an hour


def test_the_heartbeat_thread_beats_until_stopped():
    beats = []
    plain = SimpleNamespace(beat=lambda: beats.append(1), heartbeat=0.01)
    stop = threading.Event()
    thread = threading.Thread(target=_beat_until, args=(plain, stop))
    thread.start()
    wait_for(lambda: len(beats) >= 3, "three beats")
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

    with pytest.raises(KeyboardInterrupt):
        run_with_progress(run, console)
    assert console.file.getvalue() == ""  # no bar drawn into a file
    assert [line.split(",")[0] for line in lines] == ["sweep: 0/2 trials", "sweep: 1/2 trials"]


def test_terminal_display_redraws_at_a_low_rate_and_shows_the_running_trials(monkeypatch):
    seen = {}
    real = progress_module.Progress.__init__

    def spy(self, *args, **kwargs):
        seen.update(kwargs)
        real(self, *args, **kwargs)

    monkeypatch.setattr(progress_module.Progress, "__init__", spy)
    console = Console(file=io.StringIO(), force_terminal=True, width=200)
    trial = planned(0)

    def run(hooks):
        hooks.on_total(1)
        hooks.on_start(trial)
        wait_for(lambda: "configuration 1) for" in console.file.getvalue(), "the running trial on screen")
        hooks.on_trial(ok(trial))
        return ["record"]

    assert run_with_progress(run, console) == ["record"]
    assert seen["refresh_per_second"] == BAR_REFRESH_HZ
    assert "1/1" in console.file.getvalue()


# ---- a real `orchestrator run` whose one trial runs until the test has seen enough --------------------------------


class Held(Sleeper):
    """`mlp` as a service that holds its one fit until the test lets it go: a trial as long as the test needs."""

    name = "mlp"
    default_config: Config = {"seconds": 0.0}
    search_space = (FloatParam("seconds", 0.0, 1.0),)
    release = threading.Event()

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> Any:
        Held.release.wait(HANG_S)
        return super().fit(graph, train, val, config, ctx)


@pytest.fixture
def held_service() -> Iterator[str]:
    Held.release.clear()
    server, port = build_server(MethodServicer("gnn", [Held]), "127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        Held.release.set()
        server.stop(0)


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
RUNNING = re.compile(r"running: mlp on synthetic-tiny \(10/10/80, split 0, configuration 1\) for (\d+:\d\d:\d\d)")


def _run_args(endpoint: str, store: Path) -> list[str]:
    return [
        "run", "--methods", "mlp", "--datasets", "synthetic-tiny", "--budget", "1", "--endpoint", f"mlp={endpoint}",
        "--no-warmup", "--store", str(store),
    ]  # fmt: skip


def _clocks(text: str) -> set[str]:
    return set(RUNNING.findall(ANSI.sub("", text)))


def test_on_a_terminal_a_running_trials_time_moves_on_screen(held_service, tmp_path):
    """Through a pseudo-terminal, as a person sees it: the one trial's clock changes while it runs (no trial ends)."""
    master, slave = os.openpty()
    command = [
        sys.executable,
        "-c",
        "from orchestrator.cli.main import app; app()",
        *_run_args(held_service, tmp_path / "r.sqlite"),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TERM": "xterm-256color", "COLUMNS": "200", "LINES": "50"}
    proc = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=tmp_path)
    os.close(slave)
    screen = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed with the process
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_for(lambda: len(_clocks(screen.decode(errors="replace"))) >= 2, "the running trial's clock moving")
    finally:
        Held.release.set()
        code = proc.wait(HANG_S)
        reader.join(HANG_S)
        os.close(master)
    shown = ANSI.sub("", screen.decode(errors="replace"))
    assert code == 0, shown[-3000:]
    assert "1/1" in shown and "eta" in shown


def test_piped_to_a_file_a_heartbeat_names_the_running_trial_while_nothing_ends(held_service, tmp_path):
    """Without a terminal: a line at least every heartbeat while the one trial runs (shortened here; the default's
    30 s is held above), each naming the trial and its time."""
    log = tmp_path / "stderr.log"
    code = "import orchestrator.cli.progress as p; p.HEARTBEAT_S = 0.5; from orchestrator.cli.main import app; app()"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *_run_args(held_service, tmp_path / "r.sqlite")],
            stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=tmp_path,
        )  # fmt: skip
        try:
            wait_for(lambda: len(_clocks(log.read_text())) >= 3, "heartbeat lines with the trial's time moving")
        finally:
            Held.release.set()
            assert proc.wait(HANG_S) == 0, log.read_text()[-3000:]
    lines = log.read_text().splitlines()
    beats = [line for line in lines if RUNNING.search(line)]
    assert all(line.startswith("sweep: 0/1 trials, 0 failed, 1 remaining") for line in beats), beats
    assert lines[-1].startswith("sweep: 1/1 trials, 0 failed, 0 remaining") and not RUNNING.search(lines[-1])
