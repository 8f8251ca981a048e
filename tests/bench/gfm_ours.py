"""Our side of the GFM benchmark: one fit and predict of a NodeGround GFM port, measured in a fresh process.

``python -m tests.bench.gfm_ours METHOD GRAPH_NPZ OUT_DIR`` (run by ``bench_gfm``).
The method sees what a service sees: a bundle whose labels outside train ∪ val
are hidden, the official weights file, and a fresh graph cache (so the frozen
representations are computed and charged to this fit).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT, Path(__file__).resolve().parent):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import gfm_probe  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from contract.wire import make_bundle  # noqa: E402
from methods.graphany.method import GraphAny  # noqa: E402
from methods.gvt.method import RGVT  # noqa: E402
from methods.node4all.method import Node4All  # noqa: E402
from methods.sdk.method import FitContext  # noqa: E402


def configs(job: dict) -> dict[str, tuple[type, dict]]:
    """Upstream's defaults and selection rule (validation accuracy), with head training fixed to ``epochs`` on both
    sides (patience = epochs)."""
    epochs = {"max_epochs": int(job["epochs"]), "patience": int(job["epochs"]), "selection": "val_accuracy"}
    return {
        "graphany": (GraphAny, {"checkpoint": job["graphany_checkpoint"], "weights_file": job["graphany_weights"]}),
        "gvt": (
            RGVT,
            {
                "depth": 0,
                "max_depth": int(job["max_depth"]),
                "head": "mlp",
                "weights_file": job["gvt_weights"],
                **epochs,
            },
        ),
        "node4all": (Node4All, {"head": "mlp", "weights_file": job["node4all_weights"], **epochs}),
    }


def nodepfn_network(arrays: dict, job: dict, out: Path) -> None:
    """NodePFN's network alone (random parameters, official structure): one in-context forward pass."""
    from methods.nodepfn.model import NodePFNNet
    from methods.sdk.pfn import attention_chunk

    x, y, edges = (torch.from_numpy(arrays[k]) for k in ("pfn_x", "pfn_y", "pfn_edge_index"))
    n_ctx = int(arrays["pfn_ctx"])
    arch = job["nodepfn_arch"]

    def work():
        net = NodePFNNet(arch)
        net.load_state_dict(torch.load(job["nodepfn_state"], weights_only=True))
        net.eval()
        with torch.no_grad():
            return net(x, y[:n_ctx], edges, attention_chunk(x.shape[0], n_ctx, x.shape[1], arch["nhead"]))

    logits, stats = gfm_probe.measure(work)
    np.savez(out / "outputs.npz", logits=logits.numpy())
    gfm_probe.write_report(str(out / "report.json"), stats, {"torch": torch.__version__})


def g2tfm_network(arrays: dict, job: dict, out: Path) -> None:
    """G2T-FM's in-context inference alone (random parameters, official structure): ``G2TFM.predict`` on the table."""
    from methods.g2tfm.method import G2TFM, MAX_QUERY_BATCH, G2TState
    from methods.g2tfm.model import G2TNet
    from methods.sdk.pfn import attention_chunk

    table = torch.from_numpy(arrays["g2t_table"])
    order, y = arrays["g2t_order"], torch.from_numpy(arrays["g2t_y"])
    arch = job["g2tfm_arch"]
    batch = min(MAX_QUERY_BATCH, table.shape[0])
    chunk = attention_chunk(len(order) + batch, len(order), table.shape[1] + 1, arch["nhead"])

    def work():
        net = G2TNet(arch)
        net.tabpfn.load_state_dict(torch.load(job["g2tfm_state"], weights_only=True))
        net.eval()
        state = G2TState(
            net=net,
            table=table,
            order=order,
            y_ctx=y,
            classes=int(job["num_classes"]),
            query_batch=batch,
            chunk=chunk,
            seed=0,
            device=torch.device("cpu"),
        )
        return G2TFM().predict(state, None)

    probs, stats = gfm_probe.measure(work)
    np.savez(out / "outputs.npz", probs=probs)
    gfm_probe.write_report(str(out / "report.json"), stats, {"torch": torch.__version__})


def graphpfn_network(arrays: dict, job: dict, out: Path) -> None:
    """GraphPFN's network alone (random parameters, official structure): one in-context forward pass,
    one ensemble member, on features that already carry their random columns."""
    from methods.graphpfn.model import GraphPFNNet

    x, edges, y = (torch.from_numpy(arrays[k]) for k in ("gpfn_x", "gpfn_edge_index", "gpfn_y"))
    train_mask = torch.zeros(x.shape[0], dtype=torch.bool)
    train_mask[torch.from_numpy(np.sort(arrays["train"]))] = True

    def work():
        net = GraphPFNNet({**job["graphpfn_arch"], "n_random_features": 0})
        net.load_state_dict(torch.load(job["graphpfn_state"], weights_only=True))
        net.eval()
        torch.manual_seed(0)
        with torch.no_grad():
            return net(x, edges, y, train_mask)

    logprobs, stats = gfm_probe.measure(work)
    # as the method's predict: the first num_classes outputs renormalised, on the predicted (non-context) rows
    np.savez(
        out / "outputs.npz",
        logprobs=torch.log_softmax(logprobs[~train_mask, : int(job["num_classes"])], dim=-1).numpy(),
    )
    gfm_probe.write_report(str(out / "report.json"), stats, {"torch": torch.__version__})


NETWORKS = {"nodepfn": nodepfn_network, "g2tfm": g2tfm_network, "graphpfn": graphpfn_network}


def main() -> None:
    method_name, graph_path, out = gfm_probe.argv()
    gfm_probe.prepare(torch)
    with np.load(graph_path) as raw:
        arrays = {k: raw[k] for k in raw.files}
    job = json.loads(str(arrays.pop("job")))
    if method_name in NETWORKS:
        return NETWORKS[method_name](arrays, job, out)
    visible = np.full(arrays["y"].shape[0], -1)
    for split in ("train", "val"):
        visible[arrays[split]] = arrays["y"][arrays[split]]
    bundle = make_bundle(arrays["x"], arrays["edge_index"], visible, int(job["num_classes"]))
    cls, overrides = configs(job)[method_name]
    config = cls.resolve_config(overrides)
    ctx = FitContext(seed=0, device=torch.device("cpu"))
    method = cls()

    def work():
        state = method.fit(bundle, arrays["train"], arrays["val"], config, ctx)
        return state, method.predict(state, bundle)

    (state, probs), stats = gfm_probe.measure(work)
    outputs = {"probs": probs}
    if method_name == "gvt":
        reps = next(v for k, v in bundle.cache.items() if isinstance(k, tuple) and k[0] == "gvt-representations")
        outputs["representations"] = np.stack([r.numpy() for r in reps])
    elif method_name == "node4all":
        outputs["embedding"] = state.z.numpy()
    np.savez(out / "outputs.npz", **outputs)
    extra = {
        "depth": ctx.info.get("depth"),
        "val_acc": {
            k.removeprefix("val_accuracy_depth"): v for k, v in ctx.info.items() if k.startswith("val_accuracy_depth")
        }
        or ctx.info.get("best_val_accuracy"),
        "torch": torch.__version__,
    }
    gfm_probe.write_report(str(out / "report.json"), stats, extra)


if __name__ == "__main__":
    main()
