"""The parts with their own code: linear attentions, hop tokens, Laplacian PE, SDK hooks, resource errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import methods.sdk.memory as sdk_memory
from contract.families import load_families
from contract.v1 import method_service_pb2 as pb
from contract.wire import make_bundle
from methods.families import method_classes
from methods.gnn import FAGCN, GAT, GCNII, GIN, GPRGNN, GATv2, GraphSAGE, JKNet
from methods.graphtransformer import GraphGPS, NAGphormer, Polynormer, SGFormer
from methods.graphtransformer.model import PolynormerGlobalAttention, SGFormerAttention
from methods.sdk import ResourceError
from methods.sdk.graph_ops import laplacian_eigenvectors
from methods.sdk.service import MethodServicer
from tests.methods.helpers import cpu_context
from tests.methods.test_methods_catalog import all_methods


def _dense_adjacency(bundle) -> np.ndarray:
    n = bundle.num_nodes
    a = np.zeros((n, n))
    a[bundle.edge_index[0], bundle.edge_index[1]] = 1.0
    d = a.sum(1)
    return a / np.sqrt(np.outer(d, d))


def test_polynormer_attention_equals_its_quadratic_form() -> None:
    torch.manual_seed(0)
    attn = PolynormerGlobalAttention(hidden=8, heads=2, beta=0.9, dropout=0.0, qk_shared=False).eval()
    x = torch.randn(11, 8)
    got = attn(x)
    q = torch.sigmoid(attn.q_lin(x)).view(11, 2, 4)
    k = torch.sigmoid(attn.k_lin(x)).view(11, 2, 4)
    v = attn.v_lin(x).view(11, 2, 4)
    scores = torch.einsum("nhd,mhd->hnm", q, k)  # N x N per head: what the linear form avoids building
    out = torch.einsum("hnm,mhd->nhd", scores / scores.sum(-1, keepdim=True), v).reshape(11, 8)
    want = torch.relu(attn.lin_out(attn.ln(out) * (attn.h_lin(x) + 0.9)))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_sgformer_attention_equals_its_quadratic_form() -> None:
    torch.manual_seed(0)
    attn = SGFormerAttention(hidden=6, heads=2)
    x = torch.randn(9, 6)
    q, k, v = (f(x).view(9, 2, 6) for f in (attn.q, attn.k, attn.v))
    q, k = q / q.norm(), k / k.norm()
    # softmax-free: out_i = (sum_j (q_i·k_j) v_j + N v_i) / (sum_j q_i·k_j + N), averaged over heads
    scores = torch.einsum("nhd,mhd->hnm", q, k) + 9 * torch.eye(9)
    want = torch.einsum("hnm,mhd->nhd", scores / scores.sum(-1, keepdim=True), v).mean(1)
    torch.testing.assert_close(attn(x), want, atol=1e-5, rtol=1e-4)


def test_nagphormer_tokens_carry_positional_encodings(multiclass) -> None:
    bundle, _, _ = multiclass
    config = NAGphormer.resolve_config({"hops": 2, "pe_dim": 3})
    (tokens,) = NAGphormer().model_inputs(bundle, config, torch.device("cpu"))
    assert tokens.shape == (bundle.num_nodes, 3, bundle.features.shape[1] + 3)
    np.testing.assert_allclose(tokens[:, 0, :6].numpy(), bundle.features)


@pytest.mark.parametrize("n", [40, 2600])
def test_laplacian_eigenvectors_solve_the_eigenproblem(n) -> None:
    rng = np.random.default_rng(0)
    from orchestrator.data.graph import canonical_edges

    edges = canonical_edges(rng.integers(0, n, (2, 4 * n)), n)
    bundle = make_bundle(np.ones((n, 1), np.float32), edges, np.arange(n) % 2, 2)
    vecs = laplacian_eigenvectors(bundle, 4)
    assert vecs.shape == (n, 4)
    a = _dense_adjacency(bundle) if n < 100 else None
    for j in range(4):
        v = vecs[:, j]
        assert abs(np.linalg.norm(v) - 1) < 1e-3
        if a is not None:
            av = a @ v
            lam = v @ av
            np.testing.assert_allclose(av, lam * v, atol=1e-4)
    np.testing.assert_array_equal(
        vecs, laplacian_eigenvectors(make_bundle(np.ones((n, 1), np.float32), edges, np.arange(n) % 2, 2), 4)
    )


def test_sage_and_gin_aggregate_without_self_loops(multiclass) -> None:
    bundle, _, _ = multiclass
    for method in (GraphSAGE, GIN):
        _, edges = method().model_inputs(bundle, method.default_config, torch.device("cpu"))
        assert (edges[0] != edges[1]).all()
        assert edges.shape[1] == bundle.edge_index.shape[1] - bundle.num_nodes


@pytest.mark.parametrize("method", all_methods(), ids=lambda m: m.name)
def test_param_groups_cover_every_parameter_once(method, multiclass) -> None:
    bundle, _, _ = multiclass
    model = method().build_model(method.default_config | ({"num_layers": 2} if method is GCNII else {}), 6, 3)
    groups = method().param_groups(model, method.default_config)
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids))
    assert set(ids) == {id(p) for p in model.parameters()}


def test_paper_specific_weight_decay_groups() -> None:
    config = GCNII.resolve_config({"num_layers": 2, "conv_weight_decay": 0.01, "weight_decay": 5e-4})
    groups = GCNII().param_groups(GCNII().build_model(config, 6, 3), config)
    assert groups[0]["weight_decay"] == 0.01 and "weight_decay" not in groups[1]
    config = GPRGNN.default_config
    groups = GPRGNN().param_groups(GPRGNN().build_model(config, 6, 3), config)
    assert groups[1]["weight_decay"] == 0.0 and len(groups[1]["params"]) == 1  # the PageRank weights


def test_polynormer_warm_up_then_global_phase(multiclass) -> None:
    bundle, train, val = multiclass
    config = Polynormer.resolve_config({"local_epochs": 3, "max_epochs": 6, "patience": 20, "hidden": 32})
    ctx = cpu_context()
    state = Polynormer().fit(bundle, train, val, config, ctx)
    assert state.module.use_global
    assert ctx.info["best_epoch"] >= 3  # selection restarted when the global phase began
    # early stopping cannot end the warm-up: patience 1 still reaches the global phase
    config = Polynormer.resolve_config({"local_epochs": 5, "max_epochs": 8, "patience": 20, "hidden": 32}) | {
        "patience": 1
    }
    ctx = cpu_context()
    state = Polynormer().fit(bundle, train, val, config, ctx)
    assert ctx.info["epochs"] >= 6 and state.module.use_global


def test_quadratic_attention_that_cannot_fit_is_a_resource_error() -> None:
    n = 300_000
    bundle = make_bundle(np.zeros((n, 1), np.float32), np.stack([np.arange(n), np.arange(n)]), np.arange(n) % 2, 2)
    config = GraphGPS.resolve_config({"attn_type": "multihead"})
    with pytest.raises(ResourceError, match=r"GiB.*free"):
        GraphGPS().fit(bundle, np.arange(10), np.arange(10, 20), config, cpu_context())
    GraphGPS().check_resources(bundle, GraphGPS.default_config, torch.device("cpu"))  # Performer: linear, fits


@pytest.mark.parametrize("method", [Polynormer, NAGphormer, SGFormer], ids=lambda m: m.name)
def test_linear_attention_refuses_when_memory_is_short(method, multiclass, monkeypatch) -> None:
    bundle, train, val = multiclass
    monkeypatch.setattr(sdk_memory, "available_memory_bytes", lambda device: 1024)
    with pytest.raises(ResourceError, match=method.name):
        method().fit(bundle, train, val, method.default_config, cpu_context())


def test_jknet_lstm_readout_refuses_what_cannot_fit(multiclass, monkeypatch) -> None:
    bundle, train, val = multiclass
    lstm = JKNet.resolve_config({"jk": "lstm", "hidden": 512, "num_layers": 8, "max_epochs": 2})
    monkeypatch.setattr(sdk_memory, "available_memory_bytes", lambda device: 64 * 2**20)
    with pytest.raises(ResourceError, match=r"jknet: an LSTM readout over 8 layers of 512 on \d+ nodes needs about"):
        JKNet().fit(bundle, train, val, lstm, cpu_context())
    JKNet().fit(bundle, train, val, {**lstm, "hidden": 32, "num_layers": 2}, cpu_context())  # small LSTM fits
    JKNet().fit(bundle, train, val, {**lstm, "jk": "cat"}, cpu_context())  # cat grows with the graph only: unchecked


def test_graph_transformer_family_describes_itself() -> None:
    family = load_families()["graphtransformer"]
    servicer = MethodServicer(family.name, method_classes(family))
    reply = servicer.Describe(pb.DescribeRequest(), None)
    assert [m.name for m in reply.methods] == ["polynormer", "sgformer", "nagphormer", "graphgps"]
    assert all(m.family == "graphtransformer" and len(m.search_space) > 5 for m in reply.methods)


EDGE_ATTENTION = [  # method, a config wider than the budget, what makes it narrow, what the refusal names
    *(
        pytest.param(
            gat,
            {"hidden": 512, "heads": 8, "num_layers": 6},
            {"hidden": 16, "num_layers": 2},
            r"6 attention layers of 512 over \d+ edges",
            id=gat.name,
        )
        for gat in (GAT, GATv2)
    ),
    pytest.param(
        FAGCN,
        {"hidden": 512, "num_layers": 6},
        {"hidden": 16, "num_layers": 2},
        r"6 FAGCN layers of 512 over \d+ edges",
        id="fagcn",
    ),
    # the same Polynormer with GCN local layers fits: only its GAT layers keep per-edge messages
    pytest.param(
        Polynormer,
        {"hidden": 512, "heads": 8, "local_layers": 1, "global_layers": 0, "local_conv": "gat"},
        {"local_conv": "gcn"},
        r"a graph of \d+ nodes",
        id="polynormer",
    ),
]


@pytest.mark.parametrize(("method", "wide", "narrow", "named"), EDGE_ATTENTION)
def test_edge_attention_refuses_what_cannot_fit(method, wide, narrow, named, multiclass, monkeypatch) -> None:
    """Layers that weight every edge's full-width message by a learned coefficient keep those messages for the
    backward."""
    bundle, train, val = multiclass
    config = method.resolve_config({**wide, "max_epochs": 2})
    monkeypatch.setattr(sdk_memory, "available_memory_bytes", lambda device: 2 * 2**20)
    with pytest.raises(ResourceError, match=rf"{method.name}: {named} needs about"):
        method().fit(bundle, train, val, config, cpu_context())
    method().fit(bundle, train, val, {**config, **narrow}, cpu_context())  # a narrow one fits


def test_gcnii_depth_refuses_what_cannot_fit(multiclass, monkeypatch) -> None:
    """GCNII keeps ~12 floats per node, unit and layer: the paper's 64 x 64 on a 20k-node graph
    needs ~3.8 GiB, more than a 4 GiB sandbox leaves, and is refused there with the estimate."""
    from orchestrator.conformance.graphs import make_case

    large = make_case("large", "20k nodes", 20481, 5, 64, avg_degree=3.0, seed=4).bundle
    monkeypatch.setattr(sdk_memory, "available_memory_bytes", lambda device: 3.4 * 2**30)  # 4 GiB minus the service
    with pytest.raises(ResourceError, match=r"gcnii: 64 GCNII layers of 64 on 20481 nodes needs about 3\.\d GiB"):
        GCNII().check_resources(large, GCNII.default_config, torch.device("cpu"))
    monkeypatch.setattr(sdk_memory, "available_memory_bytes", lambda device: 7.4 * 2**30)  # compose's 8 GiB container
    GCNII().check_resources(large, GCNII.default_config, torch.device("cpu"))
    bundle, train, val = multiclass
    monkeypatch.setattr(sdk_memory, "available_memory_bytes", lambda device: 2 * 2**20)
    config = GCNII.resolve_config({"hidden": 512, "num_layers": 64, "max_epochs": 2})
    with pytest.raises(ResourceError, match=r"gcnii: 64 GCNII layers of 512"):
        GCNII().fit(bundle, train, val, config, cpu_context())
    GCNII().fit(bundle, train, val, {**config, "hidden": 32, "num_layers": 2}, cpu_context())  # a shallow one fits


@pytest.mark.parametrize("aggr", ["mean", "sum", "max"])
@pytest.mark.parametrize("in_dim", [40, 4], ids=["narrowing", "widening"])
def test_a_sage_layer_that_maps_first_is_pygs_layer(aggr, in_dim, monkeypatch) -> None:
    """The same function as PyG's SAGE layer with the same weights (an isolated node too); a narrowing sum or mean
    gathers rows of the output width, every other layer its input rows."""
    from torch_geometric.nn import SAGEConv

    from methods.gnn.model import MapFirstSAGE

    torch.manual_seed(0)
    x, edge_index = torch.randn(30, in_dim), torch.randint(1, 30, (2, 120))  # node 0 has no neighbour
    ours, theirs = MapFirstSAGE(in_dim, 8, aggr=aggr), SAGEConv(in_dim, 8, aggr=aggr)
    theirs.load_state_dict(ours.state_dict())
    widths: list[int] = []
    original = MapFirstSAGE.propagate

    def spied(self, edge_index, x, **kwargs):
        widths.append(x[0].shape[1])
        return original(self, edge_index, x=x, **kwargs)

    monkeypatch.setattr(MapFirstSAGE, "propagate", spied)
    assert torch.allclose(ours(x, edge_index), theirs(x, edge_index), atol=1e-5)
    assert widths == [8 if aggr != "max" and in_dim > 8 else in_dim]


@pytest.mark.parametrize("train_eps", [False, True])
def test_a_gin_layer_that_maps_first_is_pygs_layer(train_eps) -> None:
    from torch import nn
    from torch_geometric.nn import GINConv

    from methods.gnn.model import MapFirstGIN

    torch.manual_seed(0)
    x, edge_index = torch.randn(30, 40), torch.randint(1, 30, (2, 120))
    ours = MapFirstGIN(nn.Sequential(nn.Linear(40, 8), nn.ReLU(), nn.Linear(8, 8)), train_eps=train_eps)
    theirs = GINConv(nn.Sequential(nn.Linear(40, 8), nn.ReLU(), nn.Linear(8, 8)), train_eps=train_eps)
    theirs.load_state_dict(ours.state_dict())
    if train_eps:
        for layer in (ours, theirs):
            layer.eps.data.fill_(0.3)
    assert torch.allclose(ours(x, edge_index), theirs(x, edge_index), atol=1e-5)
