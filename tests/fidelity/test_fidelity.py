"""Faithfulness of our implementations: published splits, the papers' hyperparameters, published scores.

In-process through the SDK (the same ``fit``/``predict`` a service runs), on
the device the SDK picks. Each check averages 5 seeds (for the Heterophilous
graphs: the first 5 of the 10 published masks, seed = mask index) and must
land within the stated distance of the published number.

Cora (Planetoid public split, row-normalized features as in the papers),
test accuracy:
  GCN 81.5 (Kipf & Welling, ICLR 2017, Table 2), GAT 83.0 (Veličković et al.,
  ICLR 2018, Table 2), APPNP 83.3 (as reproduced on this split by PyG's
  citation benchmark), GCNII 85.5 (Chen et al., ICML 2020, Table 2); within 1.5.

minesweeper and tolokers (Platonov et al., "A critical look at the evaluation
of GNNs under heterophily", ICLR 2023, Table 4, ROC-AUC, test mean ± std over
the 10 published masks):
  minesweeper: GCN 89.75 ± 0.52, SAGE 93.51 ± 0.57, GAT 92.01 ± 0.68
  tolokers:    GCN 83.64 ± 0.67, SAGE 82.43 ± 0.44, GAT 83.70 ± 0.47
within 2 points. Source: the authors' saved experiment output,
notebooks/results.ipynb in github.com/yandex-research/heterophilous-graphs at
commit a431395 (the same file also gives roman-empire accuracy GCN 73.69,
SAGE 85.74, GAT 80.87 and amazon-ratings GCN 48.70, SAGE 53.63, GAT 49.09;
those graphs are not in the mirror). Last full run of the GAT tolokers check
(2026-11-29, 5 masks, CPU, 3,325 s): 84.48 ± 0.57 (runs 83.39, 84.69, 85.04,
84.60, 84.70), |Δ| 0.78 from 83.70.
Their models are 512 wide with up to 5 residual layers,
LayerNorm, GELU and dropout 0.2, trained 1000 steps at lr 3e-5 on a GPU. To
keep this suite runnable on a CPU we keep those ingredients (residual
connections, LayerNorm, GELU, dropout 0.2, a linear head) at 64 wide, 3
layers, lr 0.01 and at most 150 epochs with early stopping on validation loss.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from methods.gnn import APPNP, GAT, GCN, GCNII, GraphSAGE
from methods.sdk.method import FitContext, pick_device
from tests.fidelity.fidelity_data import FidelityData, bundle_for, cora_public, heterophilous

# Several minutes per check on a CPU: above the suite-wide per-test timeout.
pytestmark = [pytest.mark.fidelity, pytest.mark.timeout(7200)]

SEEDS = 5

CORA = {
    # method: (class, paper hyperparameters, published accuracy)
    "gcn": (
        GCN,
        dict(
            hidden=16,
            num_layers=2,
            dropout=0.5,
            input_dropout=0.5,
            lr=0.01,
            weight_decay=5e-4,
            max_epochs=200,
            patience=200,
        ),
        81.5,
    ),
    "gat": (
        GAT,
        dict(
            hidden=64,
            heads=8,
            out_heads=1,
            dropout=0.6,
            input_dropout=0.6,
            attn_dropout=0.6,
            activation="elu",
            lr=0.005,
            weight_decay=5e-4,
            max_epochs=1000,
            patience=100,
        ),
        83.0,
    ),
    "appnp": (
        APPNP,
        dict(
            hidden=64,
            num_layers=2,
            dropout=0.5,
            input_dropout=0.5,
            K=10,
            alpha=0.1,
            lr=0.01,
            weight_decay=5e-4,
            max_epochs=1000,
            patience=100,
        ),
        83.3,
    ),
    "gcnii": (
        GCNII,
        dict(
            hidden=64,
            num_layers=64,
            alpha=0.1,
            theta=0.5,
            dropout=0.6,
            lr=0.01,
            weight_decay=5e-4,
            conv_weight_decay=0.01,
            max_epochs=1500,
            patience=100,
        ),
        85.5,
    ),
}

HETERO_COMMON = dict(
    hidden=64,
    num_layers=3,
    residual=True,
    norm="layer",
    jk="last",
    activation="gelu",
    dropout=0.2,
    input_dropout=0.0,
    lr=0.01,
    weight_decay=1e-7,
    max_epochs=150,
    patience=50,
)
HETERO = {
    "gcn": (GCN, {}, {"minesweeper": 89.75, "tolokers": 83.64}),
    "graphsage": (GraphSAGE, {}, {"minesweeper": 93.51, "tolokers": 82.43}),
    "gat": (GAT, dict(heads=4, out_heads=1, attn_dropout=0.2), {"minesweeper": 92.01, "tolokers": 83.70}),
}

_cache: dict[str, FidelityData] = {}


def _data(name: str) -> FidelityData:
    if name not in _cache:
        _cache[name] = cora_public() if name == "cora" else heterophilous(name, SEEDS)
    return _cache[name]


def _run(method, config: dict, data: FidelityData, score) -> list[float]:
    device = pick_device(method.capabilities.uses_gpu)
    config = method.resolve_config(config)
    scores = []
    for seed in range(SEEDS):
        split = data.splits[seed % len(data.splits)]
        bundle = data.bundle if len(data.splits) == 1 else bundle_for(data, split)
        state = method().fit(bundle, split.train, split.val, config, FitContext(seed=seed, device=device))
        probs = method().predict(state, bundle)
        scores.append(score(data.labels[split.test], probs[split.test]))
    return scores


def _accuracy(y: np.ndarray, probs: np.ndarray) -> float:
    return float((probs.argmax(1) == y).mean() * 100)


def _auroc(y: np.ndarray, probs: np.ndarray) -> float:
    return float(roc_auc_score(y, probs[:, 1]) * 100)


def _report(name: str, dataset: str, scores: list[float], published: float, tolerance: float, seconds: float) -> None:
    mean = float(np.mean(scores))
    print(
        f"\nFIDELITY {name:10s} {dataset:12s} mean {mean:6.2f} ± {np.std(scores):4.2f} over {len(scores)} "
        f"(published {published:.2f}, |Δ| {abs(mean - published):.2f} ≤ {tolerance}) [{seconds:.0f}s] "
        f"runs {', '.join(f'{s:.2f}' for s in scores)}",
        flush=True,
    )
    assert abs(mean - published) <= tolerance, f"{name} on {dataset}: {mean:.2f} vs published {published:.2f}"


@pytest.mark.parametrize("name", list(CORA))
def test_cora_public_split(name: str) -> None:
    method, config, published = CORA[name]
    start = time.perf_counter()
    scores = _run(method, config, _data("cora"), _accuracy)
    _report(name, "cora", scores, published, 1.5, time.perf_counter() - start)


@pytest.mark.parametrize("dataset", ["minesweeper", "tolokers"])
@pytest.mark.parametrize("name", list(HETERO))
def test_heterophilous_published_masks(name: str, dataset: str) -> None:
    method, extra, published = HETERO[name]
    start = time.perf_counter()
    scores = _run(method, {**HETERO_COMMON, **extra}, _data(dataset), _auroc)
    _report(name, dataset, scores, published[dataset], 2.0, time.perf_counter() - start)
