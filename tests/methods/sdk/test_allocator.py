"""The service's malloc settings: freed memory is reused without new page faults, and released on request.

Each check runs in its own interpreter, since malloc settings cannot be undone in this one.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from methods.sdk import allocator

pytestmark = pytest.mark.skipif(allocator._LIBC is None, reason="glibc malloc only")

# In a worker thread, as a service's fit runs: a 64 MiB tensor allocated, written and freed 30 times; prints the
# minor page faults of the last 29 and the resident set before and after release_freed_memory. (torch, not numpy:
# numpy asks for transparent huge pages, which fault 512 pages at a time.)
PROGRAM = """
import resource, sys, threading
import psutil
import torch
from methods.sdk.allocator import keep_freed_memory, release_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
out = []
def fit():
    block = torch.empty(16 << 20).fill_(1)
    del block
    start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(29):
        block = torch.empty(16 << 20).fill_(1)
        del block
    out.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start)
    out.append(psutil.Process().memory_info().rss)
    release_freed_memory()
    out.append(psutil.Process().memory_info().rss)
worker = threading.Thread(target=fit)
worker.start()
worker.join()
print(*out)
"""
PAGES_PER_BLOCK = (64 << 20) // 4096


def _run(mode: str) -> tuple[int, int, int]:
    done = subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, check=True)
    faults, held, released = (int(v) for v in done.stdout.split())
    return faults, held, released


def test_freed_blocks_are_reused_without_faulting_their_pages_in_again():
    faults, _, _ = _run("keep")
    default_faults, _, _ = _run("default")
    assert default_faults > 29 * PAGES_PER_BLOCK // 2  # glibc's default unmaps the block on free: the check can fail
    assert faults < 29 * PAGES_PER_BLOCK // 4  # a block or two while the heap settles, then none


def test_release_returns_the_kept_memory_to_the_kernel():
    _, held, released = _run("keep")
    assert held - released > (64 << 20) * 3 // 4
