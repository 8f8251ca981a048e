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
# Node/edge/class counts: Cora and CiteSeer from PyG's Planetoid table (2,708 nodes / 10,556
# directed edges = 5,278 undirected; 3,327 / 9,104 = 4,552), the Heterophilous graphs from
# Platonov et al. 2023 ("A critical look at the evaluation of GNNs under heterophily", ICLR 2023:
# Table 1 for minesweeper and tolokers, the appendix's statistics of the deduplicated classic
# datasets for the others), which are also the edge counts of the published .npz files.
# Adjusted homophily: Platonov et al. 2023, Table 1 (minesweeper 0.01, tolokers 0.09) and
# Platonov et al. 2022 ("Characterizing graph datasets for node classification:
# homophily-heterophily dichotomy and beyond"; Cora 0.77, CiteSeer 0.67). For the six
# deduplicated classic graphs (chameleon-filtered, squirrel-filtered, actor, cornell, texas,
# wisconsin) the values are those computed here from the published files with the paper's
# definition; they have not yet been checked against the paper's appendix table (the paper
# text was not available offline). Check and correct them when it is.
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
