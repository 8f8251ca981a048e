"""`orchestrator submit`'s run: the image started in the sandbox, the protocol swept against it, a sealed bundle.

The sweep is `orchestrator run`'s (shared splits, default config then sampled configs, validation-only
selection, orchestrator-side metrics); every row carries origin ``user:<id>`` and the sandbox limits that
applied. Rerunning into the same bundle directory resumes.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
from google.protobuf.json_format import MessageToDict

from orchestrator.conformance.guard import GuardedClient
from orchestrator.host import hardware
from orchestrator.plan import SweepPlan
from orchestrator.records import STATUS_OK, TrialRecord
from orchestrator.services.client import MethodClient, Replica, ServiceUnavailable
from orchestrator.services.directory import Directory
from orchestrator.services.embedded import usable_cores
from orchestrator.services.sandbox import Sandbox, SandboxError, SandboxLimits
from orchestrator.store import Store, drop_claim
from orchestrator.submission.bundle import SUBMISSION, TRIALS, finalize_store, seal
from orchestrator.sweep import Sweep

log = logging.getLogger("nodeground.submission")


class SandboxDirectory(Directory):
    """The submission's sandboxes, side by side: each serves every method of the image, one trial at a time."""

    def __init__(self, sandboxes: Sequence[Any]) -> None:
        self.sandboxes = list(sandboxes)
        self._cond = threading.Condition()
        self._clients: dict[int, GuardedClient] = {}
        self._busy: set[int] = set()
        self._down: set[int] = set()

    def _client(self, index: int) -> GuardedClient:
        with self._cond:
            client = self._clients.get(index)
        if client is None:
            client = GuardedClient(self.sandboxes[index].endpoint)
            client.wait_healthy(60.0)
            with self._cond:  # Describe may have made one for the same sandbox meanwhile: one client a sandbox
                held = self._clients.setdefault(index, client)
            if held is not client:
                client.close()
                client = held
        return client

    def _index(self, replica: Replica) -> int:
        return next(i for i, sandbox in enumerate(self.sandboxes) if sandbox.endpoint == replica.endpoint)

    def client(self, method: str) -> MethodClient:
        return self._client(next((i for i in range(len(self.sandboxes)) if i not in self._down), 0))

    def acquire(self, method: str) -> Replica:
        """A free sandbox (waiting while all are busy); ServiceUnavailable once every one is down."""
        with self._cond:
            while True:
                if len(self._down) == len(self.sandboxes):
                    raise ServiceUnavailable("every sandboxed service is down and did not come back")
                free = next((i for i in range(len(self.sandboxes)) if i not in self._busy | self._down), None)
                if free is not None:
                    self._busy.add(free)
                    break
                self._cond.wait()
        try:
            client = self._client(free)
        except BaseException:
            self.release_index(free)
            raise
        endpoint = self.sandboxes[free].endpoint
        return Replica(pool="sandbox", family="", endpoint=endpoint, client=client, source="remote", methods=(method,))

    def release(self, replica: Replica) -> None:
        self.release_index(self._index(replica))

    def release_index(self, index: int) -> None:
        with self._cond:
            self._busy.discard(index)
            self._cond.notify_all()

    def recover(self, replica: Replica) -> bool:
        """Restart the replica's container; a sandbox that does not come back is handed out no more."""
        index = self._index(replica)
        with self._cond:
            client = self._clients.pop(index, None)
        if client is not None:
            client.close()
        try:
            self.sandboxes[index].restart()
            self.sandboxes[index].wait_healthy(120.0)
            return True
        except Exception as exc:
            log.warning("sandboxed service %d did not come back: %s", index, exc)
            with self._cond:
                self._down.add(index)
                self._cond.notify_all()
            return False

    def close(self) -> None:
        with self._cond:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()


_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)


def memory_bytes(limit: str) -> int | None:
    """A sandbox memory limit as Docker reads it ("8g", "512m", "2GiB": binary units), in bytes; None if unreadable."""
    found = _MEMORY.match(limit)
    if found is None:
        return None
    return int(float(found.group(1)) * 1024 ** "_kmgtp".index(found.group(2).lower() or "_"))


def default_sandboxes(limits: SandboxLimits) -> int:
    """Sandboxes side by side when nothing says how many: one a core (each service computes on one thread, the thread
    rule of every run), no more than the machine's memory holds at each one's memory limit."""
    count = usable_cores()
    cap = memory_bytes(limits.memory)
    if cap:
        count = min(count, max(1, psutil.virtual_memory().total // cap))
    return max(1, count)


class SubmissionStore(Store):
    """A store that stamps every record as this submission's and records the sandbox limits."""

    def __init__(self, path: Path, origin: str, extra: dict[str, Any]) -> None:
        super().__init__(path)
        self.origin = origin
        self.extra = extra

    def write(self, record: TrialRecord) -> None:
        record.origin = self.origin
        mine = json.loads(record.extra_json) if record.extra_json else {}
        record.extra_json = json.dumps({**mine, **self.extra}, sort_keys=True)
        super().write(record)


def exact_command(image: str, options: dict[str, Any]) -> str:
    """The command that reproduces this run, every option explicit."""
    args = ["orchestrator", "submit", image]
    for name, value in options.items():
        if value is None or value == "":
            continue
        for one in value if isinstance(value, list | tuple) else [value]:  # a repeatable option once per value
            args += [f"--{name.replace('_', '-')}", str(one)]
    return shlex.join(args)


class SubmissionError(ValueError):
    """The image cannot be benchmarked as asked (it does not start, or does not host a method named)."""


@dataclass(frozen=True)
class Submission:
    """What to benchmark and under which limits; ``plan.methods`` empty means every method the image hosts."""

    image: str
    out: Path
    plan: SweepPlan
    submission_id: str = ""
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    weights: Path | None = None
    env: tuple[tuple[str, str], ...] = ()
    parallel: int = 0  # sandboxes side by side, each one trial at a time; 0: ``default_sandboxes``

    def command(self) -> str:
        """The `orchestrator submit` command that reproduces this run, every option explicit."""
        plan = self.plan
        return exact_command(
            self.image,
            {
                "out": self.out,
                "protocol": plan.protocol,
                "regimes": ",".join(plan.regimes),
                "datasets": ",".join(plan.datasets),
                "splits": ",".join(map(str, plan.splits)),
                "budget": plan.budget,
                "methods": ",".join(plan.methods),
                "id": self.submission_id,
                "time_limit": plan.time_limit,
                "memory": self.limits.memory,
                "cpus": self.limits.cpus,
                "weights": self.weights,
                "env": [f"{k}={v}" for k, v in self.env],
                "parallel": self.parallel or None,
            },
        )


def chosen_methods(asked: tuple[str, ...], hosted: list[str], image: str) -> tuple[str, ...]:
    """The methods to benchmark: those asked (each must be hosted), else every hosted one."""
    unknown = [m for m in asked if m not in hosted]
    if unknown:
        raise SubmissionError(f"{image} does not host {', '.join(unknown)}; it hosts {', '.join(hosted)}")
    return asked or tuple(hosted)


def benchmark(
    request: Submission, say: Any = print, run_sweep: Callable[[Sweep], list[TrialRecord]] = Sweep.run
) -> dict[str, Any]:
    """Run the protocol against the sandboxed image and write the sealed bundle; its submission.json as a dict.

    ``say`` prints lines and ``run_sweep`` runs the sweep (the CLI passes its console and a sweep that shows its
    progress, as `run`'s does).
    """
    out = request.out
    out.mkdir(parents=True, exist_ok=True)
    count = request.parallel or default_sandboxes(request.limits)
    sandboxes: list[Sandbox] = []
    try:
        for _ in range(count):
            sandboxes.append(Sandbox(request.image, request.limits, weights=request.weights, env=dict(request.env)))
            sandboxes[-1].start()
        for sandbox in sandboxes:
            sandbox.wait_healthy()
        sandbox = sandboxes[0]
        ident = request.submission_id or sandbox.info["id"].split(":")[-1][:12]
        applied = sandbox.applied()
        probe = GuardedClient(sandbox.endpoint)
        try:
            described = probe.described(timeout=60.0)
        finally:
            probe.close()
        hosted = [m.name for m in described.methods]
        plan = replace(request.plan, methods=chosen_methods(request.plan.methods, hosted, request.image))
        request = replace(request, plan=plan, submission_id=ident, parallel=count)
        extra = {"submission": ident, "image": request.image, "image_id": sandbox.info["id"], "sandbox": applied}
        directory = SandboxDirectory(sandboxes)
        store = SubmissionStore(out / TRIALS, f"user:{ident}", extra)
        try:
            say(
                f"benchmarking {request.image} as user:{ident}: {len(plan.methods)} method(s) x "
                f"{len(plan.datasets)} dataset(s) x {len(plan.regimes)} regime(s) x {len(plan.splits)} split(s), "
                f"budget {plan.budget}, {count} sandbox(es) side by side"
            )
            records = run_sweep(Sweep(plan, store, directory, parallel=count))
            frame = store.frame()
        finally:
            directory.close()
            store.close()
    except SandboxError as exc:
        raise SubmissionError(str(exc)) from None
    finally:
        for started in sandboxes:
            started.stop()
    finalize_store(out / TRIALS)
    drop_claim(out / TRIALS)  # the sweep's claim file is no part of the bundle, which holds its sealed files alone
    submission = {
        "format": "nodeground-submission-v1",
        "id": ident,
        "origin": f"user:{ident}",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "image": dict(sandbox.info),
        "describe": MessageToDict(described, preserving_proto_field_name=True),
        "hardware": hardware(),
        "command": request.command(),
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "sandbox": applied,
        "sandboxes": count,
        "protocol": {
            "name": plan.protocol,
            "methods": list(plan.methods),
            "datasets": list(plan.datasets),
            "regimes": list(plan.regimes),
            "splits": list(plan.splits),
            "budget": plan.budget,
            "time_limit": plan.time_limit,
        },
        "trials": {"total": int(len(frame)), "ok": int((frame["status"] == STATUS_OK).sum()), "this_run": len(records)},
    }
    (out / SUBMISSION).write_text(json.dumps(submission, indent=2, sort_keys=True, default=str) + "\n")
    submission["checksum"] = seal(out)
    return submission
