"""Fidelity of our GraphAny, RGVT and Node4All against the accuracies their authors published.

Run: ``NODEGROUND_MIRROR=../shared/mirror pytest -m fidelity tests/fidelity/test_gfm_fidelity.py -s``
(NODEGROUND_WEIGHTS defaults to the mirror here). Each model runs with the
official checkpoint, its default configuration, on the mirror's datasets with
their published splits, under the evaluation protocol of its paper; the table
printed per model is the evidence. The check: mean absolute gap to the published
numbers over the datasets both have, at most 1.5 points.

Knobs (the full protocol is slow on CPU): NODEGROUND_FIDELITY_DATASETS (comma
list), NODEGROUND_FIDELITY_SPLITS (runs per dataset for Node4All, default 10 as
in the paper).

Published numbers and protocols
-------------------------------
GraphAny (Zhao et al., ICLR 2025; github.com/DeepGraphLearning/GraphAny README,
"Inference Using Pre-trained Checkpoints"): the Arxiv-trained checkpoint on the
Planetoid public splits gives Cora 79.4 and CiteSeer 68.4 test accuracy. The
paper's per-dataset table was not reachable offline; its heterophilous numbers
also use other dataset versions (DGL Cornell/Wisconsin, texas_4_classes, and
the original, unfiltered chameleon and squirrel, where our catalog has the
filtered ones), so only Cora and CiteSeer are compared.

Node4All (Lee and Yoo, KDD 2026; github.com/dooho00/node4all,
docs/full_exp_results.pdf, Table 1 on page 1, repeated in Table 2 on page 2,
row "Node4All", mean ± std over 10 splits: the 10 published masks for the
Heterophilous files, the public split with 10 seeds for Planetoid): Actor 31.93,
Chameleon (filtered) 42.99, CiteSeer 71.45, Cora 80.57, Cornell 62.97, Squirrel
(filtered) 42.50, Texas 75.52, Wisconsin 76.27 (checked together: mean |gap| over
the eight), and the two binary datasets, also as test accuracy and checked one
by one: Minesweeper 79.94 ± 0.17, Tolokers 79.28 ± 0.60. Their majority classes
hold 80.0% and 78.2% of the nodes: the paper's heads barely beat, or do not beat,
predicting the majority class, so a head stuck on the majority class also lands
within the tolerance on Minesweeper; what the binary check catches is a head that
is worse than that (a random or inverted one, or one kept from too early an epoch).
Like the paper, the tests select the head's epoch on validation accuracy
(``selection = "val_accuracy"``); NodeGround's sweeps select on validation loss
instead. For the binary datasets the table also prints the test AUROC, which is
not published.
Upstream's Texas is the collection's texas_4_classes.npz (in the mirror): the
same features, edges and labels as texas.npz, with the one node of the
single-node class (label 1) taken out of all 10 train/val/test masks
(tests/orchestrator/data/test_mirror_loads.py checks that relation). The test evaluates
Texas on that file's masks; RGVT's loader uses the same file.
Upstream embeds each graph once and trains one head per split (seed derived per
split); the test likewise reuses the frozen embeddings across splits.

RGVT ("View Space", ICML 2026; arXiv 2512.11561): no per-dataset accuracy table
is published in a form reachable here, only group averages (e.g. RGVT+MLP 71.13
on average over 27 graphs, GraphAny 64.3-64.7 on the same ones). Its fidelity
is therefore established in two parts, and the question is closed:
(1) numerical equivalence of the port with upstream's own code path, run
beside it outside this repository (upstream code is not redistributed here):
outputs agree to 2e-7, and (2) our
accuracies under upstream's protocol, reported here, not pinned: encoder
pretrained on ogbn-arxiv and frozen, checkpoint seed 42, split 0 of a
Heterophilous file's masks (Texas: texas_4_classes), the Planetoid public
split for Cora/CiteSeer, head epochs and recurrence depth 1-8 chosen on
validation accuracy (``selection = "val_accuracy"``). The paper's 27 benchmarks
include Minesweeper and Tolokers (upstream evaluates them on split 0 of the
published masks, like the other Heterophilous files), which are run here too;
no per-dataset number for them is published where we could read it (the
arXiv HTML of 2512.11561, the ICML 2026 poster page and upstream's repository,
github.com/dooho00/graph-view-space at e297de99d9a1, give group averages only).
The assertions: each accuracy clears uniform guessing, and on the binary
datasets, where uniform guessing says nothing, each accuracy is at least the
test mask's majority-class share less the tolerance: a head selected on
validation accuracy that does worse than predicting the majority class is
broken. The printed AUROC says more than either.
"""

from __future__ import annotations

import dataclasses
import os
import time

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from contract.wire import make_bundle
from methods.sdk.method import FitContext

# Node4All's full protocol (8 datasets x 10 splits) takes hours on a small CPU: far above the
# suite-wide per-test timeout.
pytestmark = [pytest.mark.fidelity, pytest.mark.timeout(4 * 3600)]

PUBLISHED = {
    "graphany": {"cora": 79.4, "citeseer": 68.4},
    "node4all": {
        "actor": 31.93,
        "chameleon-filtered": 42.99,
        "citeseer": 71.45,
        "cora": 80.57,
        "cornell": 62.97,
        "squirrel-filtered": 42.50,
        "texas": 75.52,
        "wisconsin": 76.27,
    },
}
# Node4All on the binary datasets: (mean, std) test accuracy over the 10 published masks, full_exp_results.pdf Table 1.
NODE4ALL_BINARY = {"minesweeper": (79.94, 0.17), "tolokers": (79.28, 0.60)}
RGVT_DATASETS = (
    "texas",
    "cornell",
    "wisconsin",
    "cora",
    "citeseer",
    "chameleon-filtered",
    "squirrel-filtered",
    "actor",
    "minesweeper",
    "tolokers",
)
UPSTREAM_SELECTION = {"selection": "val_accuracy"}  # RGVT's and Node4All's papers select on validation accuracy
TOLERANCE = 1.5


@pytest.fixture(autouse=True)
def _weights(mirror, monkeypatch):
    monkeypatch.setenv("NODEGROUND_WEIGHTS", os.environ.get("NODEGROUND_WEIGHTS") or str(mirror))
    torch.set_num_threads(int(os.environ.get("NODEGROUND_THREADS", "2")))


def _datasets(default) -> list[str]:
    chosen = os.environ.get("NODEGROUND_FIDELITY_DATASETS")
    return [d for d in chosen.split(",") if d in default] if chosen else list(default)


# Cache entries that depend on features and edges only (frozen-encoder outputs), so they may
# be handed from one split's bundle to the next; everything else is rebuilt per bundle.
LABEL_FREE_CACHE = ("node4all-embeddings", "gvt-representations")


def _upstream_graph(name: str):
    """The mirror's dataset as Node4All's and RGVT's loaders see it: Texas on texas_4_classes.npz's masks."""
    from orchestrator.data.registry import load_dataset
    from tests.fidelity.fidelity_data import TEXAS_4_CLASSES, load_npz_masks

    graph = load_dataset(name)
    return (
        dataclasses.replace(graph, public_splits=tuple(load_npz_masks(TEXAS_4_CLASSES))) if name == "texas" else graph
    )


def _run(method, graph, runs: list[int], config: dict) -> tuple[list[float], list[float], float]:
    """Test accuracy (and AUROC on binary tasks) per run, each printed with its fit and predict time.

    Run i uses published partition i when there are several, else partition 0 with seed i.
    """
    accs, aurocs, started, bundle = [], [], time.perf_counter(), None
    for i in runs:
        train, val, test = graph.public_splits[i if len(graph.public_splits) > 1 else 0]
        if bundle is None or len(graph.public_splits) > 1:
            labels = np.full(graph.num_nodes, -1, dtype=np.int64)
            labels[train], labels[val] = graph.y[train], graph.y[val]
            previous, bundle = bundle, make_bundle(graph.x, graph.edge_index, labels, graph.num_classes)
            if previous is not None:
                bundle.cache.update({k: v for k, v in previous.cache.items() if k[0] in LABEL_FREE_CACHE})
        ctx = FitContext(seed=i, device=torch.device("cpu"))
        fit_started = time.perf_counter()
        m = method()
        state = m.fit(bundle, train, val, m.resolve_config(config), ctx)
        assert ctx.info["weights_official"] is True
        probs = m.predict(state, bundle)
        accs.append(float((probs[test].argmax(1) == graph.y[test]).mean() * 100))
        if graph.num_classes == 2:
            aurocs.append(float(roc_auc_score(graph.y[test], probs[test, 1]) * 100))
        print(
            f"  {i}: accuracy {accs[-1]:.2f}"
            + (f", AUROC {aurocs[-1]:.2f}" if aurocs else "")
            + f", best epoch {ctx.info['best_epoch']}/{ctx.info['epochs']}"
            + f", {time.perf_counter() - fit_started:.1f}s"
            + _embed_detail(ctx.info),
            flush=True,
        )
    return accs, aurocs, time.perf_counter() - started


def _embed_detail(info: dict) -> str:
    """The frozen encoder's share of a fit, on the run that computed it (later runs reuse it)."""
    seconds = info.get("embed_seconds")
    return "" if seconds is None or info.get("embeddings_cached") else f" (encoder {seconds:.1f}s)"


def _auroc_detail(aurocs: list[float]) -> str:
    return f", test AUROC {np.mean(aurocs):.2f}" if aurocs else ""


def _report(model: str, rows: list[tuple[str, float, float | None, str]]) -> None:
    print(f"\n{model}: dataset, ours, published, gap, detail")
    gaps = []
    for name, ours, published, detail in rows:
        gap = None if published is None else ours - published
        if gap is not None:
            gaps.append(gap)
        print(
            f"  {name:20s} {ours:6.2f} {'' if published is None else f'{published:6.2f}':>6} "
            f"{'' if gap is None else f'{gap:+6.2f}':>6}  {detail}"
        )
    if gaps:
        print(
            f"  mean |gap| {np.mean(np.abs(gaps)):.2f} over {len(gaps)} datasets (mean signed gap "
            f"{np.mean(gaps):+.2f}); tolerance {TOLERANCE}"
        )
        assert np.mean(np.abs(gaps)) <= TOLERANCE


def test_graphany_fidelity():
    from methods.graphany import GraphAny
    from orchestrator.data.registry import load_dataset

    rows = []
    for name in _datasets(PUBLISHED["graphany"]):
        accs, _, seconds = _run(GraphAny, load_dataset(name), [0], {"checkpoint": "arxiv"})
        rows.append((name, accs[0], PUBLISHED["graphany"][name], f"arxiv checkpoint, public split, {seconds:.1f}s"))
    _report("GraphAny", rows)


def test_node4all_fidelity():
    from methods.node4all import Node4All

    runs = list(range(int(os.environ.get("NODEGROUND_FIDELITY_SPLITS", "10"))))
    rows = []
    for name in _datasets(PUBLISHED["node4all"]):
        accs, aurocs, seconds = _run(Node4All, _upstream_graph(name), runs, UPSTREAM_SELECTION)
        rows.append(
            (
                name,
                float(np.mean(accs)),
                PUBLISHED["node4all"][name],
                f"{len(accs)} runs, std {np.std(accs):.2f}{_auroc_detail(aurocs)}, {seconds:.0f}s",
            )
        )
        print(rows[-1], flush=True)
    _report("Node4All", rows)


@pytest.mark.parametrize("name", sorted(NODE4ALL_BINARY))
def test_node4all_binary_fidelity(name: str):
    """Each binary dataset on its own: a mean over ten datasets would hide one that is off."""
    from methods.node4all import Node4All

    if name not in _datasets(NODE4ALL_BINARY):
        pytest.skip(f"{name} not in NODEGROUND_FIDELITY_DATASETS")
    runs = list(range(int(os.environ.get("NODEGROUND_FIDELITY_SPLITS", "10"))))
    accs, aurocs, seconds = _run(Node4All, _upstream_graph(name), runs, UPSTREAM_SELECTION)
    published, published_std = NODE4ALL_BINARY[name]
    _report(
        "Node4All",
        [
            (
                name,
                float(np.mean(accs)),
                published,
                f"{len(accs)} runs, std {np.std(accs):.2f} (published {published_std:.2f})"
                f"{_auroc_detail(aurocs)}, {seconds:.0f}s",
            )
        ],
    )


def test_gvt_fidelity():
    from methods.gvt import RGVT

    rows, floors = [], {}
    for name in _datasets(RGVT_DATASETS):
        graph = _upstream_graph(name)
        accs, aurocs, seconds = _run(RGVT, graph, [0], UPSTREAM_SELECTION)
        rows.append((name, accs[0], None, f"split 0, seed-42 checkpoint{_auroc_detail(aurocs)}, {seconds:.0f}s"))
        print(rows[-1], flush=True)
        # on a binary task uniform guessing says nothing: the head must not do worse than the majority class
        floors[name] = (
            _majority_share(graph.y[graph.public_splits[0][2]]) - TOLERANCE
            if graph.num_classes == 2
            else 100.0 / graph.num_classes
        )
    _report("RGVT", rows)
    for name, ours, _, _ in rows:
        assert ours > floors[name], f"RGVT on {name}: {ours:.2f} is not above {floors[name]:.2f}"


def _majority_share(labels: np.ndarray) -> float:
    """Test accuracy of always predicting the most frequent class, in percent."""
    return float(np.bincount(labels).max() / len(labels) * 100)
