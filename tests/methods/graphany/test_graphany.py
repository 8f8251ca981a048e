"""GraphAny: safe checkpoint loading, the entropy-normalized distances, and a fit on a tiny graph."""

from __future__ import annotations

import io
import os
import pickle
import zipfile

import numpy as np
import pytest
import torch

from contract.weights import load_weights_catalog
from methods.graphany import GraphAny
from methods.graphany.checkpoint import CheckpointError, load_checkpoint
from methods.graphany.model import entropy_normalized_probabilities
from tests.methods.helpers import cpu_context as ctx

EXPECTED = {  # (n_hidden, n_mlp_layer, entropy) as saved upstream
    "graphany-arxiv": (128, 2, 1.0),
    "graphany-cora": (64, 1, 2.0),
    "graphany-product": (128, 2, 1.0),
    "graphany-wisconsin": (32, 2, 1.0),
}


def test_official_checkpoints_load_without_omegaconf(weights):
    for weights_id, (hidden, layers, entropy) in EXPECTED.items():
        ckpt = load_checkpoint(weights / load_weights_catalog()[weights_id].relative_path)
        assert (ckpt.n_hidden, ckpt.n_mlp_layer, ckpt.entropy, ckpt.att_temperature) == (hidden, layers, entropy, 5.0)
        assert ckpt.feat_channels == ("X", "L1", "L2", "H1", "H2") and ckpt.pred_channels == ("X", "L1", "L2")
        assert ckpt.state_dict["lins.0.weight"].shape[1] == 20
    import sys

    assert "omegaconf" not in sys.modules


class _Exploit:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _checkpoint_zip(path, payload) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("evil/data.pkl", pickle.dumps(payload, protocol=2))
        archive.writestr("evil/byteorder", "little")


def test_malicious_checkpoint_is_refused_without_running_code(tmp_path):
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    _checkpoint_zip(evil, {"state_dict": {}, "graph_any_config": _Exploit(str(marker))})
    with pytest.raises(CheckpointError, match="refused global"):
        load_checkpoint(evil)
    assert not marker.exists()
    # A plain torch.save of the same payload is refused too.
    buffer = io.BytesIO()
    torch.save({"x": _Exploit(str(marker))}, buffer)
    (tmp_path / "evil2.pt").write_bytes(buffer.getvalue())
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "evil2.pt")
    assert not marker.exists()


def test_entropy_normalization_matches_tsne_search():
    try:
        from sklearn.manifold._utils import _binary_search_perplexity
    except ImportError:  # private helper; the check is optional
        pytest.skip("scikit-learn's t-SNE helper is not importable")
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(64, 5, 4)).astype(np.float32) * rng.uniform(0.01, 3, size=(64, 1, 1)).astype(np.float32)
    sq = ((pts[:, :, None] - pts[:, None]) ** 2).sum(-1).astype(np.float32)
    for entropy in (1.0, 2.0):
        ours = entropy_normalized_probabilities(sq, entropy)
        ref = np.stack([_binary_search_perplexity(s, 2.0**entropy, 0) for s in sq])
        np.testing.assert_allclose(ours, ref, atol=1e-10)
        np.testing.assert_allclose(ours.sum(-1), 1.0, atol=1e-9)


@pytest.mark.parametrize("checkpoint", ["arxiv", "cora"])
def test_fit_predict_tiny_graph(weights, graph, checkpoint):
    bundle, train, val = graph
    m = GraphAny()
    context = ctx()
    ckpt = load_checkpoint(weights / load_weights_catalog()[f"graphany-{checkpoint}"].relative_path)
    state = m.fit(bundle, train, val, m.resolve_config({"checkpoint": checkpoint}), context)
    probs = m.predict(state, bundle)
    assert probs.shape == (48, 3) and np.isfinite(probs).all()
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-5)
    for key, value in state.attention.state_dict().items():  # frozen: exactly the checkpoint's tensors
        torch.testing.assert_close(value, ckpt.state_dict[key], rtol=0, atol=0)
    assert not any(p.requires_grad for p in state.attention.parameters())
    assert context.info["weights_official"] is True and len(context.info["weights_sha256"]) == 64
    assert abs(sum(context.info[f"attention_{c}"] for c in ("X", "L1", "L2")) - 1) < 1e-5
    assert (
        probs[36:].argmax(1) == np.arange(36, 48) % 3
    ).mean() > 0.4  # above chance (1/3): class-informative features
