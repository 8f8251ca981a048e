"""`submit`'s sandboxes side by side, without Docker: how many, how trials share them, what a lost one does."""

from __future__ import annotations

import threading

import pytest

from orchestrator.services.client import ServiceUnavailable
from orchestrator.services.sandbox import SandboxLimits
from orchestrator.submission import run as submission_run
from orchestrator.submission.run import SandboxDirectory, Submission, default_sandboxes, memory_bytes

GIB = 1024**3


class FakeSandbox:
    def __init__(self, name: str, comes_back: bool = True) -> None:
        self.endpoint = f"unix:/tmp/{name}.sock"
        self.comes_back = comes_back
        self.restarts = 0

    def restart(self) -> None:
        self.restarts += 1

    def wait_healthy(self, timeout: float | None = None) -> None:
        if not self.comes_back:
            raise ServiceUnavailable(f"{self.endpoint} stayed down")


class FakeClient:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.closed = False

    def wait_healthy(self, timeout: float) -> None:
        pass

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake_clients(monkeypatch) -> None:
    monkeypatch.setattr(submission_run, "GuardedClient", FakeClient)


def test_memory_limits_read_as_docker_reads_them() -> None:
    assert memory_bytes("8g") == 8 * GIB and memory_bytes("8GiB") == 8 * GIB and memory_bytes("512m") == 512 * 2**20
    assert memory_bytes("1.5g") == int(1.5 * GIB) and memory_bytes("1024") == 1024
    assert memory_bytes("lots") is None and memory_bytes("8x") is None


def test_one_sandbox_a_core_while_the_memory_holds_them(monkeypatch) -> None:
    monkeypatch.setattr(submission_run, "usable_cores", lambda: 8)
    monkeypatch.setattr(submission_run.psutil, "virtual_memory", lambda: type("Memory", (), {"total": 24 * GIB}))
    assert default_sandboxes(SandboxLimits(memory="2g")) == 8
    assert default_sandboxes(SandboxLimits(memory="8g")) == 3  # 24 GiB holds three 8 GiB limits
    assert default_sandboxes(SandboxLimits(memory="64g")) == 1  # never none
    assert default_sandboxes(SandboxLimits(memory="odd")) == 8  # an unreadable limit: Docker refuses it at start


def test_each_sandbox_runs_one_trial_at_a_time_and_a_third_waits(fake_clients) -> None:
    directory = SandboxDirectory([FakeSandbox("a"), FakeSandbox("b")])
    first, second = directory.acquire("m"), directory.acquire("m")
    assert {first.endpoint, second.endpoint} == {"unix:/tmp/a.sock", "unix:/tmp/b.sock"}
    got: list[str] = []
    waiting = threading.Thread(target=lambda: got.append(directory.acquire("m").endpoint))
    waiting.start()
    waiting.join(0.2)
    assert waiting.is_alive() and not got  # both busy: the third trial waits
    directory.release(second)
    waiting.join(5)
    assert got == [second.endpoint]
    directory.close()


def test_a_lost_sandbox_restarts_alone_and_one_that_stays_down_is_handed_out_no_more(fake_clients) -> None:
    good, bad = FakeSandbox("good"), FakeSandbox("bad", comes_back=False)
    directory = SandboxDirectory([bad, good])
    lost = directory.acquire("m")
    assert lost.endpoint == bad.endpoint
    directory.lost(lost)  # recover (fails), then release
    assert bad.restarts == 1 and good.restarts == 0
    for _ in range(3):  # only the good one from now on
        replica = directory.acquire("m")
        assert replica.endpoint == good.endpoint
        directory.release(replica)
    held = directory.acquire("m")
    directory.lost(held)  # the good one comes back
    assert good.restarts == 1 and directory.acquire("m").endpoint == good.endpoint


def test_when_every_sandbox_is_down_a_trial_is_unavailable(fake_clients) -> None:
    directory = SandboxDirectory([FakeSandbox("only", comes_back=False)])
    directory.lost(directory.acquire("m"))
    with pytest.raises(ServiceUnavailable, match="every sandboxed service is down"):
        directory.acquire("m")


def test_the_reproducing_command_names_the_sandboxes(tmp_path) -> None:
    from orchestrator.plan import SweepPlan

    plan = SweepPlan(methods=("m",), datasets=("texas",), regimes=("10/10/80",), splits=(0,), budget=2, protocol="lite")
    assert "--parallel 3" in Submission("img", tmp_path, plan, parallel=3).command()
    assert "--parallel" not in Submission("img", tmp_path, plan).command()
