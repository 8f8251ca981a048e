"""The host a trial ran on, defined once: what every record carries, what a bundle adds, how the estimate reads it.

``host_facts`` are the orchestrator host's facts every trial record carries (``host_json``), joined with
the device of the service that ran the trial (``with_device``: the keys ``MethodClient.device`` returns).
A submission bundle records the same facts plus what only a one-off run needs (``hardware``: memory, CPU
model, GPUs). The estimate prices a plan per hardware, which ``hardware_of`` reads back from a record.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
from importlib import metadata
from typing import Any

from contract.hardware import cpu_model
from orchestrator import __version__


def host_facts() -> dict[str, Any]:
    """This host, as a trial record names it; torch's version is read from its metadata (never imported)."""
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": _installed_version("torch"),
        "orchestrator": __version__,
    }


def host_json(facts: dict[str, Any], device: dict[str, str | int] | None = None) -> str:
    """A record's ``host_json``: the host's facts with the device of the service that ran the trial, if known."""
    return json.dumps({**facts, **(device or {})}, sort_keys=True)


def hardware() -> dict[str, Any]:
    """This host's facts as a submission bundle records them: the record's facts plus memory, CPU model and GPUs."""
    info = host_facts()
    try:
        import psutil

        info["memory_bytes"] = psutil.virtual_memory().total
    except Exception:
        pass
    if model := cpu_model():
        info["cpu_model"] = model
    info["machine"] = platform.machine()
    try:
        gpus = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
        info["gpus"] = gpus.stdout.strip().splitlines() if gpus.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        info["gpus"] = []
    return info


def hardware_of(record_host_json: str | None) -> str:
    """The hardware a record ran on, as the estimate prices it: a GPU by name and memory; else the CPU model, the
    threads the service computed with and its kernels (a CPU trial's time depends on all three: "AMD EPYC, 1 thread,
    native kernels"); ``cpu`` where the record does not say. A record written before services reported their kernels
    names none.

    Records of one hardware share this line exactly, so a price never mixes two machines' records.
    """
    try:
        host = json.loads(record_host_json) if record_host_json else {}
    except (TypeError, ValueError):
        host = {}
    if not isinstance(host, dict):
        host = {}
    if isinstance(host.get("hardware"), str) and host["hardware"]:  # a shipped reference row names its line
        return host["hardware"]
    device = str(host.get("device", "cpu"))
    if device.startswith("cuda"):
        name = str(host.get("device_name") or device)
        memory = host.get("device_memory_bytes")
        return f"{name} ({int(memory) / 2**30:.0f} GiB)" if isinstance(memory, int) and memory > 0 else name
    model, threads = host.get("cpu_model"), host.get("compute_threads")
    if not model:
        return "cpu"
    parts = [str(model)]
    if isinstance(threads, int):
        parts.append(f"{threads} thread{'s' if threads != 1 else ''}")
    if isinstance(host.get("kernels"), str) and host["kernels"]:
        parts.append(f"{host['kernels']} kernels")
    return ", ".join(parts)


def _installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None
