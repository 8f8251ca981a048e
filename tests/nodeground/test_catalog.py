"""The tasks as the harness runs them: the graph, the labels and the splits a sweep uses, and one-line refusals of
a task, regime or split that does not exist."""

from __future__ import annotations

import numpy as np
import pytest

from contract.errors import UserError
from nodeground.catalog import TaskError, load_task, tasks
from orchestrator.data.registry import load_dataset
from orchestrator.data.registry import tasks as catalog_tasks
from orchestrator.data.splits import graph_split


def test_the_catalog_table_lists_every_task_with_its_statistics_and_metric():
    table = tasks()
    assert list(table["name"]) == [t["name"] for t in catalog_tasks()]
    assert {"source", "domain", "task_type", "nodes", "edges", "features", "classes", "local"} <= set(table.columns)
    assert set(table["primary_metric"]) == {"accuracy", "auroc"}
    assert (table.loc[table["task_type"] == "binary", "primary_metric"] == "auroc").all()


def test_a_task_is_the_sweeps_graph_and_every_split_of_its_regime():
    task = load_task("synthetic-tiny", "50/25/25")
    graph = load_dataset("synthetic-tiny")
    assert (task.num_classes, task.task_type, task.num_nodes) == (graph.num_classes, graph.task_type, graph.num_nodes)
    for array in ("x", "edge_index", "y"):
        np.testing.assert_array_equal(getattr(task, array), getattr(graph, array))
    masks = task.masks()
    assert {part: mask.shape for part, mask in masks.items()} == {p: (graph.num_nodes, 5) for p in masks}
    for index, split in enumerate(task.splits):
        expected = graph_split(graph, "50/25/25", index)
        for part in ("train", "val", "test"):
            np.testing.assert_array_equal(getattr(split, part), getattr(expected, part))
            np.testing.assert_array_equal(np.flatnonzero(masks[part][:, index]), getattr(expected, part))
    assert not (masks["train"] & masks["test"]).any() and not (masks["train"] & masks["val"]).any()


def test_one_split_gives_one_dimensional_masks_and_a_pyg_data_with_the_same_content():
    task = load_task("synthetic-tiny", split=3)
    assert [s.index for s in task.splits] == [3] and task.train_mask.shape == (task.num_nodes,)
    data = task.to_pyg()
    np.testing.assert_array_equal(data.train_mask.numpy(), task.train_mask)
    np.testing.assert_array_equal(data.y.numpy(), task.y)
    np.testing.assert_array_equal(data.x.numpy(), task.x)
    data.x[0, 0] += 1.0  # a copy: training on it never changes the task
    assert data.x[0, 0].item() != task.x[0, 0]


def test_the_public_regime_has_the_published_splits_at_most_five(mirror):
    task = load_task("texas", "public")
    assert [s.index for s in task.splits] == [0, 1, 2, 3, 4]
    assert task.test_mask.shape == (task.num_nodes, 5)
    assert (task.y[task.test_mask.any(axis=1)] >= 0).all()  # only labeled nodes are split


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("synthetic-tinny",), "did you mean synthetic-tiny"),
        (("zzzzzzzz",), "the catalog's tasks are actor, "),
        (("synthetic-tiny", "10/10"), "choose from 10/10/80, 50/25/25, public"),
        (("synthetic-tiny", "10/10/80", 5), "splits: 0, 1, 2, 3, 4"),
        (("synthetic-tiny", "10/10/80", "0"), "splits: 0, 1, 2, 3, 4"),
        (("synthetic-tiny", "public"), "publishes no split; choose a regime from 10/10/80, 50/25/25"),
    ],
)
def test_a_task_regime_or_split_that_does_not_exist_is_one_line_naming_the_valid_ones(args, named):
    with pytest.raises(TaskError) as caught:
        load_task(*args)
    assert isinstance(caught.value, UserError) and named in str(caught.value) and "\n" not in str(caught.value)
