"""A trial's pace when the machine is shared: the thread rule measured as a user meets it.

One Cora GCN default trial (split 0, 10/10/80), run by `orchestrator run` as a user types it, four times: with
the default thread rule (one torch thread a service) and with two threads (torch's own default on two cores),
each on the machine as it is and with one core kept busy by another process (a busy loop). Each prints the
service's wall and CPU milliseconds per epoch (the record's ``fit_service_s`` and ``fit_cpu_s`` over its epochs) and
the loaded run against the unloaded one. The target: the default's wall time per epoch loaded at most 1.5x
unloaded (two threads on two cores, one of them busy, measured 3.1-4.3x; one thread 1.00-1.04x).

Run: ``python -m tests.bench.bench_load`` (``make bench BENCH=load``; about 3 minutes). The unloaded runs mean an
otherwise idle machine: another benchmark or build beside it counts as load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGET = 1.5
BUSY = "while True: pass"


@contextmanager
def one_busy_core() -> Iterator[None]:
    """Another process keeps one core busy while the block runs."""
    busy = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        yield
    finally:
        busy.kill()
        busy.wait()


def epoch_ms(threads: str | None, folder: Path) -> tuple[float, float]:
    """(wall, CPU) milliseconds per epoch of one Cora GCN default trial run by `orchestrator run`."""
    from orchestrator.store import read_trials

    store = folder / f"run-{threads}-{len(list(folder.iterdir()))}.sqlite"
    env = {k: v for k, v in os.environ.items() if k not in ("NODEGROUND_THREADS", "NODEGROUND_KERNELS")}
    if threads is not None:
        env["NODEGROUND_THREADS"] = threads
    args = ["run", "--methods", "gcn", "--datasets", "cora", "--splits", "0", "--regimes", "10/10/80",
            "--budget", "1", "--parallel", "1", "--store", str(store)]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"orchestrator run exited {done.returncode}:\n{done.stderr[-2000:]}")
    row = read_trials(store).iloc[0]
    epochs = json.loads(row["fit_info_json"])["epochs"]
    return 1000 * float(row["fit_service_s"]) / epochs, 1000 * float(row["fit_cpu_s"]) / epochs


def main() -> None:
    print(f"{os.cpu_count()} cores; one Cora GCN default trial per line, ms per epoch of its fit")
    results: dict[tuple[str, bool], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-load-") as scratch:
        folder = Path(scratch)
        epoch_ms("1", folder)  # the dataset's cache and the first start, out of the way
        for threads, label in (("1", "default: 1 thread"), ("2", "2 threads")):
            for loaded in (False, True):
                if loaded:
                    with one_busy_core():
                        results[label, loaded] = epoch_ms(threads if threads != "1" else None, folder)
                else:
                    results[label, loaded] = epoch_ms(threads if threads != "1" else None, folder)
                wall, cpu = results[label, loaded]
                print(f"{label:18s} {'one core busy' if loaded else 'as it is':14s} wall {wall:8.1f}  CPU {cpu:8.1f}")
    for label in ("default: 1 thread", "2 threads"):
        ratio = results[label, True][0] / results[label, False][0]
        verdict = (
            f" (target <= {TARGET:g}): {'OK' if ratio <= TARGET else 'OVER'}" if label.startswith("default") else ""
        )
        print(f"{label}: wall per epoch with one core busy / as it is: {ratio:.2f}x{verdict}")


if __name__ == "__main__":
    main()
