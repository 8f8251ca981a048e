"""The tasks as the harness runs them: the catalog, a task's canonical graph and its fixed splits.

``load_task`` returns exactly what a method service is given in a sweep: the graph the harness canonicalises (edges
coalesced and made undirected, one self-loop per node), the labels remapped as it remaps them (classes too small to
stratify unlabelled, the rest numbered 0..C-1, -1 for a node without a valid label) and the regime's stratified
splits, as index arrays and as boolean masks, in plain numpy; ``Task.to_pyg`` gives the same as a PyG ``Data``, its
masks ``[N, S]`` with one column per split (PyG's convention for several splits). The graph comes from the
harness's own cache (npz files, never pickles), so a second load reads it back in milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from contract.errors import UserError
from orchestrator.data.graph import Graph
from orchestrator.data.registry import DatasetError, close_names, list_tasks, load_dataset, resolve_name
from orchestrator.data.splits import ALL_REGIMES, PUBLIC, REGIMES, SPLIT_INDICES, Split, graph_split
from orchestrator.records import primary_metric_name

if TYPE_CHECKING:
    import pandas as pd

    from nodeground.evaluation import Evaluator

DEFAULT_REGIME = "10/10/80"
PARTS = ("train", "val", "test")


class TaskError(ValueError, UserError):
    """A task, regime or split that does not exist; the message is one line naming the ones that do."""


def tasks() -> pd.DataFrame:
    """The catalog's tasks with their key statistics (as the catalog publishes them), the metric each is ranked on,
    and whether it loads on this machine now without a download (``local``)."""
    import pandas as pd

    frame = pd.DataFrame(list_tasks())
    return frame.assign(primary_metric=frame["task_type"].map(primary_metric_name))


def task_name(name: str) -> str:
    """The harness's name for a task name or alias; TaskError naming the closest ones (or all) otherwise."""
    try:
        return resolve_name(name)
    except DatasetError:
        close = close_names(str(name))
        if close:
            hint = f"did you mean {', '.join(close)}? (nodeground.tasks() lists the catalog)"
        else:
            hint = f"the catalog's tasks are {', '.join(list(tasks()['name']))}"
        raise TaskError(f"unknown task {name!r}; {hint}") from None


def check_regime(regime: str) -> str:
    """A label regime the harness splits by; TaskError naming them otherwise."""
    if regime not in ALL_REGIMES:
        raise TaskError(
            f"unknown regime {regime!r}; choose from {', '.join(ALL_REGIMES)} ({PUBLIC}: the source's own split)"
        )
    return regime


def check_split(split: Any, regime: str, published: int | None = None) -> int:
    """A split index of ``regime`` (0-4; of ``public``, those the source publishes, ``published`` of them when
    known); TaskError naming them otherwise."""
    count = len(SPLIT_INDICES) if published is None else min(published, len(SPLIT_INDICES))
    if isinstance(split, (bool, np.bool_)) or not isinstance(split, (int, np.integer)) or not 0 <= split < count:
        valid = ", ".join(map(str, range(count))) if count else "none: choose a regime from " + ", ".join(REGIMES)
        raise TaskError(f"split {split!r} does not exist for regime {regime}; splits: {valid}")
    return int(split)


def regime_splits(graph: Graph, regime: str) -> int:
    """How many splits a regime has on ``graph``: five, or the published ones (at most five) for ``public``."""
    return min(len(graph.public_splits), len(SPLIT_INDICES)) if regime == PUBLIC else len(SPLIT_INDICES)


@dataclass(frozen=True)
class Task:
    """A task's canonical graph and the splits asked for (``splits[i].train``, ``.val``, ``.test``: sorted node ids).

    ``masks`` (and ``train_mask``, ``val_mask``, ``test_mask``) are boolean: ``[N, S]`` with one column per split,
    or ``[N]`` when one split was asked for.
    """

    name: str
    regime: str
    x: np.ndarray  # node features, float32 [N, F]
    edge_index: np.ndarray  # canonical edges, int64 [2, E]: both directions of every edge, one self-loop per node
    y: np.ndarray  # labels 0..C-1, int64 [N]; -1 for a node without a valid label (in no split)
    num_classes: int
    task_type: str  # binary (ranked on AUROC) or multiclass (ranked on accuracy)
    splits: tuple[Split, ...]
    single: bool = False  # one split was asked for: masks are [N]

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    def masks(self) -> dict[str, np.ndarray]:
        """``train``, ``val`` and ``test`` as boolean masks: ``[N, S]``, or ``[N]`` for one split."""
        out = {}
        for part in PARTS:
            mask = np.zeros((self.num_nodes, len(self.splits)), dtype=bool)
            for column, split in enumerate(self.splits):
                mask[getattr(split, part), column] = True
            out[part] = mask[:, 0] if self.single else mask
        return out

    @property
    def train_mask(self) -> np.ndarray:
        return self.masks()["train"]

    @property
    def val_mask(self) -> np.ndarray:
        return self.masks()["val"]

    @property
    def test_mask(self) -> np.ndarray:
        return self.masks()["test"]

    @property
    def evaluator(self) -> Evaluator:
        """This task's evaluator: the harness's metrics, its primary metric first."""
        from nodeground.evaluation import Evaluator

        return Evaluator(self)

    def to_pyg(self) -> Any:
        """A PyG ``Data``: ``x``, ``edge_index``, ``y`` and the masks (copies: training never changes this task)."""
        import torch
        from torch_geometric.data import Data

        masks = {f"{part}_mask": torch.tensor(mask) for part, mask in self.masks().items()}
        return Data(x=torch.tensor(self.x), edge_index=torch.tensor(self.edge_index), y=torch.tensor(self.y), **masks)

    def __repr__(self) -> str:
        shown = ", ".join(str(s.index) for s in self.splits)
        return (
            f"Task({self.name!r}, regime={self.regime!r}, splits=[{shown}], nodes={self.num_nodes}, "
            f"features={self.x.shape[1]}, classes={self.num_classes}, {self.task_type})"
        )


def load_task(name: str, regime: str = DEFAULT_REGIME, split: int | None = None) -> Task:
    """Task ``name`` under ``regime`` (``10/10/80``, ``50/25/25`` or ``public``) with every one of its splits, or
    ``split`` alone; TaskError (one line, naming the valid ones) for a name, regime or split that does not exist.

    The dataset comes from the harness's cache, else its verified files (``NODEGROUND_MIRROR`` offline).
    """
    canonical = task_name(name)
    check_regime(regime)
    if split is not None:
        check_split(split, regime)  # before any loading: 0-4 is every regime's widest range
    graph = load_dataset(canonical)
    count = regime_splits(graph, regime)
    if count == 0:
        raise TaskError(f"{canonical} publishes no split; choose a regime from {', '.join(REGIMES)}")
    indices = [check_split(split, regime, count)] if split is not None else list(range(count))
    splits = tuple(graph_split(graph, regime, i) for i in indices)
    return Task(
        canonical,
        regime,
        graph.x,
        graph.edge_index,
        graph.y,
        graph.num_classes,
        graph.task_type,
        splits,
        split is not None,
    )
