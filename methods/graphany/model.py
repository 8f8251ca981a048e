"""GraphAny (Zhao et al., ICLR 2025): LinearGNNs solved in closed form, fused by a pretrained attention.

Adaptation to a new graph has no gradient step. Five linear channels are built
from the node features: X, the mean-aggregated L1 = D^-1 A X and L2 = (D^-1 A)^2 X,
and the high-pass H1 = X - L1, H2 = H1 - D^-1 A H1 (A without self-loops).
For each channel a weight matrix W is the least-squares solution of
F[train] W = onehot(y[train]) (minimum-norm, SVD driver), giving per-channel
predictions F W. Per node, the pairwise squared distances between the
feature-channel predictions are turned into t-SNE-style conditional Gaussian
probabilities whose entropy is fixed (perplexity 2^entropy); the 20 off-diagonal
entries feed the pretrained MLP, whose softmax(score / temperature) weighs the
prediction channels. The fused prediction is GraphAny's logit (upstream trains it
with cross-entropy); the service returns its softmax.
"""

from __future__ import annotations

import warnings
from itertools import pairwise

import numpy as np
import torch
from torch import nn

from methods.graphany.checkpoint import GraphAnyCheckpoint

PERPLEXITY_TOLERANCE = 1e-5
SEARCH_STEPS = 100


class AttentionMLP(nn.Module):
    """The pretrained scorer: Linear -> ReLU -> BatchNorm (eval statistics) per hidden layer, then Linear."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, layers: int) -> None:
        super().__init__()
        if layers == 1:
            self.lins = nn.ModuleList([nn.Linear(in_dim, out_dim)])
            self.bns = nn.ModuleList([nn.BatchNorm1d(out_dim)])  # present in the checkpoint, unused
        else:
            dims = [in_dim] + [hidden] * (layers - 1) + [out_dim]
            self.lins = nn.ModuleList(nn.Linear(a, b) for a, b in pairwise(dims))
            self.bns = nn.ModuleList(nn.BatchNorm1d(hidden) for _ in range(layers - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # one layer: no hidden layer, and its checkpoint's BatchNorm is left over
        for lin, bn in zip(self.lins[:-1], self.bns, strict=False):
            x = torch.relu(lin(x))
            if x.shape[0] > 1:
                x = bn(x)
        return self.lins[-1](x)


def build_attention(ckpt: GraphAnyCheckpoint) -> AttentionMLP:
    n = len(ckpt.feat_channels)
    mlp = AttentionMLP(n * (n - 1), ckpt.n_hidden, len(ckpt.pred_channels), ckpt.n_mlp_layer)
    mlp.load_state_dict(ckpt.state_dict, strict=True)
    mlp.eval()
    for p in mlp.parameters():
        p.requires_grad_(False)
    return mlp


def channel_features(x: torch.Tensor, edge_index: torch.Tensor, needed: set[str]) -> dict[str, torch.Tensor]:
    """X, L1, L2, H1, H2 on the graph without self-loops (mean over neighbours; 0 for isolated nodes).

    The mean is one sparse product with D^-1 A (CSR), so no per-edge copy of the
    features is ever made.
    """
    n = x.shape[0]
    src, dst = edge_index
    keep = src != dst
    src, dst = src[keep], dst[keep]
    deg = torch.zeros(n, dtype=x.dtype, device=x.device).index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
    inv = torch.where(deg > 0, 1.0 / deg.clamp(min=1), torch.zeros_like(deg))
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    mean = (
        torch.sparse_coo_tensor(torch.stack([dst, src]), inv[dst], (n, n), check_invariants=False)
        .coalesce()
        .to_sparse_csr()
    )

    def mean_agg(h: torch.Tensor) -> torch.Tensor:
        return torch.sparse.mm(mean, h)

    feats = {"X": x}
    l1 = mean_agg(x)
    if needed & {"L1", "L2"}:
        feats["L1"] = l1
    if "L2" in needed:
        feats["L2"] = mean_agg(l1)
    if needed & {"H1", "H2"}:
        h1 = x - l1
        feats["H1"] = h1
        if "H2" in needed:
            feats["H2"] = h1 - mean_agg(h1)
    return {k: v for k, v in feats.items() if k in needed}


def least_squares(
    feats: dict[str, torch.Tensor], train: torch.Tensor, y_train: torch.Tensor, num_classes: int
) -> dict[str, torch.Tensor]:
    """The LinearGNN weights: per channel, the minimum-norm least-squares solution on the training nodes.

    Solved on CPU (gelss).
    """
    target = torch.nn.functional.one_hot(y_train.cpu(), num_classes).float()
    return {
        name: torch.linalg.lstsq(f.float().cpu()[train.cpu()], target, driver="gelss").solution
        for name, f in feats.items()
    }


def linear_gnn_predictions(
    feats: dict[str, torch.Tensor], solutions: dict[str, torch.Tensor], rows: torch.Tensor | None = None
) -> dict[str, torch.Tensor]:
    """Each channel's LinearGNN applied to ``rows`` (all nodes when None)."""
    return {
        name: (f.float().cpu() if rows is None else f.float().cpu()[rows]) @ solutions[name]
        for name, f in feats.items()
    }


def entropy_normalized_probabilities(sqdist: np.ndarray, entropy: float) -> np.ndarray:
    """Row-wise conditional Gaussian probabilities with fixed perplexity 2^entropy (t-SNE's binary search).

    ``sqdist``: (B, K, K) squared distances. For each of the B*K rows, beta is
    searched so that the entropy (nats) of p_j ∝ exp(-beta d_j), j != i, equals
    log(2^entropy); diagonal entries stay 0. Same search as scikit-learn's
    t-SNE: start at beta = 1, double/halve until bracketed, then bisect; at
    most 100 steps, tolerance 1e-5.
    """
    b, k, _ = sqdist.shape
    d = sqdist.reshape(b * k, k).astype(np.float32).astype(np.float64)
    offdiag = ~np.eye(k, dtype=bool)[np.tile(np.arange(k), b)]
    desired = np.log(np.exp2(entropy))
    beta = np.ones(b * k)
    lo = np.full(b * k, -np.inf)
    hi = np.full(b * k, np.inf)
    active = np.ones(b * k, dtype=bool)
    p = np.zeros_like(d)
    for _ in range(SEARCH_STEPS):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        rows = np.where(offdiag[idx], np.exp(-d[idx] * beta[idx, None]), 0.0)
        total = rows.sum(axis=1)
        total[total == 0.0] = 1e-8
        rows /= total[:, None]
        p[idx] = rows
        h = np.log(total) + beta[idx] * (d[idx] * rows).sum(axis=1)
        diff = h - desired
        done = np.abs(diff) <= PERPLEXITY_TOLERANCE
        up = ~done & (diff > 0)  # entropy too high: sharpen
        down = ~done & (diff <= 0)
        i_up, i_down = idx[up], idx[down]
        lo[i_up] = beta[i_up]
        beta[i_up] = np.where(np.isinf(hi[i_up]), beta[i_up] * 2.0, (beta[i_up] + hi[i_up]) / 2.0)
        hi[i_down] = beta[i_down]
        beta[i_down] = np.where(np.isinf(lo[i_down]), beta[i_down] / 2.0, (beta[i_down] + lo[i_down]) / 2.0)
        active[idx[done]] = False
    return p.reshape(b, k, k)


def distance_features(
    preds: dict[str, torch.Tensor], channels: tuple[str, ...], entropy: float, block: int = 8192
) -> torch.Tensor:
    """The (N, K(K-1)) attention input: off-diagonal entropy-normalized probabilities between channel predictions."""
    stacked = torch.stack([preds[c] for c in channels], dim=1).float()  # (N, K, C)
    n, k, _ = stacked.shape
    offdiag = ~torch.eye(k, dtype=torch.bool)
    out = torch.empty(n, k * (k - 1), dtype=torch.float32)
    for start in range(0, n, block):
        chunk = stacked[start : start + block]
        sq = torch.cdist(chunk.double(), chunk.double()).pow(2).float().numpy()
        probs = entropy_normalized_probabilities(sq, entropy)
        out[start : start + block] = torch.from_numpy(probs).float()[:, offdiag]
    return out


def fuse(
    preds: dict[str, torch.Tensor],
    dist: torch.Tensor,
    attention: AttentionMLP,
    ckpt: GraphAnyCheckpoint,
    block: int = 8192,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused logits (N, C) and the per-node channel weights (N, P).

    The scorer runs on near-equal row blocks of at most ``block`` rows (rows are
    independent in eval mode; no block has a single row unless the graph does, so the
    batch-norm rule sees what it would see on the whole graph).
    """
    with torch.no_grad():
        parts = dist.tensor_split(max(1, -(-dist.shape[0] // block)))
        weights = torch.cat([torch.softmax(attention(part) / ckpt.att_temperature, dim=-1) for part in parts])
        fused = torch.zeros_like(preds[ckpt.pred_channels[0]])
        for i, c in enumerate(ckpt.pred_channels):  # accumulated channel by channel: no (N, P, C) stack
            fused.addcmul_(weights[:, i, None], preds[c])
        return fused, weights
