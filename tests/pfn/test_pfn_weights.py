"""Official structure (parameter names and shapes the upstream checkpoints carry),
the weights catalog, unverified entries, and the real-weights run (marked)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from contract.weights import WeightsError, load_weights_catalog
from methods.g2tfm.model import DEFAULT_PEARL, DEFAULT_TABPFN, G2TNet, load_tabpfn_state
from methods.graphpfn.model import DEFAULT_ARCH as GRAPHPFN_ARCH
from methods.graphpfn.model import GraphPFNNet, load_limix_state
from methods.nodepfn.model import DEFAULT_ARCH as NODEPFN_ARCH
from methods.nodepfn.model import NodePFNNet
from methods.sdk.weights import resolve


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


def test_nodepfn_official_structure():
    shapes = {k: tuple(v.shape) for k, v in NodePFNNet(NODEPFN_ARCH).state_dict().items()}
    assert shapes["encoder.weight"] == (512, 100) and shapes["y_encoder.weight"] == (512, 1)
    assert shapes["transformer_encoder.layers.11.self_attn.in_proj_weight"] == (1536, 512)
    assert shapes["transformer_encoder.layers.11.local_model.lin.weight"] == (512, 512)
    assert shapes["transformer_encoder.layers.11.linear1.weight"] == (1024, 512)
    assert shapes["decoder.2.weight"] == (20, 1024)


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
    upstream |= {"decoder_dict.standard." + k.removeprefix("decoder."): v for k, v in net.tabpfn.state_dict().items() if k.startswith("decoder.")}
    upstream |= {
        "encoder.5.layer.weight": torch.randn(192, 2),
        "feature_positional_embedding_embeddings.weight": torch.randn(192, 48),
        "feature_positional_embedding_embeddings.bias": torch.randn(192),
        "y_encoder.2.layer.weight": torch.randn(192, 2),
        "y_encoder.2.layer.bias": torch.randn(192),
    }
    net.tabpfn.load_state_dict(load_tabpfn_state(upstream), strict=True)  # raises on any missing/unexpected key


def test_catalog_entries_and_unverified_refusal(tmp_path):
    catalog = load_weights_catalog()
    ids = {"limix-16m", "graphpfn-1.3-adapters", "nodepfn-epoch30", "tabpfn-v2-classifier", "g2tfm-pearl-random"}
    assert ids <= set(catalog)
    entry = catalog["nodepfn-epoch30"]
    assert entry.url.startswith("https://") and entry.sha256 == "unverified"
    path = tmp_path / entry.relative_path
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not the upstream file")
    with pytest.raises(WeightsError, match="unverified"):
        resolve(entry, tmp_path)
    resolved = resolve(entry, tmp_path, allow_unverified=True)
    assert resolved.official is False and len(resolved.sha256) == 64


def _weights_present(*ids: str) -> bool:
    from contract.weights import weights_dir

    catalog = load_weights_catalog()
    return all((weights_dir() / catalog[i].relative_path).is_file() for i in ids)


@pytest.mark.weights
@pytest.mark.parametrize(
    "method, ids",
    [("graphpfn", ("limix-16m", "graphpfn-1.3-adapters")), ("nodepfn", ("nodepfn-epoch30",)), ("g2tfm", ("tabpfn-v2-classifier", "g2tfm-pearl-random"))],
)
def test_real_weights_on_texas(method, ids, monkeypatch):
    """With the upstream files in NODEGROUND_WEIGHTS: loads them as they are and classifies texas well above chance."""
    if not _weights_present(*ids):
        pytest.skip(f"{method}: official weights {', '.join(ids)} not in NODEGROUND_WEIGHTS (fetch them; not reachable offline)")
    monkeypatch.setenv("NODEGROUND_ALLOW_UNVERIFIED_WEIGHTS", "1")

    from contract.families import load_families
    from contract.wire import make_bundle
    from methods.families import method_classes
    from methods.sdk.method import FitContext, pick_device
    from orchestrator.data.registry import load_dataset
    from orchestrator.data.splits import graph_split

    cls = method_classes(load_families()[method])[0]
    graph = load_dataset("texas")
    split = graph_split(graph, "public", 0)
    labels = np.full(graph.num_nodes, -1)
    seen = np.concatenate([split.train, split.val])
    labels[seen] = graph.y[seen]
    bundle = make_bundle(graph.x, graph.edge_index, labels, graph.num_classes)
    ctx = FitContext(seed=0, device=pick_device(True))
    m = cls()
    probs = m.predict(m.fit(bundle, split.train, split.val, cls.resolve_config({}), ctx), bundle)
    assert ctx.info["weights_id"] != "random-init"
    acc = float((probs[split.test].argmax(1) == graph.y[split.test]).mean())
    assert acc > 0.6, f"{method} test accuracy on texas {acc:.3f}"
