"""Measurement shared by both sides of the GFM benchmark: CPU time and peak resident memory of one call.

Standard library only, so that the worker that drives an upstream implementation
in that implementation's own virtual environment can load it by path. Each side
runs in a fresh process: the graph is loaded and the libraries imported first,
then the peak resident set (VmHWM) is reset and the clock read, the work runs,
and the process reports its CPU time and how far its peak rose above the
resident set it had before the work (the memory the work itself needed).
Imports happen before the clock on both sides (``prepare``).

Library code the work runs for the first time is paged in from the shared
objects and counts in the resident set as file-backed pages (tens of MiB for a
first sparse product or least-squares call); that is neither side's data, is
shared between processes and differs with the kernels each side happens to call,
so the rise of the file-backed resident set (RssFile) is taken off the peak
(``peak_mib``) and reported on its own (``file_mib``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak() -> bool:
    """Reset VmHWM to the current resident set (Linux >= 4.0); False where it cannot be reset."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def measure(work: Callable[[], Any]) -> tuple[Any, dict[str, float]]:
    """Run ``work()`` once; return its result and {cpu_s, wall_s, peak_mib, file_mib}."""
    import gc

    gc.collect()
    exact = _reset_peak()
    base, file_base = _status_kib("VmRSS"), _status_kib("RssFile")
    cpu, wall = time.process_time(), time.perf_counter()
    result = work()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    peak, file_rise = _status_kib("VmHWM"), max(0, _status_kib("RssFile") - file_base)
    return result, {
        "cpu_s": cpu,
        "wall_s": wall,
        "peak_mib": max(0, peak - base - file_rise) / 1024,
        "file_mib": file_rise / 1024,
        "peak_exact": exact,
    }


def prepare(torch_module: Any) -> None:
    """Import what torch loads lazily on first use (its compiler stack, pulled in by the first optimizer).

    A service pays that once per process, not per fit; one side may already have
    it loaded through its other imports (PyG does), so both load it before the clock starts.
    """
    import torch._dynamo  # noqa: F401

    set_threads(torch_module)


def set_threads(torch_module: Any) -> int:
    """Same thread count on both sides: NODEGROUND_THREADS, default one (the harness's default)."""
    threads = int(os.environ.get("NODEGROUND_THREADS", 1))
    torch_module.set_num_threads(threads)
    return threads


def write_report(path: str, stats: dict[str, float], extra: dict[str, Any] | None = None) -> None:
    Path(path).write_text(json.dumps({**stats, **(extra or {})}))


def argv() -> tuple[str, Path, Path]:
    """``<method> <graph.npz> <out dir>``: what the parent passes to either worker."""
    if len(sys.argv) != 4:
        raise SystemExit(f"usage: {sys.argv[0]} METHOD GRAPH_NPZ OUT_DIR")
    return sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
