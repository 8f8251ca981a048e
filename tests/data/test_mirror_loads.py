"""Real upstream files from the offline mirror: load, verify, and match published statistics."""

from __future__ import annotations

import time

import numpy as np
import pytest

from orchestrator.data.cache import canonical_dir
from orchestrator.data.registry import catalog, load_dataset
from orchestrator.data.splits import graph_split
from orchestrator.data.stats import dataset_stats

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
# NOT verified against a publication (the pinned value is the one computed here from the
# published files with the paper's definition; rows in H_ADJ_UNVERIFIED below):
# - citeseer 0.67. Platonov et al. 2022 report a CiteSeer value, but its table could not be read
#   with the offline tools. Note: the Planetoid file has 124 self-loops; with them counted as
#   edges (as a networkx or DGL graph built from the raw file would) h_adj is 0.68, without them
#   (our definition, and PyG's edge list) 0.67.
# - chameleon-filtered 0.03, squirrel-filtered 0.01, cornell -0.22, texas -0.29, wisconsin -0.17:
#   no published table of adjusted homophily for these versions of the graphs was found. Values
#   in Platonov et al. 2022 for chameleon/squirrel (if any) are of the unfiltered graphs, and
#   values for cornell/texas/wisconsin would be of the Geom-GCN edge lists (self-loops and
#   repeats), so they need not agree with these files even at two decimals.
# The computation itself was checked against the authors' reference definition: on these files
# (no self-loops, no repeated pairs, every node labeled) the degree-weighted formula gives the
# same numbers whether or not self-loops are dropped.
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
# Adjusted-homophily values above that are our own computation, not a sourced published number.
H_ADJ_UNVERIFIED = {"citeseer", "chameleon-filtered", "squirrel-filtered", "cornell", "texas", "wisconsin"}
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


def test_unverified_homophily_rows_are_named():
    # every row is either sourced (see the comment above PUBLISHED) or listed as unverified
    assert H_ADJ_UNVERIFIED <= set(PUBLISHED)
    assert set(PUBLISHED) - H_ADJ_UNVERIFIED == {"cora", "actor", "minesweeper", "tolokers"}


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


def test_second_load_comes_from_the_content_cache(mirror_cache):
    first = load_dataset("tolokers")
    assert len(list(canonical_dir().glob("*.npz"))) >= 1
    start = time.perf_counter()
    again = load_dataset("tolokers")
    elapsed = time.perf_counter() - start
    assert again.content_hash == first.content_hash
    assert len(again.public_splits) == len(first.public_splits)
    assert elapsed < 2.0, f"cached load took {elapsed:.2f}s"
