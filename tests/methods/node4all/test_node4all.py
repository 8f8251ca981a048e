"""Node4All on tiny graphs: a frozen encoder, heads trained, chunking-invariant embeddings, the blocked readout."""

from __future__ import annotations

import torch

from methods.node4all import Node4All
from methods.node4all.model import CGTEncoder, encode
from tests.methods.helpers import QUICK, assert_frozen, assert_probs, cpu_context, frozen_checkpoint


def test_node4all_fit_predict(weights, graph):
    bundle, train, val = graph
    m, context = Node4All(), cpu_context()
    state = m.fit(bundle, train, val, m.resolve_config(QUICK), context)
    assert_probs(m.predict(state, bundle))
    assert_frozen(state.encoder, frozen_checkpoint(weights, "node4all-cgt"))
    assert state.z.shape == (48, 6)  # one scalar per (node, feature channel)
    assert context.info["weights_id"] == "node4all-cgt" and context.info["weights_official"] is True
    lin = cpu_context()
    m.fit(bundle, train, val, m.resolve_config({"head": "linear", **QUICK}), lin)
    assert lin.info["embeddings_cached"] is True


def test_node4all_feature_chunks_do_not_change_embeddings(weights, graph):
    bundle, _, _ = graph
    encoder = CGTEncoder.from_state_dict(frozen_checkpoint(weights, "node4all-cgt"))
    x, e = torch.from_numpy(bundle.features), torch.from_numpy(bundle.edge_index)
    torch.testing.assert_close(encode(encoder, x, e), encode(encoder, x, e, token_budget=48))


def _full_readout(summary, seq):
    """The readout as upstream writes it: every token through both blocks, attention as softmax(QK^T / sqrt(d)) V."""
    y = torch.cat([summary.cls_token.expand(seq.shape[0], 1, -1), seq], dim=1)
    for attn, ffn in zip(summary.attn, summary.ffn, strict=True):
        b, s, _ = y.shape
        q, k, v = (
            p(y).view(b, s, attn.heads, attn.head_dim).transpose(1, 2) for p in (attn.q_proj, attn.k_proj, attn.v_proj)
        )
        scores = torch.softmax(q @ k.transpose(-1, -2) / attn.head_dim**0.5, dim=-1)
        y = y + torch.tanh(attn.out_proj((scores @ v).transpose(1, 2).reshape(b, s, -1)))
        y = y + torch.tanh(ffn(y))
    return y[:, 0]


def test_node4all_readout_in_blocks_equals_the_full_readout(weights):
    summary = CGTEncoder.from_state_dict(frozen_checkpoint(weights, "node4all-cgt")).layerwise_summary
    seq = torch.randn(50, 11, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(summary(seq, block=7), _full_readout(summary, seq))
