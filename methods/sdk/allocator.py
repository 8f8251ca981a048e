"""glibc malloc tuned for a service that runs one fit after another, and the release of what it keeps.

A fit allocates and frees the same large tensors every epoch. glibc's defaults return
blocks above its mmap threshold to the kernel on ``free`` and trim the heap top after each
epoch, so the next epoch faults the same pages in again: on a 50k-node GAT that was about
250k page faults an epoch and a third of the fit's CPU in the kernel, which a plain
single-process run (whose threshold has adapted upwards by then) does not pay. A service
therefore keeps freed memory in its heap while it computes (one arena, no mmap'd blocks,
no automatic trim) and gives it back between calls, once the high-water mark of the call
is read. Elsewhere than glibc both functions do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

# mallopt parameters (glibc malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
_NEVER_TRIM = 2**31 - 1  # the largest int mallopt takes: the heap top is trimmed only by malloc_trim

_log = logging.getLogger("nodeground.allocator")


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


_LIBC = _libc()


def keep_freed_memory() -> bool:
    """Keep freed blocks in the heap between epochs; True where glibc accepted every setting.

    Called once at service start, before torch's threads allocate (one arena for all of them:
    the fit's tensors are large, and per-thread arenas would each keep their own free blocks).
    """
    if _LIBC is None:
        return False
    settings = ((_M_ARENA_MAX, 1), (_M_MMAP_MAX, 0), (_M_TRIM_THRESHOLD, _NEVER_TRIM))
    accepted = all(_LIBC.mallopt(param, value) == 1 for param, value in settings)
    if not accepted:
        _log.warning("glibc refused a malloc setting; freed memory may be returned and faulted in again each epoch")
    return accepted


def release_freed_memory() -> None:
    """Return the heap's free pages to the kernel (between calls, so the next call's peak starts from what is held)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
