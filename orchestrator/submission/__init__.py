"""A contributed image benchmarked under the protocol: the sandboxed service as a sweep's directory,
a store that stamps every row as the submission's, and what a bundle records about the run.

The bundle format itself (files, checksum, merging) is ``orchestrator.conformance.bundle``;
``orchestrator submit`` (``orchestrator.cli.submit``) is the command over these.
"""

from __future__ import annotations

import json
import logging
import platform
import shlex
import subprocess
from pathlib import Path
from typing import Any

from orchestrator.conformance.guard import GuardedClient
from orchestrator.records import TrialRecord
from orchestrator.services.client import MethodClient, Replica
from orchestrator.services.directory import Directory
from orchestrator.store import Store
from orchestrator.sweep import host_info

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


def hardware() -> dict[str, Any]:
    info: dict[str, Any] = json.loads(host_info())
    try:
        import psutil

        info["memory_bytes"] = psutil.virtual_memory().total
    except Exception:
        pass
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info["machine"] = platform.machine()
    try:
        gpus = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
        info["gpus"] = gpus.stdout.strip().splitlines() if gpus.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        info["gpus"] = []
    return info


def exact_command(image: str, options: dict[str, Any]) -> str:
    """The command that reproduces this run, every option explicit."""
    args = ["orchestrator", "submit", image]
    for name, value in options.items():
        if value is None or value == "":
            continue
        for one in value if isinstance(value, list | tuple) else [value]:  # a repeatable option once per value
            args += [f"--{name.replace('_', '-')}", str(one)]
    return shlex.join(args)
