"""RGVT and Node4All on tiny graphs: frozen encoders, heads trained, depth chosen, chunking-invariant encoders."""

from __future__ import annotations

import numpy as np
import torch

from contract.weights import load_weights_catalog
from methods.gvt import RGVT
from methods.sdk.frozen import load_state_dict
from methods.gvt.model import GraphViewTransformation, recurrent_representations
from methods.node4all import Node4All
from methods.node4all.model import CGTEncoder, encode
from tests.gfm.conftest import ctx

QUICK = {"max_epochs": 30, "patience": 10}


def _checkpoint(weights, weights_id):
    return load_state_dict(weights / load_weights_catalog()[weights_id].relative_path)


def _assert_frozen(module, reference):
    assert not any(p.requires_grad for p in module.parameters())
    for key, value in module.state_dict().items():
        torch.testing.assert_close(value, reference[key], rtol=0, atol=0)


def _assert_probs(probs, n=48, c=3):
    assert probs.shape == (n, c) and np.isfinite(probs).all()
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-5)


def test_gvt_selects_depth_on_validation(weights, graph):
    bundle, train, val = graph
    m, context = RGVT(), ctx()
    state = m.fit(bundle, train, val, m.resolve_config({"max_depth": 3, **QUICK}), context)
    _assert_probs(m.predict(state, bundle))
    _assert_frozen(state.encoder, _checkpoint(weights, "gvt-seed42"))
    losses = [context.info[f"val_loss_depth{d}"] for d in (1, 2, 3)]
    assert context.info["selection"] == "val_loss" and context.info["depth"] == 1 + int(np.argmin(losses))
    assert context.info["best_val_loss"] == min(losses)
    assert context.info["weights_id"] == "gvt-seed42" and context.info["weights_official"] is True
    # a second fit on the same graph reuses the representations
    again = ctx()
    m.fit(bundle, train, val, m.resolve_config({"depth": 2, "head": "linear", "checkpoint_seed": 42, **QUICK}), again)
    assert again.info["embeddings_cached"] is True and again.info["depth"] == 2


def test_gvt_other_seed_checkpoint(weights, graph):
    bundle, train, val = graph
    m, context = RGVT(), ctx()
    state = m.fit(bundle, train, val, m.resolve_config({"depth": 1, "checkpoint_seed": 2026, **QUICK}), context)
    _assert_frozen(state.encoder, _checkpoint(weights, "gvt-seed2026"))
    assert context.info["weights_id"] == "gvt-seed2026"


def test_gvt_column_chunks_do_not_change_representations(weights, graph):
    bundle, _, _ = graph
    gvt = GraphViewTransformation.from_state_dict(_checkpoint(weights, "gvt-seed0"))
    x, e = torch.from_numpy(bundle.features), torch.from_numpy(bundle.edge_index)
    whole = recurrent_representations(gvt, x, e, 2)
    chunked = recurrent_representations(gvt, x, e, 2, chunk_elements=48 * 5)  # one column at a time
    for a, b in zip(whole, chunked):
        torch.testing.assert_close(a, b)


def test_node4all_fit_predict(weights, graph):
    bundle, train, val = graph
    m, context = Node4All(), ctx()
    state = m.fit(bundle, train, val, m.resolve_config(QUICK), context)
    _assert_probs(m.predict(state, bundle))
    _assert_frozen(state.encoder, _checkpoint(weights, "node4all-cgt"))
    assert state.z.shape == (48, 6)  # one scalar per (node, feature channel)
    assert context.info["weights_id"] == "node4all-cgt" and context.info["weights_official"] is True
    lin = ctx()
    m.fit(bundle, train, val, m.resolve_config({"head": "linear", **QUICK}), lin)
    assert lin.info["embeddings_cached"] is True


def test_node4all_feature_chunks_do_not_change_embeddings(weights, graph):
    bundle, _, _ = graph
    encoder = CGTEncoder.from_state_dict(_checkpoint(weights, "node4all-cgt"))
    x, e = torch.from_numpy(bundle.features), torch.from_numpy(bundle.edge_index)
    torch.testing.assert_close(encode(encoder, x, e), encode(encoder, x, e, token_budget=48))


def _full_readout(summary, seq):
    """The readout as upstream writes it: every token through both blocks, attention as softmax(QK^T / sqrt(d)) V."""
    y = torch.cat([summary.cls_token.expand(seq.shape[0], 1, -1), seq], dim=1)
    for attn, ffn in zip(summary.attn, summary.ffn):
        b, s, _ = y.shape
        q, k, v = (p(y).view(b, s, attn.heads, attn.head_dim).transpose(1, 2) for p in (attn.q_proj, attn.k_proj, attn.v_proj))
        scores = torch.softmax(q @ k.transpose(-1, -2) / attn.head_dim**0.5, dim=-1)
        y = y + torch.tanh(attn.out_proj((scores @ v).transpose(1, 2).reshape(b, s, -1)))
        y = y + torch.tanh(ffn(y))
    return y[:, 0]


def test_node4all_readout_in_blocks_equals_the_full_readout(weights):
    summary = CGTEncoder.from_state_dict(_checkpoint(weights, "node4all-cgt")).layerwise_summary
    seq = torch.randn(50, 11, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(summary(seq, block=7), _full_readout(summary, seq))
