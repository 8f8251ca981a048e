"""G2T-FM: the official structure (parameter names and shapes the upstream checkpoints carry), TabPFN-v2 keys mapped
onto it."""

from __future__ import annotations

import torch

from methods.g2tfm.model import DEFAULT_PEARL, DEFAULT_TABPFN, G2TNet, load_tabpfn_state


def test_g2tfm_official_structure_and_tabpfn_key_mapping():
    net = G2TNet({**DEFAULT_TABPFN, **DEFAULT_PEARL})
    tab = {k: tuple(v.shape) for k, v in net.tabpfn.state_dict().items()}
    assert tab["transformer_encoder.layers.11.self_attn_between_items._w_qkv"] == (3, 6, 32, 192)
    assert tab["transformer_encoder.layers.11.mlp.linear1.weight"] == (768, 192)
    assert tab["decoder.2.weight"] == (10, 768) and tab["pos_embs.weight"] == (192, 48)
    pearl = {k: tuple(v.shape) for k, v in net.pearl.state_dict().items()}
    assert pearl["backbone.layers.2.base.ffn.layers.3.weight"] == (512, 512) and pearl["output.3.weight"] == (16, 512)
    # a TabPFN-v2-format state dict (upstream key names) maps onto the module exactly
    upstream = {k: v for k, v in net.tabpfn.state_dict().items() if k.startswith("transformer_encoder.")}
    upstream |= {
        "decoder_dict.standard." + k.removeprefix("decoder."): v
        for k, v in net.tabpfn.state_dict().items()
        if k.startswith("decoder.")
    }
    upstream |= {
        "encoder.5.layer.weight": torch.randn(192, 2),
        "feature_positional_embedding_embeddings.weight": torch.randn(192, 48),
        "feature_positional_embedding_embeddings.bias": torch.randn(192),
        "y_encoder.2.layer.weight": torch.randn(192, 2),
        "y_encoder.2.layer.bias": torch.randn(192),
    }
    net.tabpfn.load_state_dict(load_tabpfn_state(upstream), strict=True)  # raises on any missing/unexpected key
