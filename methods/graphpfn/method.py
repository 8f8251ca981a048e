"""GraphPFN (ICML 2026) as a frozen-weight service: in-context learning with the
training nodes as context, on a LimiX-16M backbone with graph adapters.

Adaptation is the model's own: no parameter is updated. ``fit`` prepares the
context (feature transform, optional PCA, constant-feature removal, the
ensemble's feature/label permutations and, beyond 10 classes, the ECOC output
code) and checks the memory estimate; ``predict`` runs one in-context forward
pass per ensemble member over the whole graph and aggregates them.

Limits, as upstream: the decoder has 10 outputs; more classes use error-correcting
output codes across ensemble members (each member solves a ≤10-way meta task;
the ensemble needs at least max(ceil(log10 C), ceil(C/9)) members). The
quadratic in-context attention and the per-edge adapter attention are
estimated before running (``methods.sdk.memory.require_memory``).

Rows of context (training) nodes are not predicted by GraphPFN (upstream
returns zeros for them); we return uniform rows there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sklearn.decomposition import PCA
from sklearn.preprocessing import QuantileTransformer, StandardScaler

from contract.wire import GraphBundle
from methods.graphpfn.model import (
    DEFAULT_ARCH,
    GraphPFNNet,
    arch_from_limix_config,
    ecoc_aggregate,
    ecoc_codebook,
    load_limix_state,
    min_ecoc_members,
)
from methods.sdk import (
    Capabilities,
    ChoiceParam,
    Config,
    FitContext,
    FrozenGFM,
    InputRefused,
    attention_chunk,
    edge_array_without_self_loops,
    finish_probs,
    load_frozen,
    param_bytes,
    require_memory,
    safe_torch_load,
    seed_everything,
)

LIMIX_ID = "limix-16m"
ADAPTERS_ID = "graphpfn-1.3-adapters"


def _load_state(files: dict) -> dict[str, Any]:
    limix = safe_torch_load(files[LIMIX_ID].path)
    if not isinstance(limix, dict) or "state_dict" not in limix:
        raise ValueError(f"{files[LIMIX_ID].path}: expected a dict with 'state_dict' and 'config'")
    arch = arch_from_limix_config(limix.get("config", {}))
    state = load_limix_state(limix["state_dict"])
    adapters = safe_torch_load(files[ADAPTERS_ID].path)
    state.update(adapters["state_dict"] if isinstance(adapters, dict) and "state_dict" in adapters else adapters)
    return {"config": arch, "state": state}


@dataclass
class Member:
    feature_perm: torch.Tensor | None
    target_perm: torch.Tensor | None
    ecoc: torch.Tensor | None  # (classes,) meta-class of each class for this member


@dataclass
class GraphPFNState:
    net: GraphPFNNet
    features: torch.Tensor
    edge_index: torch.Tensor
    y_train: torch.Tensor
    train_mask: torch.Tensor
    members: list[Member]
    codebook: torch.Tensor | None
    num_classes: int
    seed: int
    device: torch.device


class GraphPFN(FrozenGFM):
    name = "graphpfn"
    version = "2026-06-01"
    kind = "gfm"
    description = (
        "GraphPFN: LimiX-16M in-context backbone with graph-attention adapters; frozen weights, ECOC beyond 10 classes"
    )
    capabilities = Capabilities(uses_gpu=True)
    default_config = {"ensemble_size": 10, "d_pca": 64, "feature_transform": "standard", "n_random_features": 8}
    search_space = (
        ChoiceParam("ensemble_size", (1, 2, 4, 8, 10, 16)),
        ChoiceParam("d_pca", (0, 16, 32, 64, 128)),
        ChoiceParam("feature_transform", ("standard", "quantile-normal")),
    )
    weights = (LIMIX_ID, ADAPTERS_ID)

    def fit(
        self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext
    ) -> GraphPFNState:
        seed_everything(ctx.seed)
        n_classes = graph.num_classes
        members_n = int(config["ensemble_size"])
        frozen = load_frozen("graphpfn", self.weights, GraphPFNNet, DEFAULT_ARCH, _load_state, ctx.device)
        frozen.report(ctx)
        arch = {**frozen.config, "n_random_features": int(config["n_random_features"])}
        frozen.module.arch.update(n_random_features=arch["n_random_features"])
        alphabet = int(arch["max_num_classes"])
        _refuse_unsupported(n_classes, members_n, alphabet)
        features = _prepare_features(graph.features, train, config, ctx.seed)
        edges = edge_array_without_self_loops(graph.edge_index)
        n, f = features.shape
        tokens = math.ceil((f + arch["n_random_features"]) / arch["features_per_group"]) + 1
        self._check_memory(frozen.module, arch, n, tokens, len(train), edges.shape[1], ctx)
        gen = torch.Generator().manual_seed(ctx.seed)
        codebook = ecoc_codebook(n_classes, members_n, alphabet, gen) if n_classes > alphabet else None
        members = _members(members_n, f, n_classes, alphabet if codebook is not None else n_classes, codebook, gen)
        ctx.check()
        train_mask = np.zeros(n, dtype=bool)
        train_mask[train] = True
        device = ctx.device
        ctx.info.update(n_features=int(f), n_tokens=int(tokens), ensemble_size=members_n, ecoc=codebook is not None)
        return GraphPFNState(
            net=frozen.module,
            features=torch.from_numpy(features).to(device),
            edge_index=torch.from_numpy(edges).to(device),
            y_train=torch.from_numpy(graph.labels[np.flatnonzero(train_mask)]).to(device),
            train_mask=torch.from_numpy(train_mask).to(device),
            members=members,
            codebook=codebook.to(device) if codebook is not None else None,
            num_classes=n_classes,
            seed=ctx.seed,
            device=device,
        )

    def _check_memory(
        self, net: GraphPFNNet, arch: dict[str, Any], n: int, tokens: int, n_ctx: int, n_edges: int, ctx: FitContext
    ) -> None:
        """Refuse an in-context pass that cannot fit: attention over tokens and over the context, per-edge adapters."""
        e, hid, heads = arch["embed_dim"], arch["hid_dim"], arch["nhead"]
        require_memory(
            self.name,
            {
                "weights": param_bytes(net),
                "activations": 8.0 * n * tokens * e * 4 + n * tokens * hid * 4,
                "feature attention": float(n) * heads * tokens * tokens * 4,
                "context attention": float(attention_chunk(n, n_ctx, tokens, heads)) * tokens * heads * n_ctx * 4,
                "graph adapters": 4.0 * n_edges * tokens * heads * 4
                + 4.0 * n * tokens * e * 4,  # edge scores; q, k, v, output per token
            },
            ctx.device,
            "in-context inference",
            ctx.info,
        )

    def predict(self, state: GraphPFNState, graph: GraphBundle) -> np.ndarray:
        c = state.num_classes
        outputs = []
        amp = state.device.type == "cuda"
        with torch.random.fork_rng(devices=[state.device] if state.device.type == "cuda" else []), torch.no_grad():
            torch.manual_seed(state.seed)
            for member in state.members:
                x = (
                    state.features
                    if member.feature_perm is None
                    else state.features[:, member.feature_perm.to(state.device)]
                )
                y = state.y_train
                if member.ecoc is not None:
                    y = member.ecoc.to(state.device)[y]
                if member.target_perm is not None:
                    y = member.target_perm.to(state.device)[y]
                with torch.autocast(state.device.type, dtype=torch.bfloat16, enabled=amp):
                    logp = state.net(x, state.edge_index, y, state.train_mask)
                if member.target_perm is not None:
                    logp = logp[:, member.target_perm.to(state.device)]
                outputs.append(logp.float())
        if state.codebook is not None:
            logp = ecoc_aggregate(outputs, state.codebook)
        else:
            logp = torch.stack([torch.log_softmax(o, dim=-1) for o in outputs]).logsumexp(0) - math.log(len(outputs))
            logp = torch.log_softmax(logp[:, :c], dim=-1)
        probs = logp.exp().cpu().numpy()
        probs[state.train_mask.cpu().numpy()] = 1.0 / c  # context rows are not predicted
        return finish_probs(probs)


def _refuse_unsupported(n_classes: int, members_n: int, alphabet: int) -> None:
    """More classes than the decoder's outputs need an ECOC code, which needs enough ensemble members."""
    if n_classes > alphabet:
        need = min_ecoc_members(n_classes, alphabet)
        if members_n < need:
            raise InputRefused(
                f"graphpfn: {n_classes} classes exceed the decoder's {alphabet} outputs; its ECOC output code "
                f"needs ensemble_size >= {need} (got {members_n})"
            )


def _members(
    members_n: int,
    n_features: int,
    n_classes: int,
    effective: int,
    codebook: torch.Tensor | None,
    gen: torch.Generator,
) -> list[Member]:
    """The ensemble, as upstream: each member's feature and target permutations and its column of the ECOC code.

    Permutations are drawn from ``gen`` member by member; a single member (or binary targets) is not permuted.
    """
    shuffle_features = members_n > 1
    shuffle_targets = members_n > 1 and n_classes > 2
    return [
        Member(
            feature_perm=torch.randperm(n_features, generator=gen) if shuffle_features else None,
            target_perm=torch.randperm(effective, generator=gen) if shuffle_targets else None,
            ecoc=codebook[:, i] if codebook is not None else None,
        )
        for i in range(members_n)
    ]


def _prepare_features(x: np.ndarray, train: np.ndarray, config: Config, seed: int) -> np.ndarray:
    """Upstream's transductive preprocessing of 'other' features: transform, PCA, drop train-constant columns."""
    x = np.asarray(x, dtype=np.float64)
    if config["feature_transform"] == "standard":
        x = StandardScaler().fit_transform(x)
    else:
        noisy = x + np.random.RandomState(seed).normal(0.0, 1e-5, x.shape)
        qt = QuantileTransformer(
            n_quantiles=max(min(x.shape[0] // 30, 1000), 10),
            output_distribution="normal",
            subsample=1_000_000_000,
            random_state=seed,
        )
        x = qt.fit(noisy).transform(x)
    d = int(config["d_pca"])
    if d and x.shape[1] > d:
        x = PCA(n_components=min(d, x.shape[0]), random_state=seed).fit_transform(x)
    keep = np.array([np.unique(x[train, j]).size > 1 for j in range(x.shape[1])], dtype=bool)
    if not keep.any():
        keep[:] = True
    return np.ascontiguousarray(x[:, keep], dtype=np.float32)
