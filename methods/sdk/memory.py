"""Memory a fit may still use, as the process's container sees it, and the one budget rule every family uses.

``psutil`` reports the host's RAM, but a method service usually runs in a
container whose cgroup caps it far lower (the sandbox's 4 GiB, compose's
limits): an estimate checked against host RAM would pass and the kernel would
then kill the service mid-call. So the headroom is the smaller of the host's
available RAM and the cgroup's limit minus what the cgroup already holds
(page cache that can be dropped, ``inactive_file``, is not counted as held).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Protocol

import psutil
import torch

from contract.cost import PriorError, ResourceCheck, check_sizes, cost_prior
from contract.families import load_family
from contract.settings import MEMORY_BUDGET_BYTES
from contract.wire import GraphBundle

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
        (
            root / "memory" / "memory.limit_in_bytes",
            root / "memory" / "memory.usage_in_bytes",
            root / "memory" / "memory.stat",
        ),
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


class ResourceError(Exception):
    """A configuration cannot fit in the memory available; raised before or instead of an OOM crash."""


BUDGET_ENV = MEMORY_BUDGET_BYTES.env
# A fit may plan on this fraction of the memory available on its device. Estimates count the
# dominant terms (activations, attention, weights), not the CUDA context, the allocator's
# fragmentation or the interpreter's heap; a quarter is left for those. One fraction for every
# family, so that an `oom` record means the same thing whichever method refused.
BUDGET_FRACTION = 0.75


def available_memory_bytes(device: torch.device) -> int:
    """Memory a fit may still use on ``device``: free GPU memory, or RAM within the container's limit."""
    if device.type == "cuda" and torch.cuda.is_available():
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    return available_ram_bytes()


def memory_budget_bytes(device: torch.device) -> int:
    """What a fit may plan on: ``NODEGROUND_MEMORY_BUDGET_BYTES`` when set.

    Else ``BUDGET_FRACTION`` of the available memory.
    """
    explicit = MEMORY_BUDGET_BYTES.read()  # checked at the service's start (contract.settings)
    if explicit is not None:
        return int(explicit)
    return int(available_memory_bytes(device) * BUDGET_FRACTION)


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def require_memory(
    method: str,
    estimate: float | Mapping[str, float],
    device: torch.device,
    what: str,
    info: dict[str, Any] | None = None,
) -> None:
    """Raise ``ResourceError`` when ``estimate`` bytes (a total, or named parts) exceed the memory budget.

    Called before building what grows faster than the graph (quadratic
    attention, wide LSTM readouts, in-context inference), so the caller gets a
    refusal with numbers (an ``oom`` record) instead of a killed process.
    With ``info`` (a fit's ``ctx.info``) the estimate and the budget are reported too.
    """
    total = float(sum(estimate.values())) if isinstance(estimate, Mapping) else float(estimate)
    budget = memory_budget_bytes(device)
    if info is not None:
        info["memory_estimate_bytes"] = int(total)
        info["memory_budget_bytes"] = int(budget)
    if total <= budget:
        return
    parts = (
        ": " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in estimate.items()) if isinstance(estimate, Mapping) else ""
    )
    source = (
        BUDGET_ENV
        if os.environ.get(BUDGET_ENV)
        else f"{BUDGET_FRACTION:.0%} of the {fmt_bytes(budget / BUDGET_FRACTION)} free"
    )
    raise ResourceError(
        f"{method}: {what} needs about {fmt_bytes(total)} on {device.type} (estimated{parts}), over the memory "
        f"budget of {fmt_bytes(budget)} ({source}); refused before running: choose a smaller configuration or a "
        "larger device"
    )


class Named(Protocol):
    """A method, as its resource check needs it: its name (the manifest's ``[cost.<name>]``)."""

    name: ClassVar[str]


@functools.cache
def _declared_check(folder: Path, method: str) -> ResourceCheck:
    check = cost_prior(method, load_family(folder)).check
    if check is None:
        raise PriorError(
            f"methods/{folder.name}/manifest.toml: {method} checks its memory, but its [cost] declares no check"
        )
    return check


def declared_check(method: type[Named]) -> ResourceCheck:
    """What ``method``'s resource check refuses on, as its family's manifest declares it (``[cost]``'s ``check``,
    read by ``contract.cost``): the family is the folder of the module that defines the class."""
    module = sys.modules[method.__module__].__file__
    assert module is not None, method
    return _declared_check(Path(module).resolve().parent, method.name)


def declared_bytes(method: type[Named], graph: GraphBundle, config: Mapping[str, Any]) -> float:
    """The bytes ``method``'s declared check counts on ``graph`` under ``config``."""
    sizes = check_sizes(graph.num_nodes, graph.edge_index.shape[1], graph.features.shape[1], graph.num_classes)
    return declared_check(method).bytes(sizes, config)


def require_declared_memory(
    method: Named, graph: GraphBundle, config: Mapping[str, Any], device: torch.device, what: str
) -> None:
    """``require_memory`` on the bytes the family's manifest declares for ``method`` (one home for a method's
    memory model: the price reads the same terms); nothing to check where they come to zero (a part not built)."""
    estimate = declared_bytes(type(method), graph, config)
    if estimate:
        require_memory(method.name, estimate, device, what)
