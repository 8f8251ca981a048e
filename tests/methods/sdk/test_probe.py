"""The peak-memory probe records a known allocation's peak: by the kernel's high-water mark, or by the sampler."""

from __future__ import annotations

import sys

import numpy as np
import psutil
import pytest

from methods.sdk.allocator import release_freed_memory
from methods.sdk.probe import ResourceProbe, high_water_mark_bytes
from tests.conftest import wait_for

MIB = 1 << 20
SIZE = 128 * MIB
# the recorded peak minus the RSS before the call: at least the allocation less 4 MiB (pages the allocator or the
# kernel count differently), at most 32 MiB over it (interpreter and allocator noise during the call)
LOW, HIGH = SIZE - 4 * MIB, SIZE + 32 * MIB


def probed(use_kernel: bool, hold: bool = False) -> tuple[ResourceProbe, int]:
    """A probe of a call that allocates SIZE and frees it; ``hold`` keeps the block until the probe's sampler has
    seen it (waited for, never slept for: a sampler thread a loaded machine did not schedule in time saw nothing)."""
    release_freed_memory()  # as the probe does on entry: the RSS it starts from holds no earlier call's free pages
    rss = psutil.Process().memory_info().rss
    with ResourceProbe(use_kernel=use_kernel) as probe:
        block = np.ones(SIZE, dtype=np.uint8)  # written, so every page is resident
        if hold:
            wait_for(lambda: probe.peak_rss_bytes - rss >= LOW, "the sampler seeing the held block")
        del block
    return probe, rss


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and clear_refs are Linux's")
def test_kernel_peak_is_the_calls_own_not_the_processs_lifetime():
    earlier = np.ones(2 * SIZE, dtype=np.uint8)  # a larger peak before the call: must not be reported
    del earlier
    assert (high_water_mark_bytes() or 0) >= psutil.Process().memory_info().rss + SIZE
    probe, rss = probed(use_kernel=True)
    assert probe.kernel_peak
    assert LOW <= probe.peak_rss_bytes - rss <= HIGH, (probe.peak_rss_bytes - rss) / MIB


def test_sampler_fallback_records_a_held_allocation():
    probe, rss = probed(use_kernel=False, hold=True)  # the sampler needs the block held across a period
    assert not probe.kernel_peak
    assert LOW <= probe.peak_rss_bytes - rss <= HIGH, (probe.peak_rss_bytes - rss) / MIB


def test_kernel_peak_needs_no_sampling_thread():
    with ResourceProbe() as probe:
        pass
    assert probe._thread is None or not sys.platform.startswith("linux")
    assert probe.peak_rss_bytes >= psutil.Process().memory_info().rss // 2
