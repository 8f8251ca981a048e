"""NodePFN: the official structure (parameter names and shapes the upstream checkpoints carry)."""

from __future__ import annotations

from methods.nodepfn.model import DEFAULT_ARCH as NODEPFN_ARCH
from methods.nodepfn.model import NodePFNNet


def test_nodepfn_official_structure():
    shapes = {k: tuple(v.shape) for k, v in NodePFNNet(NODEPFN_ARCH).state_dict().items()}
    assert shapes["encoder.weight"] == (512, 100) and shapes["y_encoder.weight"] == (512, 1)
    assert shapes["transformer_encoder.layers.11.self_attn.in_proj_weight"] == (1536, 512)
    assert shapes["transformer_encoder.layers.11.local_model.lin.weight"] == (512, 512)
    assert shapes["transformer_encoder.layers.11.linear1.weight"] == (1024, 512)
    assert shapes["decoder.2.weight"] == (20, 1024)
