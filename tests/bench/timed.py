"""A benchmark's child process under ``/usr/bin/time -v``: its own CPU seconds and peak RSS, whatever else runs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIME = "/usr/bin/time"  # GNU time (Debian's `time` package): -v reports the child's rusage


@dataclass(frozen=True)
class Usage:
    cpu_s: float  # user + system
    peak_bytes: int  # maximum resident set size
    stdout: str

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / 2**20


def timed(args: list[str]) -> Usage:
    """Run ``python args...`` from the repository root under ``/usr/bin/time -v``; SystemExit when it fails."""
    if shutil.which(TIME) is None:
        raise SystemExit(f"{TIME} is missing: install GNU time (apt-get install time) to measure a child's usage")
    done = subprocess.run([TIME, "-v", sys.executable, *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")

    def field(label: str) -> float:
        found = re.search(rf"^\s*{re.escape(label)}: ([0-9.]+)$", done.stderr, re.MULTILINE)
        if found is None:
            raise SystemExit(f"{TIME} -v did not report {label!r}:\n{done.stderr[-2000:]}")
        return float(found.group(1))

    cpu = field("User time (seconds)") + field("System time (seconds)")
    return Usage(cpu, int(field("Maximum resident set size (kbytes)")) * 1024, done.stdout)
