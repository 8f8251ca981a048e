"""GFM ports against their upstream implementations: CPU time and peak memory of fit + predict.

For GraphAny, RGVT and Node4All (official weights), on a small real graph
(Texas from the mirror; a synthetic stand-in without it) and a 20k-node
synthetic graph: each side runs in a fresh process on the same canonical graph,
split, device (CPU) and thread count (NODEGROUND_THREADS, default 1); the clock
is the process's CPU time around fit + predict (graph loading and imports
excluded on both sides), the memory the rise of the peak resident set above the
resident set before the work (see ``gfm_probe``). Sides alternate, REPS times;
medians are printed with ours/upstream ratios (targets: time <= 1.05x, memory
<= 1.10x) and the agreement of the outputs: the frozen representations (RGVT,
Node4All) and GraphAny's fused probabilities must match to float tolerance;
trained heads start from different random draws on the two sides, so for them
the chosen depth and the share of equal predicted classes are shown. Head
training runs a fixed EPOCHS on both sides (patience = epochs) so that both do
the same work.

NodePFN's, G2T-FM's and GraphPFN's weights cannot be fetched offline and their
cost does not depend on their values: each network (the released structure, random
parameters shared by both sides) runs its in-context inference. NodePFN: one
forward pass over the whole graph, training rows as context, against upstream's
``TransformerModel``; the logits must match. G2T-FM: our ``G2TFM.predict`` on
the graph's G2T-FM table (our fit's table code, with PEARL columns from the
random PEARL) against upstream's ICL forward (``TabPFN2`` of G2T-FM's
``bin/g2t_fm.py``) on the ``tabpfn`` package's layers; the probabilities must
match. Upstream's TabPFN layers attend through a full einsum on CPU (their SDPA
path needs CUDA), whose scores do not fit this machine for 2,000 context rows,
so the table comes as a slice: at most TABLE_CONTEXT training nodes as context
and the first TABLE_QUERIES nodes as queries (one query batch; the whole graph
on Texas).
GraphPFN: one in-context forward pass (one ensemble member) of the LimiX-16M
backbone with its graph adapters over the whole graph, on our fit's prepared
features (transform, PCA to ``d_pca``, random columns appended here so that both
sides see the same ones), against upstream's ``GraphPFN.forward`` as its
``evaluate`` calls it; the log-probabilities must match. Upstream builds LimiX
from a checkpoint file through its own ``load_model``: the file is written here
in LimiX's format (its ``config`` dict restated from our ``DEFAULT_ARCH``, our
random ``state_dict`` under LimiX's names).

Upstream runs in its own virtual environment: NODEGROUND_UPSTREAM names a folder
holding the checkouts ``GraphAny/``, ``graph-view-space/``, ``node4all/``,
``NodePFN/``, ``G2T-FM/`` and ``graphpfn/``, each with its environment in
``.venv/`` (G2T-FM's holds the ``tabpfn`` package its ``lib/tabpfn`` copies,
2.0.0; graphpfn's, on Python 3.11 beside the shared CPU torch, the pins of its
``pyproject.toml`` that this path imports: delu, loguru, numpy, optuna, PyYAML,
rtdl-num-embeddings, rtdl-revisiting-models, scikit-learn, scipy, tomli-w,
tqdm, torch-geometric, einops, huggingface_hub; DGL and flash-attn have no build
for it). Without it only our numbers print.

Run: ``python -m tests.bench gfm``; BENCH_GFM_REPS (3), BENCH_GFM_EPOCHS (100),
BENCH_GFM_NODES (20000), BENCH_GFM_FEATURES (16), BENCH_GFM_METHODS (all),
BENCH_GFM_TABLE_CONTEXT (256), BENCH_GFM_TABLE_QUERIES (1024).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for extra in (ROOT,):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import numpy as np  # noqa: E402

from methods.g2tfm.model import DEFAULT_PEARL, DEFAULT_TABPFN  # noqa: E402
from methods.graphpfn.model import DEFAULT_ARCH as GRAPHPFN_ARCH  # noqa: E402
from methods.nodepfn.model import DEFAULT_ARCH as NODEPFN_ARCH  # noqa: E402

REPS = int(os.environ.get("BENCH_GFM_REPS", 3))
EPOCHS = int(os.environ.get("BENCH_GFM_EPOCHS", 100))
NODES = int(os.environ.get("BENCH_GFM_NODES", 20_000))
FEATURES = int(os.environ.get("BENCH_GFM_FEATURES", 16))
TABLE_CONTEXT = int(os.environ.get("BENCH_GFM_TABLE_CONTEXT", 256))
TABLE_QUERIES = int(os.environ.get("BENCH_GFM_TABLE_QUERIES", 1024))
G2TFM_ARCH = {**DEFAULT_TABPFN, **DEFAULT_PEARL}
# GraphPFN's copy of LimiX asserts 3-D input in its outlier removal, which its grouped (4-D) input never is:
# upstream runs only with remove_outliers off, so both sides run so here (an O(N F) step either way).
GRAPHPFN_BENCH_ARCH = {**GRAPHPFN_ARCH, "remove_outliers": False}
MAX_DEPTH = 8
TIME_TARGET, MEMORY_TARGET = 1.05, 1.10
AGREEMENT_ATOL = 1e-4  # frozen representations and GraphAny's probabilities: float32 round-off only
UPSTREAM_DIRS = {
    "graphany": "GraphAny",
    "gvt": "graph-view-space",
    "node4all": "node4all",
    "nodepfn": "NodePFN",
    "g2tfm": "G2T-FM",
    "graphpfn": "graphpfn",
}
HERE = Path(__file__).resolve().parent


def _graphs() -> list[tuple[str, object, np.ndarray, np.ndarray, np.ndarray]]:
    """(label, Graph, train, val, test): Texas (public split 0) and a NODES-node SBM (10/10/80)."""
    from orchestrator.data.registry import load_dataset
    from orchestrator.data.synthetic import sbm_graph

    out = []
    try:
        texas = load_dataset("texas")
        train, val, test = texas.public_splits[0]
        out.append(("texas", texas, train, val, test))
    except Exception as exc:  # no mirror / no network: a small synthetic graph of Texas's shape
        print(f"texas unavailable ({str(exc).splitlines()[0]}); a 183-node synthetic graph stands in")
        small = sbm_graph("small", num_nodes=183, num_classes=5, num_features=1703, avg_degree=3, homophily=0.1, seed=0)
        out.append(("small-sbm", small, *_random_split(small.num_nodes, 0.5, 0.25)))
    big = sbm_graph(
        "bench", num_nodes=NODES, num_classes=8, num_features=FEATURES, avg_degree=10, homophily=0.7, seed=0
    )
    out.append((f"sbm-{NODES // 1000}k", big, *_random_split(NODES, 0.1, 0.1)))
    return out


def _random_split(n: int, train: float, val: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    perm = np.random.default_rng(0).permutation(n)
    a, b = int(n * train), int(n * (train + val))
    return np.sort(perm[:a]), np.sort(perm[a:b]), np.sort(perm[b:])


def _job(work: Path) -> dict:
    """Weights files (official, from the catalog) and GraphAny's checkpoint as upstream's module expects it."""
    import torch

    from methods.graphany.checkpoint import load_checkpoint
    from methods.sdk.frozen import locate_weights

    path, _ = locate_weights("graphany-arxiv", "")
    ckpt = load_checkpoint(path)
    torch.save({f"mlp.{k}": v for k, v in ckpt.state_dict.items()}, work / "graphany_state.pt")
    return {
        "epochs": EPOCHS,
        "max_depth": MAX_DEPTH,
        "graphany_checkpoint": "arxiv",
        "graphany_weights": str(path),
        "graphany_state": str(work / "graphany_state.pt"),
        "graphany_config": {
            "n_hidden": ckpt.n_hidden,
            "feat_channels": list(ckpt.feat_channels),
            "pred_channels": list(ckpt.pred_channels),
            "att_temperature": ckpt.att_temperature,
            "entropy": ckpt.entropy,
            "n_mlp_layer": ckpt.n_mlp_layer,
        },
        "gvt_weights": str(locate_weights("gvt-seed42", "")[0]),
        "node4all_weights": str(locate_weights("node4all-cgt", "")[0]),
        "nodepfn_arch": NODEPFN_ARCH,
        "nodepfn_state": _nodepfn_state(work),
        "g2tfm_arch": G2TFM_ARCH,
        "g2tfm_state": _g2tfm_state(work),
        "graphpfn_arch": GRAPHPFN_BENCH_ARCH,
        **_graphpfn_states(work),
    }


def _nodepfn_state(work: Path) -> str:
    """NodePFN's released structure with the random parameters a random-init service would use."""
    import torch

    from methods.nodepfn.model import NodePFNNet
    from methods.sdk.frozen import RANDOM_INIT_SEED

    torch.manual_seed(RANDOM_INIT_SEED)
    path = work / "nodepfn_random.pt"
    torch.save(NodePFNNet(NODEPFN_ARCH).state_dict(), path)
    return str(path)


def _g2tfm_net():
    """G2T-FM's two frozen networks with the random parameters a random-init service would use."""
    import torch

    from methods.g2tfm.model import G2TNet
    from methods.sdk.frozen import RANDOM_INIT_SEED

    torch.manual_seed(RANDOM_INIT_SEED)
    return G2TNet(G2TFM_ARCH).eval()


def _g2tfm_state(work: Path) -> str:
    import torch

    path = work / "g2tfm_tabpfn_random.pt"
    torch.save(_g2tfm_net().tabpfn.state_dict(), path)
    return str(path)


def _graphpfn_states(work: Path) -> dict[str, str]:
    """GraphPFN's released structure with random parameters (the adapters' zero-initialised output layers
    drawn too, so that the graph attention reaches the outputs), saved for our side and, under LimiX's
    names and with its ``config`` dict, as the checkpoint upstream's ``load_model`` reads."""
    import torch

    from methods.graphpfn.model import GraphPFNNet, arch_from_limix_config
    from methods.sdk.frozen import RANDOM_INIT_SEED

    torch.manual_seed(RANDOM_INIT_SEED)
    net = GraphPFNNet(GRAPHPFN_BENCH_ARCH)
    with torch.no_grad():
        for p in net.parameters():
            if not p.any():
                p.normal_(0.0, 0.02)
    state = net.state_dict()
    a = GRAPHPFN_BENCH_ARCH
    config = {
        "preprocess_config_x": {
            "num_features": a["features_per_group"],
            "nan_handling_enabled": a["nan_handling_enabled"],
            "normalize_on_train_only": a["normalize_on_train_only"],
            "normalize_x": a["normalize_x"],
            "remove_outliers": a["remove_outliers"],
            "normalize_by_used_features": a["normalize_by_used_features"],
        },
        "encoder_config_x": {
            "num_features": a["features_per_group"],
            "embedding_size": a["embed_dim"],
            "mask_embedding_size": a["embed_dim"],
            "encoder_use_bias": a["encoder_use_bias"],
        },
        "encoder_config_y": {
            "num_inputs": 1,
            "embedding_size": a["embed_dim"],
            "nan_handling_y_encoder": a["nan_handling_y_encoder"],
            "max_num_classes": a["max_num_classes"],
        },
        "decoder_config": {"num_classes": a["max_num_classes"]},
        "nlayers": a["nlayers"],
        "nhead": a["nhead"],
        "embed_dim": a["embed_dim"],
        "hid_dim": a["hid_dim"],
        "features_per_group": a["features_per_group"],
        "dropout": 0.0,
        "recompute_attn": False,
    }
    restated = arch_from_limix_config(config)
    assert all(a[k] == v for k, v in restated.items()), "the LimiX config restated here disagrees with the architecture"
    limix, adapters = {}, {}
    for key, value in state.items():
        key = key.removeprefix("tfm.module.")
        parts = key.split(".")
        if key.startswith("transformer_encoder.layers.") and parts[3] == "base":
            limix[".".join(parts[:3] + parts[4:])] = value
        elif key.startswith("transformer_encoder.layers."):
            adapters["tfm." + key] = value
        else:
            limix[key] = value
    paths = {
        "graphpfn_state": work / "graphpfn_random.pt",
        "graphpfn_limix": work / "LimiX-16M-random.ckpt",
        "graphpfn_adapters": work / "graphpfn_adapters_random.pt",
    }
    torch.save(state, paths["graphpfn_state"])
    torch.save({"config": config, "state_dict": limix}, paths["graphpfn_limix"])
    torch.save(adapters, paths["graphpfn_adapters"])
    return {k: str(v) for k, v in paths.items()}


def _graphpfn_inputs(g, train: np.ndarray) -> dict[str, np.ndarray]:
    """Our fit's prepared features (default config, seed 0) with the default number of random columns
    appended, the edges without self-loops, and the context labels in node order."""
    from methods.graphpfn.method import GraphPFN, _prepare_features
    from methods.sdk.pfn import edge_array_without_self_loops

    config = GraphPFN.default_config
    features = _prepare_features(g.x, train, config, 0)
    noise = np.random.default_rng(0).standard_normal((g.num_nodes, int(config["n_random_features"]))).astype(np.float32)
    return {
        "gpfn_x": np.concatenate([features, noise], axis=1),
        "gpfn_edge_index": edge_array_without_self_loops(g.edge_index),
        "gpfn_y": g.y[np.sort(train)].astype(np.int64),
    }


def _table_inputs(g, train: np.ndarray) -> dict[str, np.ndarray]:
    """G2T-FM's table of the graph as our fit builds it (default config, seed 0), sliced to at most
    TABLE_CONTEXT training nodes (context) and the first TABLE_QUERIES nodes (queries, context included)."""
    import torch

    from methods.g2tfm.method import G2TFM, _graph_table, _zscore
    from methods.sdk.pfn import edge_array_without_self_loops

    n = g.num_nodes
    edges = edge_array_without_self_loops(g.edge_index)
    table = _graph_table(g.x, edges, n, np.sort(train), G2TFM.default_config, 0)
    with torch.no_grad():
        pearl = _g2tfm_net().pearl(torch.from_numpy(edges), n, torch.Generator().manual_seed(0)).numpy()
    table = _zscore(np.concatenate([table, pearl], axis=1))
    rng = np.random.default_rng(0)
    ctx = np.sort(train if len(train) <= TABLE_CONTEXT else rng.choice(train, TABLE_CONTEXT, replace=False))
    rows = np.union1d(ctx, np.arange(min(n, TABLE_QUERIES)))
    return {"g2t_table": table[rows], "g2t_order": np.searchsorted(rows, ctx), "g2t_y": g.y[ctx].astype(np.float32)}


def _pfn_inputs(g, train: np.ndarray) -> dict[str, np.ndarray]:
    """One in-context episode: training rows first as context, then every other node; features cut or
    zero-padded to the network's input width; the graph re-indexed to that row order."""
    n, width = g.num_nodes, NODEPFN_ARCH["num_features"]
    order = np.concatenate([train, np.setdiff1d(np.arange(n), train)])
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    x = np.zeros((n, 1, width), dtype=np.float32)
    cols = min(width, g.x.shape[1])
    x[:, 0, :cols] = g.x[order, :cols]
    y = np.where(g.y[order] >= 0, g.y[order], 0).astype(np.float32)[:, None]
    return {"pfn_x": x, "pfn_y": y, "pfn_edge_index": position[g.edge_index], "pfn_ctx": np.array(len(train))}


def upstream_python(method: str) -> tuple[Path, Path] | None:
    base = os.environ.get("NODEGROUND_UPSTREAM")
    if not base:
        return None
    root = Path(base) / UPSTREAM_DIRS[method]
    python = root / ".venv" / "bin" / "python"
    return (root, python) if python.is_file() else None


def _run(side: str, method: str, graph_file: Path, work: Path) -> dict:
    out = Path(tempfile.mkdtemp(dir=work, prefix=f"{side}-{method}-"))
    threads = os.environ.get("NODEGROUND_THREADS", "1")
    env = {**os.environ, "NODEGROUND_THREADS": threads, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    if side == "ours":
        cmd = [sys.executable, "-m", "tests.bench.gfm_ours", method, str(graph_file), str(out)]
    else:
        root, python = upstream_python(method)
        env["UPSTREAM_ROOT"] = str(root)
        cmd = [str(python), str(HERE / "gfm_upstream.py"), method, str(graph_file), str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return {"error": lines[-1] if lines else f"exit {proc.returncode}"}
    report = json.loads((out / "report.json").read_text())
    with np.load(out / "outputs.npz") as raw:
        report["outputs"] = {k: raw[k] for k in raw.files}
    return report


def agreement(method: str, ours: dict, theirs: dict) -> str:
    o, t = ours["outputs"], theirs["outputs"]
    key = {
        "graphany": "probs",
        "gvt": "representations",
        "node4all": "embedding",
        "nodepfn": "logits",
        "g2tfm": "probs",
        "graphpfn": "logprobs",
    }[method]
    diff = float(np.max(np.abs(o[key] - t[key]))) if o[key].shape == t[key].shape else float("inf")
    text = f"{key} max|diff| {diff:.1e} {'OK' if diff <= AGREEMENT_ATOL else 'DIFFER'}"
    if method == "gvt":
        text += f"; depth {ours['depth']} vs {theirs['depth']}"
    if method in ("gvt", "node4all"):
        text += f"; argmax agree {np.mean(o['probs'].argmax(1) == t['probs'].argmax(1)):.2f}"
    return text


def main() -> None:
    import torch

    selected = os.environ.get("BENCH_GFM_METHODS", "graphany,gvt,node4all,nodepfn,g2tfm,graphpfn").split(",")
    threads = int(os.environ.get("NODEGROUND_THREADS", 1))
    print(
        f"CPU, {threads} thread(s), torch {torch.__version__}; fit+predict CPU time and peak-memory rise, "
        f"median of {REPS} alternating runs; head training {EPOCHS} epochs on both sides"
    )
    missing = [m for m in selected if upstream_python(m) is None]
    if missing:
        print(
            f"upstream not found for {', '.join(missing)}: set NODEGROUND_UPSTREAM to a folder holding the checkouts "
            f"{', '.join(UPSTREAM_DIRS[m] + '/' for m in missing)} each with its own virtual environment in .venv/ "
            "(only our numbers are printed for those)"
        )
    from contract.weights import WeightsError

    with tempfile.TemporaryDirectory(prefix="bench-gfm-") as tmp:
        work = Path(tmp)
        try:
            job = _job(work)
        except WeightsError as exc:
            print(f"skipped: official GFM weights are not available ({exc})")
            return
        worst = {"time": 0.0, "memory": 0.0}
        for label, g, train, val, test in _graphs():
            graph_file = work / f"{label}.npz"
            np.savez(
                graph_file,
                x=g.x,
                edge_index=g.edge_index,
                y=g.y,
                train=train,
                val=val,
                test=test,
                job=json.dumps({**job, "num_classes": g.num_classes}),
                **_pfn_inputs(g, train),
                **_graphpfn_inputs(g, train),
                **(_table_inputs(g, train) if "g2tfm" in selected else {}),
            )
            print(
                f"\n{label}: {g.num_nodes} nodes, {g.edge_index.shape[1]} edges (with self-loops), {g.x.shape[1]} "
                f"features, {g.num_classes} classes, {len(train)}/{len(val)}/{len(test)} split"
            )
            for method in selected:
                runs: dict[str, list[dict]] = {"ours": [], "upstream": []}
                for _ in range(REPS):
                    if upstream_python(method):
                        runs["upstream"].append(_run("upstream", method, graph_file, work))
                    runs["ours"].append(_run("ours", method, graph_file, work))
                _print_row(method, runs, worst)
        if worst["time"]:
            ok = worst["time"] <= TIME_TARGET and worst["memory"] <= MEMORY_TARGET
            print(
                f"\nworst ratios: time {worst['time']:.2f}x (target <= {TIME_TARGET}), memory {worst['memory']:.2f}x "
                f"(target <= {MEMORY_TARGET}): {'OK' if ok else 'OVER'}"
            )


def _print_row(method: str, runs: dict[str, list[dict]], worst: dict[str, float]) -> None:
    failed = {side: r["error"] for side, rs in runs.items() for r in rs if "error" in r}
    ok = {side: [r for r in rs if "error" not in r] for side, rs in runs.items()}
    if not ok["ours"]:
        print(f"  {method:9s} ours failed: {failed.get('ours')}")
        return
    t_o = statistics.median(r["cpu_s"] for r in ok["ours"])
    m_o = statistics.median(r["peak_mib"] for r in ok["ours"])
    line = f"  {method:9s} ours {t_o:8.2f} s {m_o:8.1f} MiB"
    if ok["upstream"]:
        t_u = statistics.median(r["cpu_s"] for r in ok["upstream"])
        m_u = statistics.median(r["peak_mib"] for r in ok["upstream"])
        rt, rm = t_o / t_u, m_o / max(m_u, 1e-9)
        worst["time"], worst["memory"] = max(worst["time"], rt), max(worst["memory"], rm)
        line += (
            f" | upstream {t_u:8.2f} s {m_u:8.1f} MiB | time {rt:5.2f}x  memory {rm:5.2f}x | "
            f"{agreement(method, ok['ours'][-1], ok['upstream'][-1])}"
        )
        notes = {n for r in ok["upstream"] for n in r.get("notes", [])}
        for note in sorted(notes):
            line += f"\n            upstream note: {note}"
    elif "upstream" in failed:
        line += f" | upstream failed: {failed['upstream']}"
    print(line, flush=True)


if __name__ == "__main__":
    main()
