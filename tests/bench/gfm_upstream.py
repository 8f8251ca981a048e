"""Upstream side of the GFM benchmark: fit and predict through the authors' own code.

Run by ``bench_gfm`` with the upstream checkout's own interpreter (its virtual
environment), never with ours; it imports only the upstream package, torch and
numpy, plus the standard-library probe beside it::

    <checkout>/.venv/bin/python tests/bench/gfm_upstream.py METHOD GRAPH_NPZ OUT_DIR

``UPSTREAM_ROOT`` names the checkout. The graph file holds the same canonical
graph, split and run settings our side gets (see ``bench_gfm``). What runs:

* graphany: ``GraphDataset.prepare_prop_features_logits_and_dist_features``
  (mean aggregation, per-channel ``gelss`` least squares, the per-node
  scikit-learn perplexity search) and ``GraphAny.forward``, on the attention
  weights of the released checkpoint. DGL has no build for current torch: its
  four calls used here are stood in by PyG's scatter-mean (``_stand_in_dgl``).
* gvt: ``HyperparameterTuner.tune_recurrent_depth`` (a frozen RGVT and a
  predictor trained at every depth 1..max_depth), with the adjacency built once
  as upstream's ``evaluate_dataset_stage`` does, then the chosen depth's softmax.
* node4all: ``channel_inference_neighbor_sampling`` with its defaults (full
  graph, feature chunks of 1e6 tokens) and ``PredictorTrainer.train`` on an MLP
  predictor, then its softmax.
* nodepfn: ``TransformerModel`` (GPS layers) built as ``load_model_only_inference``
  builds it, one forward pass on the random parameters our side uses.
* g2tfm: the ICL path of G2T-FM's ``bin/g2t_fm.py`` (``TabPFN2`` with shared
  linear value embeddings, random-subspace positional embeddings, shuffled
  labels; ``evaluate``'s query batches of 4,096 under ``inference_mode``) on the
  ``tabpfn`` package's ``PerFeatureEncoderLayer`` (the module G2T-FM copies into
  ``lib/tabpfn``), our random parameters loaded into it. ``bin/g2t_fm.py`` itself
  cannot be imported here (DGL, its checkpoint files), so ``TabPFN2``'s
  constructor and forward for that configuration are restated below, line for line.

* graphpfn: ``GraphPFN.forward`` (``lib/graphpfn/model.py``) as ``evaluate`` in
  ``bin/graphpfn_evaluate.py`` calls it, one forward pass over the whole graph,
  LimiX built by upstream's ``load_model`` from a checkpoint file in LimiX's
  format holding our random parameters; the adapters' DGL kernels are stood in
  (``_stand_in_dgl``) and ``lib``'s package files are not run (``_graphpfn_packages``).

Head training runs a fixed number of epochs on both sides (patience = epochs), so
that the two do the same work; the frozen representations are compared to float round-off.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gfm_probe  # noqa: E402

ROOT = Path(os.environ["UPSTREAM_ROOT"]).resolve()
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

NOTES: list[str] = []


def _load(path: Path) -> tuple[dict, dict]:
    with np.load(path) as raw:
        arrays = {k: raw[k] for k in raw.files}
    return arrays, json.loads(str(arrays.pop("job")))


def _masks(n: int, arrays: dict) -> list[torch.Tensor]:
    out = []
    for name in ("train", "val", "test"):
        m = torch.zeros(n, dtype=torch.bool)
        m[torch.from_numpy(arrays[name])] = True
        out.append(m)
    return out


def run_graphany(arrays: dict, job: dict, out: Path) -> dict:
    _stand_in_dgl()
    import dgl
    from graphany.data import GraphDataset
    from graphany.model import GraphAny

    cfg_model = job["graphany_config"]
    x = torch.from_numpy(arrays["x"])
    y = torch.from_numpy(arrays["y"])
    ei = torch.from_numpy(arrays["edge_index"])
    train = torch.from_numpy(arrays["train"])

    def work():
        state = torch.load(job["graphany_state"], map_location="cpu", weights_only=True)
        model = GraphAny(**cfg_model)
        model.load_state_dict(state)
        model.eval()
        # upstream's load_dataset tail: remove self-loops, to_simple; the dataset object is built without
        # downloading anything (its __init__ loads a named dataset), then its own preprocessing runs
        g = dgl.to_simple(dgl.remove_self_loop(dgl.graph((ei[0], ei[1]), num_nodes=x.shape[0])))
        ds = GraphDataset.__new__(GraphDataset)
        ds.cfg = types.SimpleNamespace(
            feat_channels=list(cfg_model["feat_channels"]),
            pred_channels=list(cfg_model["pred_channels"]),
            n_per_label_examples=0,
            entropy=cfg_model["entropy"],
        )
        ds.name, ds.preprocess_device = "bench", torch.device("cpu")
        ds.cache_f_name = str(out / "ga_cache.pt")  # upstream caches to files; fresh names, so it computes
        ds.dist_f_name = str(out / "ga_dist.pt")
        ds.label, ds.num_class, ds.train_indices = y, int(job["num_classes"]), train
        _features, preds, dist = ds.prepare_prop_features_logits_and_dist_features(g, x, n_hops=2)
        with torch.no_grad():
            fused, _ = model(preds, dist=dist)
        return torch.softmax(fused, dim=1)

    probs, stats = gfm_probe.measure(work)
    np.savez(out / "outputs.npz", probs=probs.numpy())
    return stats


def _stand_in_dgl() -> None:
    """DGL has no build for this torch (its C++ graphbolt/tensoradapter libraries exist only up to torch 2.2).

    The dataset modules import it at module level; of its API the code timed here
    uses GraphAny's preprocessing (``graph``, ``remove_self_loop``, ``to_simple``
    and ``update_all(copy_u, mean)``) and GraphPFN's graph attention
    (``ops.u_dot_v``, ``ops.edge_softmax``, ``ops.u_mul_e_sum``). The stand-in
    gives those through PyG's ``scatter`` and ``softmax`` and, for DGL's sampled
    dense-dense (SDDMM) and sparse-dense (SpMM) kernels, torch's CSR
    ``sampled_addmm`` and ``sparse.mm`` (the closest upstream-equivalent kernels);
    everything else runs upstream's own code.
    """
    try:
        import dgl

        return
    except (ImportError, OSError) as exc:
        NOTES.append(
            f"DGL not usable here ({type(exc).__name__}); graph/remove_self_loop/to_simple/update_all(copy_u, mean) "
            "stood in by PyG's scatter-mean; ops.u_dot_v/u_mul_e_sum (DGL's SDDMM/SpMM) by torch's CSR "
            "sampled_addmm/sparse.mm, ops.edge_softmax by PyG's softmax"
        )
    from torch_geometric.utils import coalesce, scatter, softmax

    class DGLGraph:
        idtype = torch.int64

        def __init__(self, src, dst, n):
            self.src, self.dst, self.n, self.ndata = src.long(), dst.long(), int(n), {}

        def num_nodes(self):
            return self.n

        number_of_nodes = num_nodes

        def num_edges(self):
            return int(self.src.numel())

        def to(self, device):
            return self

        def update_all(self, message, reduce):
            (_, source), (_, _, out) = message, reduce
            self.ndata[out] = scatter(self.ndata[source][self.src], self.dst, 0, self.n, reduce="mean")

    class StandIn(types.ModuleType):
        """Any other DGL name resolves to a class that refuses to be used (the modules importing it stay importable)."""

        def __getattr__(self, name: str):
            if name.startswith("__"):
                raise AttributeError(name)

            def refuse(*_a, **_k):
                raise NotImplementedError(f"{self.__name__}.{name} needs DGL, which is not usable here")

            value = type(name, (), {"__init__": refuse})
            setattr(self, name, value)
            return value

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path, target=None):
            return (
                importlib.util.spec_from_loader(fullname, self, is_package=True)
                if fullname.split(".")[0] == "dgl"
                else None
            )

        def create_module(self, spec):
            return StandIn(spec.name)

        def exec_module(self, module):
            module.__path__ = []

    sys.meta_path.insert(0, Finder())
    import dgl
    import dgl.function as fn
    import dgl.ops

    def in_edges(g):  # DGL's SDDMM/SpMM kernels run on the graph as sparse rows; torch's CSR kernels do the same here
        if not hasattr(g, "order"):
            g.order = torch.argsort(g.dst, stable=True)
            g.crow = torch.zeros(g.n + 1, dtype=torch.int64)
            g.crow[1:] = torch.bincount(g.dst, minlength=g.n).cumsum(0)
            g.col = g.src[g.order].contiguous()
        return lambda values: torch.sparse_csr_tensor(g.crow, g.col, values, size=(g.n, g.n), check_invariants=False)

    def slices(u):  # (N, *, D) -> (B, N, D): one matrix per feature slice
        return u.reshape(u.shape[0], -1, u.shape[-1]).transpose(0, 1).contiguous()

    def u_dot_v(g, u, v):  # (N, *, D) x (N, *, D) -> (E, *, 1): edge (s -> d) scores u[s] . v[d]
        matrix, ub, vb = in_edges(g), slices(u), slices(v)
        pattern = matrix(u.new_zeros(g.num_edges()))
        sorted_scores = torch.stack(
            [torch.sparse.sampled_addmm(pattern, vb[i], ub[i].T, beta=0.0).values() for i in range(len(ub))], dim=1
        )
        out = torch.empty_like(sorted_scores)
        out[g.order] = sorted_scores  # back to the graph's edge order
        return out.view(g.num_edges(), *u.shape[1:-1], 1)

    def u_mul_e_sum(g, u, e):  # sum over the in-edges of each node of u[src] * e, e (E, *, 1)
        matrix, ub = in_edges(g), slices(u)
        weights = e.reshape(g.num_edges(), -1)[g.order]
        out = torch.stack([torch.sparse.mm(matrix(weights[:, i].contiguous()), ub[i]) for i in range(len(ub))])
        return out.transpose(0, 1).reshape(g.n, *u.shape[1:])

    dgl.ops.u_dot_v, dgl.ops.u_mul_e_sum = u_dot_v, u_mul_e_sum
    dgl.ops.edge_softmax = lambda g, e: softmax(e, g.dst, num_nodes=g.n)
    fn.copy_u = lambda field, msg: ("copy_u", field)
    fn.mean = lambda msg, out: ("mean", msg, out)
    dgl.DGLGraph = DGLGraph
    dgl.graph = lambda edges, num_nodes=None, idtype=None: DGLGraph(
        edges[0], edges[1], num_nodes if num_nodes is not None else int(max(edges[0].max(), edges[1].max())) + 1
    )

    def keep(g: DGLGraph, mask: torch.Tensor) -> DGLGraph:
        return DGLGraph(g.src[mask], g.dst[mask], g.n)

    dgl.remove_self_loop = lambda g: keep(g, g.src != g.dst)
    dgl.to_simple = lambda g: DGLGraph(*coalesce(torch.stack([g.src, g.dst]), num_nodes=g.n), g.n)


def run_gvt(arrays: dict, job: dict, out: Path) -> dict:
    _stand_in_dgl()
    import stages.stage2 as stage2
    from model.gvt import GraphViewTransformation
    from utils.training import TrainerConfig

    x = torch.from_numpy(arrays["x"])
    y = torch.from_numpy(arrays["y"])
    ei = torch.from_numpy(arrays["edge_index"])
    masks = _masks(x.shape[0], arrays)
    epochs, max_depth = int(job["epochs"]), int(job["max_depth"])
    args = types.SimpleNamespace(
        checkpoint=job["gvt_weights"], predictor_type="mlp", adj_max_hop=2, vt_depth=2, max_depth=max_depth
    )
    config = TrainerConfig()
    config.max_epochs, config.patience = epochs, epochs
    reps: dict[int, torch.Tensor] = {}
    heads: dict[int, torch.nn.Module] = {}
    upstream_gvt, upstream_predictor = stage2.recurrent_gvt, stage2.Predictor

    def recording_gvt(*a, manual_depth, **k):  # keeps every depth's representation, as our cache does
        reps[manual_depth] = upstream_gvt(*a, manual_depth=manual_depth, **k)
        return reps[manual_depth]

    class RecordingPredictor(upstream_predictor):  # keeps every depth's trained predictor for the softmax
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            heads[len(heads) + 1] = self

    stage2.recurrent_gvt, stage2.Predictor = recording_gvt, RecordingPredictor

    def work():
        torch.manual_seed(0)
        a_rw, a_sym = GraphViewTransformation._build_adjacency_matrices(ei, x.size(0))  # as evaluate_dataset_stage
        results = stage2.HyperparameterTuner(max_depth, config, torch.device("cpu")).tune_recurrent_depth(
            x, ei, y, masks, args, A_rw=a_rw, A_sym=a_sym
        )
        best = max(results, key=lambda d: results[d]["val"])
        with torch.no_grad():
            probs = torch.softmax(heads[best].eval()(reps[best]), dim=1)
        return results, best, probs

    (results, best, probs), stats = gfm_probe.measure(work)
    np.savez(
        out / "outputs.npz", probs=probs.numpy(), representations=np.stack([reps[d].numpy() for d in sorted(reps)])
    )
    return {**stats, "depth": best, "val_acc": {str(d): r["val"] for d, r in results.items()}}


def run_node4all(arrays: dict, job: dict, out: Path) -> dict:
    _stand_in_dgl()
    from adaptation.node_level import PredictorTrainConfig, PredictorTrainer
    from channel_models.batch_inference import channel_inference_neighbor_sampling
    from channel_models.cgt import CGTEncoder
    from models.setup import setup_model
    from torch_geometric.data import Data

    x = torch.from_numpy(arrays["x"])
    y = torch.from_numpy(arrays["y"])
    ei = torch.from_numpy(arrays["edge_index"])
    train, val, test = _masks(x.shape[0], arrays)
    graph = Data(x=x, edge_index=ei, y=y, train_mask=train, val_mask=val, test_mask=test)
    epochs = int(job["epochs"])
    args = types.SimpleNamespace(predictor_type="mlp", hidden_dim=512, feat_drop=0.5)

    def work():
        torch.manual_seed(0)
        enc = CGTEncoder(num_layers=10, n_hops=8, n_filters=1)
        enc.load_state_dict(torch.load(job["node4all_weights"], map_location="cpu"))
        enc.eval()
        enc.requires_grad_(False)
        with torch.no_grad():
            z = channel_inference_neighbor_sampling(model=enc, data=graph, show_progress=False)
        pred = setup_model(in_dim=z.size(1), out_dim=int(y.max()) + 1, args=args, purpose="pred")
        trainer = PredictorTrainer(PredictorTrainConfig(lr=1e-3, max_epochs=epochs, patience=epochs))
        result = trainer.train(predictor=pred, features=z, graph=graph, show_progress=False)
        pred.eval()
        with torch.no_grad():
            probs = torch.softmax(pred(z), dim=1)
        return z, probs, result

    (z, probs, result), stats = gfm_probe.measure(work)
    np.savez(out / "outputs.npz", probs=probs.numpy(), embedding=z.numpy())
    return {**stats, "val_acc": result["val"]}


def run_nodepfn(arrays: dict, job: dict, out: Path) -> dict:
    """``TransformerModel`` built as ``load_model_only_inference`` builds it, on the same random parameters."""
    sys.path.insert(0, str(ROOT / "nodepfn"))
    import typing

    import torch.nn.modules.transformer as torch_transformer

    for name in ("Optional", "Tensor", "Module"):  # names torch <= 2.2 re-exported there; layer.py imports them from it
        if not hasattr(torch_transformer, name):
            NOTES.append(
                f"torch.nn.modules.transformer.{name} re-exported for layer.py (torch 2.2 had it; this torch does not)"
            )
            setattr(
                torch_transformer,
                name,
                {"Optional": typing.Optional, "Tensor": torch.Tensor, "Module": torch.nn.Module}[name],
            )
    import encoders
    from transformer import TransformerModel

    arch = job["nodepfn_arch"]
    x, y, edges = (torch.from_numpy(arrays[k]) for k in ("pfn_x", "pfn_y", "pfn_edge_index"))
    n_ctx = int(arrays["pfn_ctx"])

    def work():
        e, nhid = arch["emsize"], arch["emsize"] * arch["nhid_factor"]
        model = TransformerModel(
            encoders.Linear(arch["num_features"], e, replace_nan_by_zero=True),
            arch["max_num_classes"],
            e,
            arch["nhead"],
            nhid,
            arch["nlayers"],
            y_encoder=encoders.Linear(1, e),
            efficient_eval_masking=True,
        )
        model.load_state_dict(torch.load(job["nodepfn_state"], weights_only=True))
        model.eval()
        with torch.no_grad():
            return model((None, x, y, edges), single_eval_pos=n_ctx)

    logits, stats = gfm_probe.measure(work)
    np.savez(out / "outputs.npz", logits=logits.numpy())
    return stats


def run_g2tfm(arrays: dict, job: dict, out: Path) -> dict:
    from tabpfn.model.layer import PerFeatureEncoderLayer

    arch = job["g2tfm_arch"]
    e, nhead, nhid, nlayers = arch["emsize"], arch["nhead"], arch["emsize"] * arch["nhid_factor"], arch["nlayers"]
    n_classes = int(job["num_classes"])
    nn, F = torch.nn, torch.nn.functional

    class LayerStack(nn.Module):  # bin/g2t_fm.py, without layer dropout (min = num_layers)
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(
                [
                    PerFeatureEncoderLayer(
                        d_model=e,
                        nhead=nhead,
                        dim_feedforward=nhid,
                        activation="gelu",
                        zero_init=False,
                        precomputed_kv=None,
                        multiquery_item_attention_for_test_set=True,
                        layer_norm_with_elementwise_affine=False,
                    )
                    for _ in range(nlayers)
                ]
            )

        def forward(self, x, **kwargs):
            n_layers = torch.randint(low=nlayers, high=nlayers + 1, size=(1,)).item()
            for layer in self.layers[:n_layers]:
                x = layer(x, **kwargs)
            return x

    class TabPFN2(
        nn.Module
    ):  # bin/g2t_fm.py: untie_value_embeddings = untie_pos_embeddings = false, shuffle_labels = true
        def __init__(self):
            super().__init__()
            self.n_classes = n_classes
            self.shuffle_labels = 2 < n_classes <= 10
            self.pos_embs = nn.Linear(e // 4, e)
            self.m_num = nn.Linear(1, e, bias=False)
            self.y_embedding_weight = nn.Parameter(torch.empty(e))
            self.y_embedding_nan_ind = nn.Parameter(torch.empty(e))
            self.y_embedding_bias = nn.Parameter(torch.empty(e))
            self.transformer_encoder = LayerStack()
            self.decoder = nn.Sequential(nn.Linear(e, nhid), nn.GELU(), nn.Linear(nhid, 10))

        def forward(self, *, x_num, y_train):
            bs, train_size = y_train.shape[0], y_train.shape[1]
            if self.shuffle_labels:
                labels_permutation = torch.randperm(self.n_classes, device=y_train.device)
                y_train_original_ohe = F.one_hot(y_train.to(torch.int64))
                y_train = labels_permutation[y_train.to(torch.int64)].to(torch.float32)
                assert torch.all(y_train_original_ohe == F.one_hot(y_train.to(torch.int64))[..., labels_permutation])
            x_inp = torch.cat([self.m_num(x_num.unsqueeze(-1))], dim=2)
            total_size = x_inp.shape[1]
            y_mult = torch.round(y_train.mean(dim=1, keepdim=True))
            y_test = x_inp.new_ones(bs, total_size - train_size) * y_mult
            nan_ind = x_inp.new_zeros(bs, total_size)
            nan_ind[:, train_size:] = -2.0
            y_emb = (
                torch.cat([y_train, y_test], dim=1).view(bs, -1, 1, 1).float()
                * self.y_embedding_weight.view(1, 1, 1, -1).repeat(bs, 1, 1, 1)
                + nan_ind.view(bs, -1, 1, 1) * self.y_embedding_nan_ind.view(1, 1, 1, -1).repeat(bs, 1, 1, 1)
                + self.y_embedding_bias.view(1, 1, 1, -1).repeat(bs, 1, 1, 1)
            )
            bs, _, n_features, d_emb = x_inp.shape
            x_inp = x_inp + self.pos_embs(torch.randn(n_features, d_emb // 4, device=x_inp.device))[None, None]
            x_inp = torch.cat([x_inp, y_emb], dim=2)
            encoder_out = self.transformer_encoder(
                x_inp, cache_trainset_representation=False, single_eval_pos=train_size
            )
            preds = self.decoder(encoder_out[:, train_size:, -1])[..., : self.n_classes]
            if self.shuffle_labels:
                preds = preds[..., labels_permutation]
            return preds

    table = torch.from_numpy(arrays["g2t_table"])
    order = torch.from_numpy(arrays["g2t_order"])
    y_train = torch.from_numpy(arrays["g2t_y"])

    def work():
        model = TabPFN2()
        model.load_state_dict(torch.load(job["g2tfm_state"], weights_only=True))
        model.eval()
        torch.manual_seed(0)
        with (
            torch.inference_mode(),
            torch.nn.attention.sdpa_kernel(
                [torch.nn.attention.SDPBackend.FLASH_ATTENTION, torch.nn.attention.SDPBackend.EFFICIENT_ATTENTION]
            ),
        ):
            logits = torch.cat(
                [
                    model(x_num=torch.cat([table[order], table[idx]]).unsqueeze(0), y_train=y_train.unsqueeze(0))
                    .squeeze(0)
                    .float()
                    for idx in torch.arange(table.shape[0]).split(4096)
                ]
            )
        return torch.softmax(logits, dim=-1)

    probs, stats = gfm_probe.measure(work)
    np.savez(out / "outputs.npz", probs=probs.numpy())
    return stats


def run_graphpfn(arrays: dict, job: dict, out: Path) -> dict:
    """``GraphPFN`` of ``lib/graphpfn/model.py`` as ``bin/graphpfn_evaluate.py``'s ``evaluate`` runs it (inference
    mode, no checkpointing, full attention), LimiX built by upstream's ``load_model`` from the checkpoint file
    written by ``bench_gfm`` (``load_tfm`` downloads LimiX-16M: its ``hf_hub_download`` is pointed at that file)."""
    _stand_in_dgl()
    _graphpfn_packages()
    import dgl
    import huggingface_hub

    huggingface_hub.hf_hub_download = lambda **_kwargs: job["graphpfn_limix"]
    from lib.graphpfn.model import GraphPFN
    from lib.util import TaskType

    x, edges, y = (torch.from_numpy(arrays[k]) for k in ("gpfn_x", "gpfn_edge_index", "gpfn_y"))
    n, c = x.shape[0], int(job["num_classes"])
    train_mask = torch.zeros(n, dtype=torch.bool)
    train_mask[torch.from_numpy(np.sort(arrays["train"]))] = True

    def work():
        model = GraphPFN(edge_head=False)  # LimiX's parameters come with it; the adapters' are loaded on top
        unexpected = model.load_state_dict(
            torch.load(job["graphpfn_adapters"], weights_only=True), strict=False
        ).unexpected_keys
        assert not unexpected, f"adapter parameters upstream does not have: {unexpected[:3]}"
        model.eval()
        graph = dgl.graph((edges[0], edges[1]), num_nodes=n)
        torch.manual_seed(0)
        with torch.inference_mode():
            pred = model(
                graph=graph,
                features=x,
                y_train=y.float(),
                train_mask=train_mask,
                task_type=TaskType.MULTICLASS,
                checkpointing=False,
                batched_attn=n >= 2**16 - 1,
            )["predictions"]
        return torch.log_softmax(pred[~train_mask, :c], dim=-1)

    logprobs, stats = gfm_probe.measure(work)
    np.savez(out / "outputs.npz", logprobs=logprobs.numpy())
    return stats


def _graphpfn_packages() -> None:
    """GraphPFN's ``lib`` without its package ``__init__`` files, which import the whole repository (training,
    priors, baselines). ``lib/util.py`` is written for Python 3.12 (PEP 695 generics) and the CPU torch build
    both sides share is for 3.11; of it the timed code uses only the ``TaskType`` enum, restated here."""
    import enum

    for name in ("lib", "lib.graph", "lib.graphpfn"):
        package = types.ModuleType(name)
        package.__path__ = [str(ROOT.joinpath(*name.split(".")))]
        sys.modules[name] = package
        if "." in name:
            setattr(sys.modules["lib"], name.split(".")[1], package)
    util = types.ModuleType("lib.util")
    util.TaskType = enum.Enum(
        "TaskType", {"REGRESSION": "regression", "BINCLASS": "binclass", "MULTICLASS": "multiclass"}
    )
    sys.modules["lib.util"] = util
    sys.modules["lib"].util = util
    NOTES.append(
        "lib/util.py needs Python 3.12 (the shared CPU torch is 3.11): its TaskType enum is restated; "
        "the packages' __init__ files (all of lib) are not run"
    )


RUNNERS = {
    "graphany": run_graphany,
    "gvt": run_gvt,
    "node4all": run_node4all,
    "nodepfn": run_nodepfn,
    "g2tfm": run_g2tfm,
    "graphpfn": run_graphpfn,
}


def main() -> None:
    method, graph_path, out = gfm_probe.argv()
    gfm_probe.prepare(torch)
    arrays, job = _load(graph_path)
    stats = RUNNERS[method](arrays, job, out)
    gfm_probe.write_report(str(out / "report.json"), stats, {"notes": NOTES, "torch": torch.__version__})


if __name__ == "__main__":
    main()
