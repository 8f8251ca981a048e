"""GraphPFN: the official structure (parameter names and shapes the upstream checkpoints carry), LimiX keys mapped onto it."""

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
