"""GraphPFN: the official structure (parameter names and shapes the upstream checkpoints carry), LimiX keys mapped onto
it."""

from __future__ import annotations

import torch

from methods.graphpfn.model import DEFAULT_ARCH as GRAPHPFN_ARCH
from methods.graphpfn.model import GraphPFNNet, load_limix_state


def test_graphpfn_official_structure():
    shapes = {k: tuple(v.shape) for k, v in GraphPFNNet(GRAPHPFN_ARCH).state_dict().items()}
    layer = "tfm.module.transformer_encoder.layers.11."
    assert shapes[layer + "base.feature_attentions.1.qkv_proj_weight"] == (3, 6, 32, 192)
    assert shapes[layer + "base.sequence_attentions.0.out_proj_weight"] == (6, 32, 192)
    assert shapes[layer + "base.mlp.2.mlp.0.weight"] == (768, 192)
    assert shapes[layer + "conv.base.attn_qkv_linear.weight"] == (576, 192)
    assert shapes[layer + "mlp.base.layers.2.weight"] == (192, 384)
    assert shapes["tfm.module.cls_y_decoder.2.weight"] == (10, 768)
    assert shapes["tfm.module.encoder_x.0.fusion_network.0.weight"] == (192, 384)
    assert shapes["tfm.module.cls_y_encoder.2.y_embedding.weight"] == (10, 192)
    assert not any(".layers.12." in k for k in shapes)
    # LimiX checkpoint keys land under the adapters' .base
    assert set(load_limix_state({"transformer_encoder.layers.0.mlp.0.mlp.0.weight": torch.zeros(1)})) == {
        "tfm.module.transformer_encoder.layers.0.base.mlp.0.mlp.0.weight"
    }


def _dense_graph_attention(att, edge_index, x):
    """Reference: per node, token and head, a softmax over the scores of its in-edges, written with loops."""
    s, t, _ = x.shape[1:]
    qkv = att.attn_qkv_linear(x[0]).reshape(s, t, att.n_heads, 3 * att.d_head)
    q, k, v = qkv.split(att.d_head, dim=-1)
    out = torch.zeros(s, t, att.n_heads, att.d_head)
    for node in range(s):
        sources = edge_index[0][edge_index[1] == node]
        if len(sources):
            scores = (k[sources] * q[node]).sum(-1) / att.d_head**0.5  # (in-edges, T, H)
            out[node] = (torch.softmax(scores, dim=0).unsqueeze(-1) * v[sources]).sum(0)
    return att.output_linear(out.reshape(s, t, att.d)).unsqueeze(0)


def test_adapter_graph_attention_matches_a_softmax_over_in_edges():
    from methods.graphpfn.model import GraphAttention, InEdges

    torch.manual_seed(0)
    att = GraphAttention(16, 4)
    torch.nn.init.normal_(
        att.output_linear.weight
    )  # zero-initialised upstream: draw it so the output shows the attention
    torch.nn.init.normal_(att.output_linear.bias)
    # unsorted targets, a repeated edge (counted twice, as upstream), node 6 without in-edges
    edge_index = torch.tensor([[4, 1, 2, 3, 0, 0, 2, 5, 2], [3, 0, 1, 1, 1, 4, 4, 2, 1]])
    x = torch.randn(1, 7, 3, 16)
    with torch.no_grad():
        expected = _dense_graph_attention(att, edge_index, x)
        got = att(InEdges.from_edge_index(edge_index, 7), x)
    torch.testing.assert_close(got, expected)
