"""The memory a fit may use honours the container's cgroup limit, not only the host's RAM."""

from __future__ import annotations

from pathlib import Path

import psutil

from methods.sdk.memory import available_ram_bytes, cgroup_headroom_bytes

GiB = 1 << 30


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_cgroup_v2_limit_minus_held_memory_without_droppable_cache(tmp_path):
    root = _write(
        tmp_path,
        {
            "memory.max": f"{4 * GiB}\n",
            "memory.current": f"{3 * GiB}\n",
            "memory.stat": f"anon 100\ninactive_file {1 * GiB}\nactive_file 5\n",
        },
    )
    assert cgroup_headroom_bytes(root) == 2 * GiB


def test_cgroup_v1_limit(tmp_path):
    root = _write(
        tmp_path,
        {
            "memory/memory.limit_in_bytes": str(2 * GiB),
            "memory/memory.usage_in_bytes": str(GiB // 2),
            "memory/memory.stat": "total_inactive_file 0\n",
        },
    )
    assert cgroup_headroom_bytes(root) == 2 * GiB - GiB // 2


def test_no_limit_means_host_ram(tmp_path):
    assert cgroup_headroom_bytes(_write(tmp_path, {"memory.max": "max\n"})) is None
    assert cgroup_headroom_bytes(_write(tmp_path / "v1", {"memory/memory.limit_in_bytes": str(2**63 - 4096)})) is None
    assert cgroup_headroom_bytes(tmp_path / "absent") is None
    assert abs(available_ram_bytes(tmp_path / "absent") - psutil.virtual_memory().available) < GiB


def test_a_tight_container_caps_the_headroom(tmp_path):
    root = _write(tmp_path, {"memory.max": str(GiB), "memory.current": str(GiB - 4096)})
    assert available_ram_bytes(root) == 4096
    over = _write(tmp_path / "over", {"memory.max": str(GiB), "memory.current": str(2 * GiB)})
    assert available_ram_bytes(over) == 0
