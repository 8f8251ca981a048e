"""NodePFN (ICLR 2026) as a frozen-weight service: a PFN transformer with message
passing that classifies nodes in context, the training nodes being the context.

``fit`` does the official target-specific preprocessing — feature smoothing
with the GCN-normalised adjacency (``smoothing_steps``), truncated SVD to
``n_components`` (≤ 100, the model's input width), the ensemble's class
rotations, feature rotations and 'none'/'power' transforms — and checks the
memory estimate; ``predict`` runs the frozen transformer for every ensemble
configuration (in inference batches sized to the memory budget) and averages
the temperature-scaled logits, as upstream.

Limits, as upstream: at most 20 classes (the decoder's width; no output coding
upstream, so more classes are refused), at most 100 input features (SVD).
Rows of context (training) nodes are not predicted upstream; we return uniform rows.
"""

from __future__ import annotations

import itertools
import random
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sklearn.decomposition import TruncatedSVD
from sklearn.preprocessing import PowerTransformer

from contract.wire import GraphBundle
from methods.nodepfn.model import DEFAULT_ARCH, NodePFNNet, arch_from_config
from methods.sdk import (
    Capabilities,
    ChoiceParam,
    Config,
    FitContext,
    FrozenGFM,
    InputRefused,
    IntParam,
    attention_chunk,
    edge_array_without_self_loops,
    finish_probs,
    load_frozen,
    memory_budget_bytes,
    param_bytes,
    require_memory,
    safe_torch_load,
    seed_everything,
)

WEIGHTS_ID = "nodepfn-epoch30"
SOFTMAX_TEMPERATURE = 0.8  # upstream: logits / exp(log(0.8))
MAX_INFERENCE_BATCH = 32  # upstream batch_size_inference


def _load_state(files: dict) -> dict[str, Any]:
    ckpt = safe_torch_load(files[WEIGHTS_ID].path)
    if not (isinstance(ckpt, (tuple, list)) and len(ckpt) == 3):
        raise ValueError(f"{files[WEIGHTS_ID].path}: expected (state_dict, optimizer_state, config)")
    state, _opt, cfg = ckpt
    state = {
        k.replace("module.", "", 1): v
        for k, v in state.items()
        if not k.replace("module.", "", 1).startswith("criterion")
    }
    return {"config": arch_from_config(cfg), "state": state}


@dataclass
class NodePFNState:
    net: NodePFNNet
    inputs: torch.Tensor  # (S, M, num_features): context rows first, one column per ensemble configuration
    labels: torch.Tensor  # (n_ctx, M)
    class_shifts: list[int]
    edge_index: torch.Tensor  # over the reordered rows
    order: np.ndarray  # row -> node
    classes: np.ndarray  # encoded class -> graph class
    num_classes: int
    batch: int
    chunk: int
    device: torch.device
    n_ctx: int


class NodePFN(FrozenGFM):
    name = "nodepfn"
    version = "2026-06-01"
    kind = "gfm"
    description = (
        "NodePFN: PFN transformer with GCN message passing, in-context on the training nodes; ≤20 classes, SVD to "
        "≤100 features"
    )
    capabilities = Capabilities(max_classes=20, uses_gpu=True)
    default_config = {"smoothing_steps": 0, "n_components": 50, "n_ensemble": 32}
    search_space = (
        IntParam("smoothing_steps", 0, 6),
        ChoiceParam("n_components", (5, 10, 15, 20, 30, 50, 75, 100)),
        ChoiceParam("n_ensemble", (1, 2, 4, 8, 16, 32)),
    )
    weights = (WEIGHTS_ID,)

    def fit(
        self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext
    ) -> NodePFNState:
        seed_everything(ctx.seed)
        frozen = load_frozen("nodepfn", self.weights, NodePFNNet, DEFAULT_ARCH, _load_state, ctx.device)
        frozen.report(ctx)
        arch = frozen.config
        _refuse_unsupported(graph, config, arch)
        n = graph.num_nodes
        edges = edge_array_without_self_loops(graph.edge_index)
        loops = np.arange(n, dtype=np.int64)
        full = np.concatenate([edges, np.stack([loops, loops])], axis=1)
        # The memory check comes first: the ensemble's inputs alone can exceed a small container.
        batch = self._inference_batch(frozen.module, graph, train, config, arch, full.shape[1], ctx)
        x = _reduced_features(graph, full, config, arch, ctx.seed)
        ctx.check()

        train = np.sort(train)
        is_train = np.zeros(n, dtype=bool)
        is_train[train] = True
        order = np.concatenate([train, np.flatnonzero(~is_train)])
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n)
        classes, y_enc = np.unique(graph.labels[train], return_inverse=True)
        inputs, labels, shifts = _ensemble(torch.from_numpy(x[order]), y_enc, len(classes), config, arch, ctx.seed)
        ctx.check()

        device = ctx.device
        ctx.info.update(n_features=int(x.shape[1]), n_ensemble=len(shifts), inference_batch=batch, n_context=len(train))
        return NodePFNState(
            net=frozen.module,
            inputs=inputs.to(device),
            labels=labels.to(device),
            class_shifts=shifts,
            edge_index=torch.from_numpy(position[full]).to(device),
            order=order,
            classes=classes,
            num_classes=graph.num_classes,
            batch=batch,
            chunk=attention_chunk(n, len(train), batch, arch["nhead"]),
            device=device,
            n_ctx=len(train),
        )

    def _inference_batch(
        self,
        net: NodePFNNet,
        graph: GraphBundle,
        train: np.ndarray,
        config: Config,
        arch: dict[str, Any],
        n_edges: int,
        ctx: FitContext,
    ) -> int:
        """The largest inference batch (at most upstream's) whose memory estimate fits; refuses what never fits.

        A smaller batch gives the same result, so halving it is the only concession to the budget.
        """
        n = graph.num_nodes
        f, svd = graph.features.shape[1], int(config["n_components"])
        n_feat = min(svd, n - 1) if f > svd else f
        n_classes_seen = len(np.unique(graph.labels[train]))
        n_configs = min(int(config["n_ensemble"]), 2 * n_classes_seen * min(n_feat, arch["num_features"]))
        e, nhid, heads = arch["emsize"], arch["emsize"] * arch["nhid_factor"], arch["nhead"]

        def estimate(batch: int) -> dict[str, float]:
            chunk = attention_chunk(n, len(train), batch, heads)
            return {
                "weights": param_bytes(net),
                "inputs": float(n) * n_configs * arch["num_features"] * 4,
                "activations": float(n) * batch * (8 * e + nhid) * 4,
                "message passing": float(n_edges) * batch * e * 4 * 2,
                "context attention": float(chunk) * batch * heads * len(train) * 4,
            }

        budget = memory_budget_bytes(ctx.device)
        batch = min(MAX_INFERENCE_BATCH, n_configs)
        while batch > 1 and sum(estimate(batch).values()) > budget:
            batch //= 2  # same result, smaller inference batches (upstream's batch_size_inference)
        require_memory(self.name, estimate(batch), ctx.device, "in-context inference", ctx.info)
        return batch

    def predict(self, state: NodePFNState, graph: GraphBundle) -> np.ndarray:
        k_cls = len(state.classes)
        total: torch.Tensor | None = None
        m = state.inputs.shape[1]
        with torch.no_grad():
            for start in range(0, m, state.batch):
                out = state.net(
                    state.inputs[:, start : start + state.batch],
                    state.labels[:, start : start + state.batch],
                    state.edge_index,
                    state.chunk,
                )
                out = out[:, :, :k_cls].float() / SOFTMAX_TEMPERATURE
                for j in range(out.shape[1]):
                    shift = state.class_shifts[start + j]
                    logits = torch.cat([out[:, j, shift:], out[:, j, :shift]], dim=-1)
                    total = logits if total is None else total + logits
        assert total is not None, "an ensemble has at least one member"
        probs_q = torch.softmax(total / m, dim=-1).cpu().numpy()
        probs = np.full((graph.num_nodes, state.num_classes), 0.0, dtype=np.float64)
        query_nodes = state.order[state.n_ctx :]
        probs[np.ix_(query_nodes, state.classes)] = probs_q
        probs[state.order[: state.n_ctx]] = 1.0 / state.num_classes  # context rows are not predicted
        return finish_probs(probs)


def _refuse_unsupported(graph: GraphBundle, config: Config, arch: dict[str, Any]) -> None:
    """Refuse a task the checkpoint cannot take: more classes than its decoder, more components than its input."""
    if graph.num_classes > arch["max_num_classes"]:
        raise InputRefused(
            f"nodepfn supports at most {arch['max_num_classes']} classes (its decoder's width, no output coding); "
            f"the graph has {graph.num_classes}"
        )
    if int(config["n_components"]) > arch["num_features"]:
        raise InputRefused(
            f"n_components={config['n_components']} exceeds the model's {arch['num_features']} input features"
        )


def _reduced_features(
    graph: GraphBundle, full: np.ndarray, config: Config, arch: dict[str, Any], seed: int
) -> np.ndarray:
    """Upstream's target-specific features: smoothed ``smoothing_steps`` times, then SVD to ``n_components``."""
    n = graph.num_nodes
    x = _smooth(graph.features.astype(np.float32), full, n, int(config["smoothing_steps"]))
    if x.shape[1] > int(config["n_components"]):
        k = min(int(config["n_components"]), x.shape[1], n - 1)
        x = TruncatedSVD(n_components=k, algorithm="arpack", random_state=seed).fit_transform(x).astype(np.float32)
    if x.shape[1] > arch["num_features"]:  # unreachable with the space above; upstream subsamples
        x = x[:, np.sort(np.random.RandomState(seed).choice(x.shape[1], arch["num_features"], replace=False))]
    return x


def _ensemble(
    xs: torch.Tensor, y_enc: np.ndarray, k_cls: int, config: Config, arch: dict[str, Any], seed: int
) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """The ensemble's inputs (S, M, features), context labels (n_ctx, M) and class shifts, as upstream.

    Configurations are (class rotation, feature rotation) pairs, shuffled, crossed with the 'none' and
    'power_all' transforms; the first ``n_ensemble`` are kept. Rows are context (training) nodes first.
    """
    torch.manual_seed(seed)
    feature_shifts = torch.randperm(xs.shape[1]).tolist()
    class_shifts = torch.randperm(k_cls).tolist()
    pairs = list(itertools.product(class_shifts, feature_shifts))
    random.Random(seed).shuffle(pairs)
    configs = list(itertools.product(pairs, ("none", "power_all")))[: int(config["n_ensemble"])]

    n_ctx = len(y_enc)
    transformed: dict[str, torch.Tensor] = {}
    inputs, labels, shifts = [], [], []
    y_t = torch.from_numpy(y_enc.astype(np.float32))
    for (c_shift, f_shift), transform in configs:
        if transform not in transformed:
            transformed[transform] = _preprocess(xs, n_ctx, transform, arch["num_features"])
        xe = transformed[transform]
        xe = torch.cat([xe[:, f_shift:], xe[:, :f_shift]], dim=-1)
        xe = torch.cat([xe, xe.new_zeros(xe.shape[0], arch["num_features"] - xe.shape[1])], dim=-1)
        inputs.append(xe)
        labels.append((y_t + c_shift) % k_cls)
        shifts.append(int(c_shift))
    return torch.stack(inputs, dim=1), torch.stack(labels, dim=1), shifts


def _smooth(x: np.ndarray, edge_index: np.ndarray, n: int, steps: int) -> np.ndarray:
    """X <- D^-1/2 (A+I) D^-1/2 X, ``steps`` times (upstream: SimpleConv(sum) with gcn_norm weights)."""
    if steps == 0:
        return x
    src, dst = edge_index
    deg = np.bincount(dst, minlength=n).astype(np.float32)
    w = (1.0 / np.sqrt(deg[src] * deg[dst])).astype(np.float32)
    import scipy.sparse as sp

    adj = sp.csr_matrix((w, (dst, src)), shape=(n, n))
    for _ in range(steps):
        x = np.asarray(adj @ x, dtype=np.float32)
    return x


def _nanmean(x: torch.Tensor) -> torch.Tensor:
    return torch.nanmean(x, dim=0)


def _nanstd(x: torch.Tensor) -> torch.Tensor:
    num = (~torch.isnan(x)).sum(0).clamp(min=2)
    return torch.sqrt(torch.nansum((x - _nanmean(x)) ** 2, dim=0) / (num - 1))


def _preprocess(x: torch.Tensor, n_ctx: int, transform: str, max_features: int) -> torch.Tensor:
    """Upstream's per-transform input pipeline (normalised with all rows, 'normalize_with_test')."""
    x = ((x - _nanmean(x)) / (_nanstd(x) + 1e-6)).clamp(-100, 100)
    keep = [torch.unique(x[:n_ctx, j]).numel() > 1 for j in range(x.shape[1])]
    x = x[:, torch.tensor(keep, dtype=torch.bool)] if any(keep) else x
    if transform == "power_all":
        arr = x.numpy().astype(np.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for j in range(arr.shape[1]):
                try:
                    pt = PowerTransformer(standardize=True).fit(arr[:n_ctx, j : j + 1])
                    arr[:, j : j + 1] = pt.transform(arr[:, j : j + 1])
                except Exception:  # upstream leaves a column it cannot transform as it is
                    pass
        x = torch.from_numpy(arr).float()
    # outliers: clip softly beyond 4 sigma, statistics recomputed without the outliers
    mean, std = _nanmean(x), _nanstd(x)
    clean = torch.where((x > mean + 4 * std) | (x < mean - 4 * std), torch.nan, x)
    mean, std = _nanmean(clean), _nanstd(clean)
    lower, upper = mean - 4 * std, mean + 4 * std
    x = torch.maximum(-torch.log1p(x.abs()) + lower, x)
    x = torch.minimum(torch.log1p(x.abs()) + upper, x)
    return x / (x.shape[1] / max_features)
