"""Memory a fit may still use, as the process's container sees it.

``psutil`` reports the host's RAM, but a method service usually runs in a
container whose cgroup caps it far lower (the sandbox's 4 GiB, compose's
limits): an estimate checked against host RAM would pass and the kernel would
then kill the service mid-call. So the headroom is the smaller of the host's
available RAM and the cgroup's limit minus what the cgroup already holds
(page cache that can be dropped, ``inactive_file``, is not counted as held).
"""

from __future__ import annotations

from pathlib import Path

import psutil

CGROUP_ROOT = Path("/sys/fs/cgroup")
_NO_LIMIT = 1 << 60  # cgroup v1 writes a number near 2**63 for "no limit"


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return None if value >= _NO_LIMIT else value


def _inactive_file(stat: Path) -> int:
    try:
        for line in stat.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key in ("inactive_file", "total_inactive_file"):
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def cgroup_headroom_bytes(root: Path = CGROUP_ROOT) -> int | None:
    """Bytes left under this cgroup's memory limit (v2 or v1); None when there is no limit."""
    for limit_file, usage_file, stat_file in (
        (root / "memory.max", root / "memory.current", root / "memory.stat"),
        (root / "memory" / "memory.limit_in_bytes", root / "memory" / "memory.usage_in_bytes", root / "memory" / "memory.stat"),
    ):
        limit = _read_int(limit_file)
        if limit is None:
            continue
        used = (_read_int(usage_file) or 0) - _inactive_file(stat_file)
        return max(0, limit - max(0, used))
    return None


def available_ram_bytes(root: Path = CGROUP_ROOT) -> int:
    """Available RAM, capped by the cgroup's headroom when the process runs under a memory limit."""
    available = int(psutil.virtual_memory().available)
    headroom = cgroup_headroom_bytes(root)
    return available if headroom is None else min(available, headroom)
