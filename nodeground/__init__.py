"""NodeGround from a researcher's own code: the tasks, their splits, the evaluator, an in-process run, the comparison.

``import nodeground`` loads none of what these need (torch, gRPC, pandas, the readers): each name below is imported
from its module the first time it is used, so the import itself stays in milliseconds and never touches torch or
the network. The package composes the two sides of the harness, which never import each other: the orchestrator's
catalog, splits, metrics, sweep and report, and the method SDK's servicer (docs/library.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "IN_PROCESS",
    "Evaluator",
    "InProcessRun",
    "Leaderboard",
    "Task",
    "TaskError",
    "compare",
    "load_task",
    "run",
    "tasks",
]

#: Which module of the package defines each public name.
_HOMES = {
    "Task": "catalog",
    "TaskError": "catalog",
    "load_task": "catalog",
    "tasks": "catalog",
    "Evaluator": "evaluation",
    "IN_PROCESS": "inprocess",
    "InProcessRun": "inprocess",
    "run": "inprocess",
    "Leaderboard": "leaderboard",
    "compare": "leaderboard",
}

if TYPE_CHECKING:
    from nodeground.catalog import Task, TaskError, load_task, tasks
    from nodeground.evaluation import Evaluator
    from nodeground.inprocess import IN_PROCESS, InProcessRun, run
    from nodeground.leaderboard import Leaderboard, compare


def __getattr__(name: str) -> Any:
    """A public name, imported from its module when first asked for (then kept here)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'nodeground' has no attribute {name!r}; it offers {', '.join(__all__)}")
    value = getattr(importlib.import_module(f"nodeground.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
