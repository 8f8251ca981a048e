"""Calibration graphs: named by their size, made on demand, bounded, never a user dataset's name."""

from __future__ import annotations

import pytest

from orchestrator.data.registry import DatasetError, dataset_size, is_builtin_name, load_dataset, resolve_name


def test_a_calibration_graph_is_its_name_and_the_estimate_reads_its_size_without_making_it(monkeypatch):
    import orchestrator.data.synthetic as synthetic

    name = "calibration-n2000-d8-f16-c4"
    assert resolve_name("Calibration-N2000-D8-F16-C4") == name
    made = []
    monkeypatch.setattr(synthetic, "sbm_graph", lambda *a, **k: made.append(1))
    size = dataset_size(name)
    assert (size.nodes, size.edges, size.features, size.classes) == (2000, 8000, 16, 4)
    assert made == []
    monkeypatch.undo()
    graph = load_dataset(name)
    assert graph.num_nodes == 2000 and graph.x.shape[1] == 16 and graph.num_classes == 4
    assert abs((graph.edge_index.shape[1] - 2000) / 2 - 8000) < 80  # repeated draws are rare at this degree
    assert load_dataset(name).content_hash == graph.content_hash


@pytest.mark.parametrize(
    "name, message",
    [
        ("calibration-n100000000-d8-f16-c4", "nodes 100,000,000 > 2,000,000"),
        ("calibration-n2000000-d8-f1000-c4", "nodes x features"),
        ("calibration-n2000-d8-f16-c1", "at least 2 classes"),
        ("calibration-big", "is named calibration-n<nodes>-d<degree>-f<features>-c<classes>"),
    ],
)
def test_a_calibration_name_beyond_the_limits_is_one_line(name, message):
    with pytest.raises(DatasetError, match=message) as caught:
        resolve_name(name)
    assert "\n" not in str(caught.value)


def test_no_user_dataset_may_take_a_calibration_name():
    assert is_builtin_name("calibration-n1000-d4-f8-c2") and is_builtin_name("calibration-anything")
