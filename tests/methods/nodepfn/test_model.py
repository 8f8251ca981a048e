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


def test_gcn_branch_is_gcnconv():
    """The CSR product gives GCNConv's own output (its gcn_norm, self-loops added where missing, duplicates summed)."""
    import torch

    from methods.nodepfn.model import GPSLayer, normalized_adjacency

    torch.manual_seed(0)
    n, b, e = 40, 3, 16
    layer = GPSLayer(e, 2, 32)
    torch.nn.init.normal_(layer.local_model.bias)
    src, dst = torch.randint(0, n, (2, 120))
    edge_index = torch.cat(
        [torch.stack([src, dst]), torch.arange(n).repeat(2, 1)[:, : n // 2]], dim=1
    )  # directed, some loops
    h = torch.randn(n, b, e)
    expected = layer.local_model(h.transpose(0, 1), edge_index).transpose(0, 1)
    got = layer._local(h, normalized_adjacency(edge_index, n, h.dtype))
    assert torch.allclose(got, expected, atol=1e-5)
