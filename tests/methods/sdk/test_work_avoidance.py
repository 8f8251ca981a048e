"""The SDK's work avoidance keeps each trial's law: dropout's distribution, the rows a per-node model computes, the
optimizer's update rule."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from methods.gnn import GCN, MLP, JKNet
from methods.graphtransformer import NAGphormer
from methods.sdk import dropout as sdk_dropout
from methods.sdk import feature_dropout
from methods.sdk.method import make_optimizer, seed_everything, train_epochs
from tests.methods.helpers import cpu_context

N = 200_000


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_keeps_each_element_with_probability_one_minus_p_scaled(p) -> None:
    sdk_dropout.seed(0)
    x = torch.ones(N)
    out = sdk_dropout.dropout(x, p, training=True)
    kept = out != 0
    assert abs(float(kept.float().mean()) - (1 - p)) < 4 * np.sqrt(p * (1 - p) / N)  # four standard errors
    assert torch.allclose(out[kept], torch.full_like(out[kept], 1 / (1 - p)))
    assert abs(float(out.mean()) - 1.0) < 0.02  # unbiased, as torch's


def test_dropout_follows_torchs_contract() -> None:
    x = torch.randn(64, 8)
    assert sdk_dropout.dropout(x, 0.5, training=False) is x or torch.equal(sdk_dropout.dropout(x, 0.5, False), x)
    assert torch.equal(sdk_dropout.dropout(x, 0.0, training=True), x)
    assert torch.equal(sdk_dropout.dropout(x, 1.0, training=True), torch.zeros_like(x))
    y = x.clone()
    out = sdk_dropout.dropout(y, 0.5, training=True, inplace=True)
    assert out.data_ptr() == y.data_ptr()
    with pytest.raises(ValueError, match="between 0 and 1"):
        sdk_dropout.dropout(x, 1.5, training=True)


def test_dropout_reruns_to_itself_from_the_fits_seed_and_differs_with_another() -> None:
    x = torch.randn(1000)
    seed_everything(7)
    first = sdk_dropout.dropout(x, 0.5)
    seed_everything(7)
    assert torch.equal(sdk_dropout.dropout(x, 0.5), first)
    seed_everything(8)
    assert not torch.equal(sdk_dropout.dropout(x, 0.5), first)


def test_dropout_gradient_is_the_kept_mask() -> None:
    sdk_dropout.seed(0)
    x = torch.randn(500, requires_grad=True)
    out = sdk_dropout.dropout(x, 0.3)
    out.sum().backward()
    assert x.grad is not None
    assert torch.allclose(x.grad, (out.detach() != 0).float() / 0.7)


def test_feature_dropout_draws_only_for_nonzeros_and_has_dropouts_law() -> None:
    rng = np.random.default_rng(0)
    dense = rng.random((400, 500)) < 0.02  # 2% nonzero, like bag-of-words features
    x = torch.from_numpy(dense * rng.random(dense.shape)).float()
    sdk_dropout.seed(1)
    before = sdk_dropout._RNG.bit_generator.state["state"]["state"]
    out = feature_dropout(x, 0.5, training=True)
    assert (out[x == 0] == 0).all()  # a dropped zero stays zero
    kept = out[x != 0] != 0
    assert abs(float(kept.float().mean()) - 0.5) < 4 * np.sqrt(0.25 / int((x != 0).sum()))
    assert torch.allclose(out[x != 0][kept], 2 * x[x != 0][kept])
    sdk_dropout.seed(1)
    sdk_dropout._RNG.random(int((x != 0).sum()), dtype=np.float32)  # as many draws as nonzeros, no more
    assert sdk_dropout._RNG.bit_generator.state["state"]["state"] != before
    assert torch.equal(feature_dropout(x, 0.5, training=False), x)


def test_feature_dropout_of_dense_or_differentiable_input_is_plain_dropout() -> None:
    sdk_dropout.seed(2)
    x = torch.rand(100, 30) + 0.1  # no zero at all
    out = feature_dropout(x, 0.5, training=True)
    assert 0.3 < float((out != 0).float().mean()) < 0.7
    w = torch.rand(20, 5, requires_grad=True)
    feature_dropout(w, 0.5, training=True).sum().backward()
    assert w.grad is not None


def test_fast_dropout_is_what_torch_calls_while_training_and_is_undone_after() -> None:
    seen = []
    original = F.dropout
    model = nn.Linear(3, 2)
    x, y = torch.randn(10, 3), torch.randint(0, 2, (10,))
    with pytest.raises(RuntimeError, match="boom"):
        with sdk_dropout.fast_dropout():
            assert F.dropout is sdk_dropout.dropout
            assert nn.Dropout(0.5)(torch.ones(4)).shape == (4,)  # nn.Dropout reaches it through F.dropout
            raise RuntimeError("boom")
    assert F.dropout is original
    config = {"max_epochs": 2, "patience": 5, "lr": 0.01, "weight_decay": 0.0}

    def logits() -> torch.Tensor:
        seen.append(F.dropout is sdk_dropout.dropout)
        return model(x)

    train_epochs(model, make_optimizer(model.parameters(), config), logits, logits, y, y, config, cpu_context())
    assert seen and all(seen) and F.dropout is original


def test_a_nested_fast_dropout_hands_the_outer_loop_the_fast_kernel_back() -> None:
    """An inner loop inside a fit (the roofline bench's hand loop runs at the SDK's per-epoch check) must not leave
    the rest of the outer fit on torch's kernel."""
    original = F.dropout
    with sdk_dropout.fast_dropout():
        with sdk_dropout.fast_dropout():
            pass
        assert F.dropout is sdk_dropout.dropout
    assert F.dropout is original


def test_the_optimizer_is_fused_with_the_same_update_as_adam() -> None:
    torch.manual_seed(0)
    a, b = nn.Linear(5, 3), nn.Linear(5, 3)
    b.load_state_dict(a.state_dict())
    fused = make_optimizer(a.parameters(), {"lr": 0.01, "weight_decay": 1e-3})
    plain = torch.optim.Adam(b.parameters(), lr=0.01, weight_decay=1e-3)
    assert fused.defaults["fused"] is True
    x = torch.randn(32, 5)
    for _ in range(20):
        for model, opt in ((a, fused), (b, plain)):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-5)


@pytest.mark.parametrize("method", [MLP, NAGphormer], ids=["mlp", "nagphormer"])
def test_a_per_node_models_rows_are_its_full_forwards_rows(method, multiclass) -> None:
    """The rows a per-node model trains and validates on are the rows its forward over every node gives them."""
    bundle, train, _ = multiclass
    config = method.resolve_config({"hidden": 64, "norm": "layer"} if method is MLP else {"hidden": 64})
    instance = method()
    inputs = instance.model_inputs(bundle, config, torch.device("cpu"))
    model = instance.build_model(config, bundle.features.shape[1], bundle.num_classes)
    model.eval()
    nodes = torch.as_tensor(train)
    rows = instance.row_inputs(inputs, nodes)
    with torch.no_grad():
        assert torch.allclose(model(*rows), model(*inputs)[nodes], atol=1e-5)


def test_a_method_with_message_passing_runs_every_node(multiclass) -> None:
    bundle, train, _ = multiclass
    assert GCN().row_inputs((torch.zeros(3, 2),), torch.tensor([0])) is None


def _rows_out_of(monkeypatch, method, part) -> list[int]:
    """The row count of every output of ``part(model)`` in the models ``method`` builds from now on."""
    rows: list[int] = []
    original = method.build_model

    def spied(self, config, in_dim, out_dim):
        model = original(self, config, in_dim, out_dim)
        part(model).register_forward_hook(lambda module, args, out: rows.append(out.shape[0]))
        return model

    monkeypatch.setattr(method, "build_model", spied)
    return rows


def test_batch_statistics_keep_the_training_forward_on_every_node(multiclass, monkeypatch) -> None:
    """A batch norm's training statistics are the batch's: with one, the training forward stays whole."""
    bundle, train, val = multiclass
    shapes = _rows_out_of(monkeypatch, MLP, lambda model: model)
    for norm, train_rows in (("batch", bundle.num_nodes), ("none", len(train))):
        shapes.clear()
        config = MLP.resolve_config({"norm": norm, "max_epochs": 2})
        MLP().fit(bundle, train, val, config, cpu_context())
        assert shapes[:2] == [train_rows, len(val)], norm  # epoch 1: the training forward, then validation


@pytest.mark.parametrize("jk", ["cat", "max", "lstm"])
def test_a_readout_on_rows_gives_the_rows_of_the_whole_readout(jk, multiclass) -> None:
    """JKNet's graph layers run on every node and its readout on the rows asked for: the same logits for them."""
    bundle, train, _ = multiclass
    config = JKNet.resolve_config({"jk": jk, "hidden": 32, "num_layers": 3, "norm": "batch", "conv": "sage"})
    instance = JKNet()
    inputs = instance.model_inputs(bundle, config, torch.device("cpu"))
    model = instance.build_model(config, bundle.features.shape[1], bundle.num_classes)
    model.eval()
    nodes = torch.as_tensor(train)
    with torch.no_grad():
        on_rows = instance.node_logits(model, inputs, nodes, training=True)()
        assert torch.allclose(on_rows, model(*inputs)[nodes], atol=1e-5)


def test_a_readout_on_rows_reads_the_training_rows_then_the_validation_rows(multiclass, monkeypatch) -> None:
    """In a fit the LSTM readout sees the training rows, then the validation rows; predict reads every node."""
    bundle, train, val = multiclass
    seen = _rows_out_of(monkeypatch, JKNet, lambda model: model.jk)
    config = JKNet.resolve_config({"jk": "lstm", "hidden": 32, "num_layers": 3, "norm": "batch", "max_epochs": 2})
    state = JKNet().fit(bundle, train, val, config, cpu_context())
    assert seen[:2] == [len(train), len(val)]
    seen.clear()
    probs = JKNet().predict(state, bundle)
    assert seen == [bundle.num_nodes] and probs.shape == (bundle.num_nodes, bundle.num_classes)
