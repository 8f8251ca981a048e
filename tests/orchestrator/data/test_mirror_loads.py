"""Real upstream files from the offline mirror: load, verify, and match published statistics."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.data import registry
from orchestrator.data.cache import canonical_dir
from orchestrator.data.registry import catalog, load_dataset
from orchestrator.data.splits import graph_split
from orchestrator.data.stats import dataset_stats
from tests.orchestrator.data.conftest import mirror_path

# name: (nodes, undirected edges without self-loops, classes, adjusted homophily to 2 decimals)
#
# Edge counts are undirected: each unordered pair {u, v}, u != v, once. Tables that count
# directed edges (PyG, DGL) list twice these numbers.
#
# Where each number comes from (found with the offline search tools):
#
# - cora, citeseer: nodes/edges/classes from PyG's Planetoid STATS table
#   (pyg-team/pytorch_geometric, torch_geometric/datasets/planetoid.py: Cora 2,708 nodes,
#   10,556 directed edges = 5,278 undirected, 7 classes; CiteSeer 3,327 / 9,104 = 4,552 / 6).
# - minesweeper, tolokers: nodes/edges/classes and adjusted homophily from Platonov et al. 2023
#   ("A critical look at the evaluation of GNNs under heterophily", ICLR 2023, Table 1), as
#   reproduced in the authors' repository README (github.com/yandex-research/heterophilous-graphs,
#   README.md: minesweeper 10,000 / 39,402 / 2 / h_adj 0.01; tolokers 11,758 / 519,000 / 2 /
#   h_adj 0.09; edges there are stored once per undirected pair). PyG's
#   HeterophilousGraphDataset STATS give the same counts; DGL's docs give 78,804 and 1,038,000
#   directed edges.
# - cora h_adj 0.77 and actor h_adj 0.00: Platonov et al. 2022 ("Characterizing graph datasets
#   for node classification: homophily-heterophily dichotomy and beyond", arXiv 2209.06177,
#   NeurIPS 2023), main-text table of dataset characteristics (cora: 7 classes, h_edge 0.81,
#   h_adj 0.77; actor: 5 classes, h_edge 0.22, h_adj 0.00), as reprinted in the summary post
#   github.com/shwchen/shwchen.github.io, _posts/2024-05-25-CharacterizeGD.md. Our h_edge agrees
#   too (0.8100 and 0.2167).
# - chameleon-filtered, squirrel-filtered, cornell, texas, wisconsin, actor: nodes/edges are those
#   of the published .npz files (yandex-research/heterophilous-graphs/data, each edge stored once,
#   no self-loops, no repeats). No paper table with these edge counts could be found offline; the
#   third-party README github.com/FINEort/Node-classification-in-heterogeneous-graphs lists the
#   same 890 / 8,854 and 2,223 / 46,998 for the filtered graphs. The commonly quoted edge
#   counts of cornell/texas/wisconsin/actor are of the Geom-GCN edge lists (directed, with
#   self-loops and repeats) and vary by source: PyG's Actor STATS 30,019; cornell/texas/wisconsin
#   298/325/515 in the FINEort README, 295/309/499 on the sheaf-mpnn docs page
#   (alessioborgi.github.io/sheaf-mpnn/guides/datasets.html). They describe another
#   representation, so they are not pinned; node and class counts (183/183/251/7,600 nodes,
#   5 classes) agree with all of them.
#
# - citeseer 0.67, chameleon-filtered 0.03, squirrel-filtered 0.01, cornell -0.22, texas -0.29,
#   wisconsin -0.17: verified by independent recomputation. Platonov et al. 2022's appendix
#   tables could not be read offline, so the six were recomputed from the official .npz and
#   Planetoid files outside this code base, with DGL's `adjusted_homophily` definition on the
#   undirected, de-duplicated graph without self-loops: citeseer 0.671, chameleon-filtered 0.030,
#   squirrel-filtered 0.009, cornell -0.220, texas -0.294, wisconsin -0.173 (and actor 0.003).
#   All agree with ours to two decimals, and the same recomputation reproduces the published
#   cora 0.77, actor 0.00, minesweeper 0.01 and tolokers 0.09. (The Planetoid CiteSeer file has
#   124 self-loops; counted as edges, as a graph built from the raw file would, h_adj is 0.68.)
PUBLISHED = {
    "cora": (2708, 5278, 7, 0.77),
    "citeseer": (3327, 4552, 6, 0.67),
    "chameleon-filtered": (890, 8854, 5, 0.03),
    "squirrel-filtered": (2223, 46998, 5, 0.01),
    "cornell": (183, 277, 5, -0.22),
    "texas": (183, 279, 5, -0.29),
    "wisconsin": (251, 450, 5, -0.17),
    "actor": (7600, 26659, 5, 0.00),
    "minesweeper": (10000, 39402, 2, 0.01),
    "tolokers": (11758, 519000, 2, 0.09),
}
# Adjusted-homophily values above that no publication reachable offline states: each was checked
# by the independent recomputation described above instead.
H_ADJ_RECOMPUTED = {"citeseer", "chameleon-filtered", "squirrel-filtered", "cornell", "texas", "wisconsin"}
# texas has one class with a single node; the protocol excludes classes too small to
# stratify (its nodes become unlabeled), so the canonical task has 4 classes. Homophily
# and class counts above are of the published 5-class labels.
EXCLUDED_CLASSES = {"texas": 1}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_loads_verifies_and_matches_published_counts(mirror_cache, name):
    nodes, edges, classes, h_adj = PUBLISHED[name]
    graph = load_dataset(name)
    stats = dataset_stats(graph)
    assert graph.num_nodes == nodes
    assert stats["num_edges"] == edges
    assert graph.num_classes == classes - EXCLUDED_CLASSES.get(name, 0)
    assert graph.task_type == catalog()[name]["task_type"]
    # canonical form: symmetric, exactly one self-loop per node, no repeats
    src, dst = graph.edge_index
    assert np.array_equal(np.sort(src * graph.num_nodes + dst), np.unique(dst * graph.num_nodes + src))
    assert int((src == dst).sum()) == graph.num_nodes
    assert graph.edge_index.shape[1] == 2 * edges + nodes


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_adjusted_homophily_matches_published(mirror_cache, name):
    graph = load_dataset(name)
    if name in EXCLUDED_CLASSES:  # homophily of the published labels, before the exclusion
        from orchestrator.data.loaders import LOADERS

        graph = LOADERS[catalog()[name]["loader"]](dict(catalog()[name]))
    assert round(dataset_stats(graph)["adjusted_homophily"], 2) == pytest.approx(PUBLISHED[name][3], abs=1e-9)


def test_every_homophily_row_has_a_source():
    # every row is either published (see the comment above PUBLISHED) or independently recomputed
    assert H_ADJ_RECOMPUTED <= set(PUBLISHED)
    assert set(PUBLISHED) - H_ADJ_RECOMPUTED == {"cora", "actor", "minesweeper", "tolokers"}


def test_public_splits_are_the_published_masks(mirror_cache):
    cora = load_dataset("cora")
    split = graph_split(cora, "public", 0)
    assert (split.train.size, split.val.size, split.test.size) == (140, 500, 1000)  # Planetoid's public split
    assert len(cora.public_splits) == 1
    tolokers = load_dataset("tolokers")
    assert len(tolokers.public_splits) == 10
    split = graph_split(tolokers, "public", 3)
    assert split.train.size + split.val.size + split.test.size == tolokers.num_nodes
    assert not set(split.train.tolist()) & set(split.test.tolist())


def test_second_load_comes_from_the_content_cache(mirror_cache, monkeypatch):
    first = load_dataset("tolokers")
    assert len(list(canonical_dir().glob("*.npz"))) >= 1

    def no_reader(entry):
        raise AssertionError(f"{entry['name']} was read again instead of coming from the cache")

    monkeypatch.setattr(registry, "run_loader", no_reader)
    again = load_dataset("tolokers")
    assert again.content_hash == first.content_hash
    assert len(again.public_splits) == len(first.public_splits)


# ---------------------------------------------------------------- Facebook100 (LINKX)
#
# The reference is LINKX's `load_fb100_dataset` (CUAI/Non-Homophily-Large-Scale, dataset.py):
# `local_info` columns are student/faculty, gender, major, second major, dorm, year, high school,
# with 0 for a missing entry; label = gender - 1 (so a missing gender is -1: unlabeled, outside
# every split); features = one-hot of every other column, one column per distinct value, the
# missing value 0 included, columns in that order. `_reference_fb100` restates that rule on the
# raw .mat file; our loader (PyG's LINKXDataset behind the catalog) must give the same tensors.
FB100 = {  # name: (mirror file, nodes, undirected edges, features, labeled nodes per class)
    "amherst41": ("Amherst41.mat", 2235, 90954, 1193, (1015, 1017)),
    "johnshopkins55": ("Johns%20Hopkins55.mat", 5180, 186586, 2406, (2153, 2609)),
}
FB100_DIR = "github.com/CUAI/Non-Homophily-Large-Scale/raw/master/data/facebook100"


def _reference_fb100(path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import scipy.io

    mat = scipy.io.loadmat(path)
    info = mat["local_info"].astype(np.int64)
    labels = info[:, 1] - 1
    columns = [info[:, 0]] + [info[:, c] for c in range(2, info.shape[1])]
    one_hot = [(col[:, None] == np.unique(col)[None, :]).astype(np.float32) for col in columns]
    return np.hstack(one_hot), labels, mat["A"]


@pytest.mark.parametrize("name", sorted(FB100))
def test_facebook100_matches_the_linkx_reference_loader(mirror_cache, name):
    file, nodes, edges, features, per_class = FB100[name]
    x, y, adjacency = _reference_fb100(mirror_path() / FB100_DIR / file)
    graph = load_dataset(name)
    assert (graph.num_nodes, graph.x.shape[1], graph.num_classes, graph.task_type) == (nodes, features, 2, "binary")
    assert np.array_equal(graph.x, x)
    assert np.array_equal(graph.y, y)  # the missing gender stays -1: unlabeled
    assert tuple(np.bincount(graph.y[graph.y >= 0])) == per_class
    upper = {(min(u, v), max(u, v)) for u, v in zip(*adjacency.nonzero(), strict=True) if u != v}
    assert dataset_stats(graph)["num_edges"] == len(upper) == edges
    for regime in ("10/10/80", "50/25/25"):
        split = graph_split(graph, regime, 0)
        assert np.all(graph.y[np.concatenate([split.train, split.val, split.test])] >= 0)


# ---------------------------------------------------------------- texas_4_classes


def test_texas_4_classes_is_texas_without_its_one_node_class(mirror_cache):
    """Upstream GFM code evaluates on texas_4_classes.npz: texas.npz with the single node of class 1
    taken out of every mask (features, edges and labels unchanged). The GFM fidelity test reads it."""
    from tests.fidelity.fidelity_data import TEXAS_4_CLASSES, load_npz_masks

    base = mirror_path() / "github.com/yandex-research/heterophilous-graphs/raw/main/data"
    with np.load(base / "texas.npz") as texas, np.load(base / "texas_4_classes.npz") as four:
        for key in ("node_features", "node_labels", "edges"):
            assert np.array_equal(texas[key], four[key]), key
        lone = np.flatnonzero(texas["node_labels"] == 1)
        assert lone.size == 1
        for key in ("train_masks", "val_masks", "test_masks"):
            expected = texas[key].copy()
            expected[:, lone] = False
            assert np.array_equal(four[key], expected), key
    splits = load_npz_masks(TEXAS_4_CLASSES)
    assert len(splits) == 10 and all(lone[0] not in np.concatenate(s) for s in splits)
