"""Time and peak-memory probes around one service call.

CPU memory is the process RSS, sampled by a background thread for the length
of the call (the kernel's own high-water mark covers the whole process life,
not one call). GPU memory is torch's allocator peak, reset at the start.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType

import psutil
import torch

SAMPLE_INTERVAL_S = 0.002


class ResourceProbe:
    """``with ResourceProbe() as p: ...`` then read ``p.seconds``, ``p.peak_rss_bytes``, ``p.peak_gpu_bytes``."""

    def __init__(self, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self._interval = interval_s
        self._process = psutil.Process()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.seconds = 0.0
        self.peak_rss_bytes = 0
        self.peak_gpu_bytes = 0

    def __enter__(self) -> ResourceProbe:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        self.peak_rss_bytes = self._process.memory_info().rss
        self._thread = threading.Thread(target=self._sample, name="rss-probe", daemon=True)
        self._thread.start()
        self._start = time.perf_counter()
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
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak_rss_bytes = max(self.peak_rss_bytes, self._process.memory_info().rss)
