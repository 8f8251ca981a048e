"""`orchestrator submit`'s run: the image started in the sandbox, the protocol swept against it, a sealed bundle.

The sweep is `orchestrator run`'s (shared splits, default config then sampled configs, validation-only
selection, orchestrator-side metrics); every row carries origin ``user:<id>`` and the sandbox limits that
applied. Rerunning into the same bundle directory resumes.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict

from orchestrator.conformance.guard import GuardedClient
from orchestrator.host import hardware
from orchestrator.plan import SweepPlan
from orchestrator.records import STATUS_OK, TrialRecord
from orchestrator.services.client import MethodClient, Replica
from orchestrator.services.directory import Directory
from orchestrator.services.sandbox import Sandbox, SandboxError, SandboxLimits
from orchestrator.store import Store, drop_claim
from orchestrator.submission.bundle import SUBMISSION, TRIALS, finalize_store, seal
from orchestrator.sweep import Sweep

log = logging.getLogger("nodeground.submission")


class SandboxDirectory(Directory):
    """Every method of the submission is served by the one sandboxed container."""

    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox
        self._client: GuardedClient | None = None

    def client(self, method: str) -> MethodClient:
        if self._client is None:
            self._client = GuardedClient(self.sandbox.endpoint)
            self._client.wait_healthy(60.0)
        return self._client

    def recover(self, replica: Replica) -> bool:
        """Restart the container (the replica is the one client every method shares)."""
        self.close()
        try:
            self.sandbox.restart()
            self.sandbox.wait_healthy(120.0)
            return True
        except Exception as exc:
            log.warning("the sandboxed service did not come back: %s", exc)
            return False

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


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
    try:
        sandbox = Sandbox(request.image, request.limits, weights=request.weights, env=dict(request.env))
        sandbox.start()
    except SandboxError as exc:
        raise SubmissionError(str(exc)) from None
    try:
        sandbox.wait_healthy()
        ident = request.submission_id or sandbox.info["id"].split(":")[-1][:12]
        applied = sandbox.applied()
        probe = GuardedClient(sandbox.endpoint)
        try:
            described = probe.described(timeout=60.0)
        finally:
            probe.close()
        hosted = [m.name for m in described.methods]
        plan = replace(request.plan, methods=chosen_methods(request.plan.methods, hosted, request.image))
        request = replace(request, plan=plan, submission_id=ident)
        extra = {"submission": ident, "image": request.image, "image_id": sandbox.info["id"], "sandbox": applied}
        directory = SandboxDirectory(sandbox)
        store = SubmissionStore(out / TRIALS, f"user:{ident}", extra)
        try:
            say(
                f"benchmarking {request.image} as user:{ident}: {len(plan.methods)} method(s) x "
                f"{len(plan.datasets)} dataset(s) x {len(plan.regimes)} regime(s) x {len(plan.splits)} split(s), "
                f"budget {plan.budget}, sandboxed"
            )
            records = run_sweep(Sweep(plan, store, directory))
            frame = store.frame()
        finally:
            directory.close()
            store.close()
    finally:
        sandbox.stop()
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
