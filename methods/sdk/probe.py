"""Time and peak-memory probes around one service call.

CPU memory is the process's peak resident set during the call, measured by the kernel: on Linux
the call starts by writing ``5`` to ``/proc/self/clear_refs``, which resets the process's RSS
high-water mark (``VmHWM``) to its current RSS, and ends by reading ``VmHWM`` from
``/proc/self/status``. Nothing runs during the call, so the probe costs the call nothing (the
RSS sampler it replaces, a thread reading RSS every 2 ms, cost a fit 15-40% of its CPU). Where
the reset is not allowed (not Linux, a kernel or sandbox that refuses it) the probe falls back to
that sampler. Calls that compute are serialised by the service, so one call's reset never cuts
another's measurement short. GPU memory is torch's allocator peak, reset at the start. A service
keeps freed memory in its heap during a call (``allocator``); the probe returns it to the kernel
before the reset and after the read, so a call's peak does not include an earlier call's leftovers.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import TracebackType

import psutil
import torch

from methods.sdk.allocator import release_freed_memory

SAMPLE_INTERVAL_S = 0.002  # the fallback sampler's period
CLEAR_REFS = Path("/proc/self/clear_refs")
STATUS = Path("/proc/self/status")


def reset_high_water_mark() -> bool:
    """Reset this process's ``VmHWM`` to its current RSS; False where the kernel does not let us."""
    try:
        with CLEAR_REFS.open("w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def high_water_mark_bytes() -> int | None:
    """This process's ``VmHWM`` (peak RSS since start or the last reset), or None where there is none."""
    try:
        with STATUS.open() as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # reported in kB
    except (OSError, ValueError, IndexError):
        return None
    return None


class ResourceProbe:
    """``with ResourceProbe() as p: ...`` then read ``p.seconds``, ``p.cpu_seconds``, ``p.peak_rss_bytes``,
    ``p.peak_gpu_bytes``.

    ``cpu_seconds`` is the process's CPU time over the call (every thread's, user and system): what the call took
    from the machine. Other work on a shared machine lengthens ``seconds`` but not it, so for a one-thread service
    it is the call's wall time on an idle machine.

    ``p.kernel_peak`` says whether the kernel's high-water mark measured the call (else the sampler did).
    """

    def __init__(self, interval_s: float = SAMPLE_INTERVAL_S, use_kernel: bool = True) -> None:
        self._interval = interval_s
        self._use_kernel = use_kernel
        self._process = psutil.Process()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.kernel_peak = False
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self.peak_rss_bytes = 0
        self.peak_gpu_bytes = 0

    def __enter__(self) -> ResourceProbe:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        release_freed_memory()  # what an earlier call freed is not this call's peak
        self.kernel_peak = self._use_kernel and high_water_mark_bytes() is not None and reset_high_water_mark()
        if not self.kernel_peak:
            self.peak_rss_bytes = self._process.memory_info().rss
            self._thread = threading.Thread(target=self._sample, name="rss-probe", daemon=True)
            self._thread.start()
        self._start = time.perf_counter()
        self._cpu_start = time.process_time()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self._interval):
            rss = self._process.memory_info().rss
            if rss > self.peak_rss_bytes:
                self.peak_rss_bytes = rss

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            self.peak_gpu_bytes = int(torch.cuda.max_memory_allocated())
        self.seconds = time.perf_counter() - self._start
        self.cpu_seconds = time.process_time() - self._cpu_start
        if self.kernel_peak:
            peak = high_water_mark_bytes()
            self.peak_rss_bytes = peak if peak is not None else self._process.memory_info().rss
            release_freed_memory()
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak_rss_bytes = max(self.peak_rss_bytes, self._process.memory_info().rss)
        release_freed_memory()
