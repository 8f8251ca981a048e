"""Ctrl-C and start-up of a real `orchestrator run`, as a user meets them.

What is measured, in one run on this machine:
- `orchestrator --help`: CPU seconds (user + system) of the whole process, the best of 3;
- the gnn family's service alone: seconds from launch until it answers health, the best of 3;
- a sweep of gcn on cora (embedded service, no warm-up) started as a subprocess: seconds to its first stored
  trial (beyond that service start: what the orchestrator adds before a trial runs), then SIGINT half a second
  into the next fit: seconds from the signal to the process's exit, its exit code, and the trials stored at the
  signal and after (every finished trial must be stored).
"""

from __future__ import annotations

import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from orchestrator.services.client import MethodClient
from orchestrator.services.embedded import EmbeddedService


def help_cpu() -> float:
    best = float("inf")
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "orchestrator", "--help"], capture_output=True, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best = min(best, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best


def service_start() -> float:
    """Seconds from launching the gnn service until it answers health: the floor of a sweep's first trial."""
    best = float("inf")
    for _ in range(3):
        started = time.monotonic()
        service = EmbeddedService("gnn")
        try:
            client = MethodClient(service.start())
            client.wait_healthy(120)
            best = min(best, time.monotonic() - started)
            client.close()
        finally:
            service.stop()
    return best


def stored(store: Path) -> int:
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
            return int(db.execute("SELECT count(*) FROM trials").fetchone()[0])
    except sqlite3.Error:
        return 0


def interrupt(store: Path) -> tuple[float, float, int, int, int]:
    command = [sys.executable, "-m", "orchestrator", "run", "--methods", "gcn", "--datasets", "cora", "--budget", "6"]
    command += ["--services", "embedded", "--no-warmup", "--store", str(store)]
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while stored(store) < 1 and proc.poll() is None:
            time.sleep(0.2)
        first = time.monotonic() - started
        time.sleep(0.5)  # into the next fit
        before = stored(store)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=300)
        return first, time.monotonic() - sent, code, before, stored(store)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def main() -> None:
    print(f"orchestrator --help: {help_cpu():.2f} s CPU (best of 3; target <= 0.5)")
    start_s = service_start()
    with tempfile.TemporaryDirectory(prefix="bench-interrupt-") as tmp:
        first, exit_s, code, before, after = interrupt(Path(tmp) / "r.sqlite")
    print(
        f"gcn on cora, embedded: first trial stored {first:.1f} s after the start = the service's start "
        f"{start_s:.1f} s + {first - start_s:.1f} s (target <= 5); SIGINT mid-fit: exit code {code} "
        f"{exit_s:.1f} s after the signal (target <= 5); trials stored {before} at the signal, {after} after"
    )


if __name__ == "__main__":
    main()
