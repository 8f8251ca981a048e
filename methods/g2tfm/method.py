"""G2T-FM as a frozen-weight service: graph-to-table features fed to the TabPFN-v2
classifier in context (the training nodes are the context rows).

``fit`` builds the table as G2T-FM's ICL configuration does — node features
(standardised), neighbourhood feature aggregation (mean over neighbours,
standardised), optional PCA of each of those blocks (``pca_dim``), structural
encodings (Laplacian eigenvectors k=14, log degree, log PageRank; noisy
quantile-normal transform), random-GNN (PEARL) embeddings, removal of
train-constant columns and z-scoring — and checks the memory estimate;
``predict`` runs TabPFN with the whole training set as context for every node
(training nodes included, as upstream evaluates its train part), in query
batches sized to the memory budget.

Limits, as upstream: at most 10 classes (TabPFN-v2's decoder; G2T-FM has no
output coding, so more classes are refused).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from scipy.sparse.linalg import eigsh
from sklearn.decomposition import PCA
from sklearn.preprocessing import QuantileTransformer, StandardScaler

from contract.wire import GraphBundle
from methods.g2tfm.model import DEFAULT_PEARL, DEFAULT_TABPFN, G2TNet, load_tabpfn_state
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
    memory_budget_bytes,
    param_bytes,
    require_memory,
    safe_torch_load,
    seed_everything,
)

TABPFN_ID = "tabpfn-v2-classifier"
PEARL_ID = "g2tfm-pearl-random"
MAX_QUERY_BATCH = 4096  # upstream eval_batch_size (halved there on OOM; here sized to the budget up front)
LAP_PE_K = 14


def _load_state(files: dict) -> dict[str, Any]:
    tab = safe_torch_load(files[TABPFN_ID].path)
    state = {"tabpfn." + k: v for k, v in load_tabpfn_state(tab["state_dict"]).items()}
    cfg = tab.get("config", {}) or {}
    arch = {k: cfg[k] for k in ("emsize", "nhead", "nlayers", "nhid_factor") if k in cfg}
    pearl = safe_torch_load(files[PEARL_ID].path)
    state.update({"pearl." + k: v for k, v in pearl.items()})
    return {"config": arch, "state": state}


@dataclass
class G2TState:
    net: G2TNet
    table: torch.Tensor  # (N, F) final z-scored table
    order: np.ndarray  # context nodes (train, sorted)
    y_ctx: torch.Tensor
    classes: int
    query_batch: int
    chunk: int
    seed: int
    device: torch.device


class G2TFM(FrozenGFM):
    name = "g2tfm"
    version = "2026-06-01"
    kind = "gfm"
    description = (
        "G2T-FM: graph-to-table features (NFA, degree, PageRank, Laplacian PE, random-GNN embeddings) + TabPFNv2 in "
        "context; ≤10 classes"
    )
    capabilities = Capabilities(max_classes=10, uses_gpu=True)
    default_config = {"pca_dim": 64, "nfa": True, "pearl": True}
    search_space = (
        ChoiceParam("pca_dim", (0, 32, 64, 128)),
        ChoiceParam("nfa", (True, False)),
        ChoiceParam("pearl", (True, False)),
    )
    weights = (TABPFN_ID, PEARL_ID)

    def fit(self, graph: GraphBundle, train: np.ndarray, val: np.ndarray, config: Config, ctx: FitContext) -> G2TState:
        seed_everything(ctx.seed)
        frozen = load_frozen(
            "g2tfm", self.weights, G2TNet, {**DEFAULT_TABPFN, **DEFAULT_PEARL}, _load_state, ctx.device
        )
        frozen.report(ctx)
        arch = frozen.config
        if graph.num_classes > arch["n_out"]:
            raise InputRefused(
                f"g2tfm supports at most {arch['n_out']} classes (TabPFN-v2's decoder, no output coding); the graph "
                f"has {graph.num_classes}"
            )
        n = graph.num_nodes
        edges = edge_array_without_self_loops(graph.edge_index)
        train = np.sort(train)
        table = _graph_table(graph.features, edges, n, train, config, ctx.seed)
        ctx.check()
        if config["pearl"]:
            table = np.concatenate([table, _pearl_embeddings(frozen.module, edges, n, ctx)], axis=1)
        table = _zscore(table)
        batch = self._query_batch(frozen.module, arch, table.shape, len(train), ctx)
        ctx.info.update(n_table_features=int(table.shape[1]), query_batch=int(batch), n_context=int(len(train)))
        return G2TState(
            net=frozen.module,
            table=torch.from_numpy(table).to(ctx.device),
            order=train,
            y_ctx=torch.from_numpy(graph.labels[train].astype(np.float32)).to(ctx.device),
            classes=graph.num_classes,
            query_batch=batch,
            chunk=attention_chunk(len(train) + batch, len(train), table.shape[1] + 1, arch["nhead"]),
            seed=ctx.seed,
            device=ctx.device,
        )

    def _query_batch(
        self, net: G2TNet, arch: dict[str, Any], table_shape: tuple[int, ...], n_ctx: int, ctx: FitContext
    ) -> int:
        """The largest query batch (at most upstream's) whose memory estimate fits; refuses what never fits.

        Every batch attends to the whole context, so a smaller batch gives the same predictions.
        """
        n, f = table_shape
        e, h = arch["emsize"], arch["nhead"]
        hid = e * arch["nhid_factor"]
        t = f + 1

        def estimate(batch: int) -> dict[str, float]:
            s = n_ctx + batch
            return {
                "weights": param_bytes(net),
                "table": float(n) * f * 4,
                "activations": float(s) * t * (6 * e + hid) * 4,
                "feature attention": float(s) * h * t * t * 4,
                "item attention": float(attention_chunk(s, n_ctx, t, h)) * t * h * n_ctx * 4,
            }

        budget = memory_budget_bytes(ctx.device)
        batch = min(MAX_QUERY_BATCH, n)
        while batch > 1 and sum(estimate(batch).values()) > budget:
            batch //= 2
        require_memory(self.name, estimate(batch), ctx.device, "in-context inference", ctx.info)
        return batch

    def predict(self, state: G2TState, graph: GraphBundle) -> np.ndarray:
        c = state.classes
        tab = state.net.tabpfn
        shuffle = 2 < c <= tab.arch["n_out"]
        ctx_rows = state.table[torch.from_numpy(state.order).to(state.device)]
        out = []
        amp = state.device.type == "cuda"
        with torch.random.fork_rng(devices=[state.device] if state.device.type == "cuda" else []), torch.no_grad():
            torch.manual_seed(state.seed)
            for start in range(0, state.table.shape[0], state.query_batch):
                queries = state.table[start : start + state.query_batch]
                y = state.y_ctx
                perm = torch.randperm(c, device=state.device) if shuffle else None
                if perm is not None:
                    y = perm[y.long()].float()
                x = torch.cat([ctx_rows, queries], dim=0).unsqueeze(0)
                with torch.autocast(state.device.type, dtype=torch.bfloat16, enabled=amp):
                    logits = tab(x, y.unsqueeze(0), state.chunk).float().squeeze(0)[:, :c]
                if perm is not None:
                    logits = logits[:, perm]
                out.append(torch.softmax(logits, dim=-1))
        return finish_probs(torch.cat(out).cpu().numpy())


def _pearl_embeddings(net: G2TNet, edges: np.ndarray, n: int, ctx: FitContext) -> np.ndarray:
    """The frozen random GNN's (PEARL) node embeddings, its random inputs seeded by the split."""
    ei = torch.from_numpy(edges).to(ctx.device)
    gen = torch.Generator().manual_seed(ctx.seed)
    with torch.no_grad():
        return net.pearl(ei, n, gen).float().cpu().numpy()


def _graph_table(x: np.ndarray, edges: np.ndarray, n: int, train: np.ndarray, config: Config, seed: int) -> np.ndarray:
    blocks = []
    feats = StandardScaler().fit_transform(np.asarray(x, dtype=np.float64))
    parts = [feats]
    if config["nfa"]:
        parts.append(StandardScaler().fit_transform(_neighbour_mean(np.asarray(x, dtype=np.float64), edges, n)))
    d = int(config["pca_dim"])
    for part in parts:
        if d and part.shape[1] > d:
            part = PCA(n_components=min(d, n), random_state=seed).fit_transform(part)
        blocks.append(part)
    enc = np.concatenate([_laplacian_pe(edges, n, LAP_PE_K), _log_degree(edges, n), _log_pagerank(edges, n)], axis=1)
    noisy = enc + np.random.RandomState(42).normal(0.0, 1e-5, enc.shape)
    qt = QuantileTransformer(
        n_quantiles=max(min(n // 30, 1000), 10), output_distribution="normal", subsample=1_000_000_000, random_state=42
    )
    blocks.append(qt.fit(noisy).transform(enc))
    table = np.concatenate(blocks, axis=1)
    keep = np.array([np.unique(table[train, j]).size > 1 for j in range(table.shape[1])], dtype=bool)
    return _zscore(table[:, keep] if keep.any() else table)


def _zscore(t: np.ndarray) -> np.ndarray:
    std = t.std(0)
    std[std == 0] = 1.0
    return ((t - t.mean(0)) / std).astype(np.float32)


def _adjacency(edges: np.ndarray, n: int) -> sp.csr_matrix:
    return sp.csr_matrix((np.ones(edges.shape[1]), (edges[1], edges[0])), shape=(n, n))


def _neighbour_mean(x: np.ndarray, edges: np.ndarray, n: int) -> np.ndarray:
    adj = _adjacency(edges, n)
    count = np.asarray(adj.sum(axis=1)).ravel()
    agg = adj @ x
    out = np.where(count[:, None] > 0, agg / np.maximum(count, 1)[:, None], np.nan)
    col_mean = np.nanmean(np.where(np.isnan(out), np.nan, out), axis=0) if np.isnan(out).any() else None
    if col_mean is not None:  # upstream imputes NaNs (isolated nodes) with the most frequent value
        out = np.where(np.isnan(out), np.nan_to_num(col_mean)[None, :], out)
    return out


def _log_degree(edges: np.ndarray, n: int) -> np.ndarray:
    deg = np.bincount(edges[1], minlength=n).astype(np.float64)  # symmetric graph: in = out degree
    return np.log1p(deg)[:, None]


def _log_pagerank(edges: np.ndarray, n: int, alpha: float = 0.85, iters: int = 100, tol: float = 1e-6) -> np.ndarray:
    src, dst = edges
    out_deg = np.bincount(src, minlength=n).astype(np.float64)
    pv = np.full(n, 1.0 / n)
    for _ in range(iters):
        prev = pv
        share = np.divide(pv, out_deg, out=np.zeros(n), where=out_deg > 0)
        pv = alpha * np.bincount(dst, weights=share[src], minlength=n) + (1 - alpha) / n
        if np.abs(pv - prev).sum() < tol:
            break
    return np.log(tol + pv)[:, None]


def _laplacian_pe(edges: np.ndarray, n: int, k: int) -> np.ndarray:
    """k eigenvectors of I - D^-1/2 A D^-1/2 after the trivial one (smallest eigenvalues); zero-padded if n <= k."""
    adj = _adjacency(edges, n)
    deg = np.asarray(adj.sum(axis=1)).ravel()
    inv = np.divide(1.0, np.sqrt(deg), out=np.zeros(n), where=deg > 0)
    lap = sp.eye(n) - sp.diags(inv) @ adj @ sp.diags(inv)
    m = min(k + 1, n)
    if n <= 2 * (k + 1) + 10:
        vals, vecs = np.linalg.eigh(lap.toarray())
    else:
        vals, vecs = eigsh(lap.tocsc(), k=m, which="SM", tol=1e-4, ncv=min(n, max(2 * m + 1, 40)), v0=np.ones(n))
    idx = np.argsort(vals)[1:m]
    pe = vecs[:, idx]
    if pe.shape[1] < k:
        pe = np.concatenate([pe, np.zeros((n, k - pe.shape[1]))], axis=1)
    return pe
