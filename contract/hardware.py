"""The CPU model as both sides name it: a service describes its own host's, a submission bundle the orchestrator's."""

from __future__ import annotations

from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """This host's CPU model as the kernel names it ("" where it does not say)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith(("model name", "Model")):  # x86 and most ARM kernels
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""
