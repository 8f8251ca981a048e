"""`make gpu-check`: the services on a GPU, measured against a plain loop in the same process, then a real sweep.

Self-contained for any CUDA host, with or without Docker: it uses the host's own
torch (>= 2.3) and PyG, starts the method services as local processes on the
device, and prints side by side

1. full-batch epoch time of GCN, GAT and GCNII through the service (the fit's own
   seconds, as recorded, over its epochs) against the same network trained by a
   plain PyG loop in this process, on a 169k-node / 2.3M-edge synthetic graph;
2. the fit's peak GPU memory as the service reports it (what the record stores)
   against ``torch.cuda.max_memory_allocated`` of the plain loop;
3. a sweep (15 supervised methods plus GraphAny and Node4All on texas, cornell,
   wisconsin, cora and citeseer, split 0, 10/10/80, budget 3): wall time, statuses,
   and the device the records name.

It exits 1 when a target is missed (epoch-time ratio above 1.10, memory ratio
outside 0.9-1.1, a trial neither ``ok`` nor ``oom``, more than 8 minutes).
``--device cpu --small`` runs the same code on CPU with a small graph.
``--wheels DIR`` installs the pure-Python packages the host lacks (no index is
asked) into .cache/gpu-check/site first. The summary goes to ``--out``/gpu-check.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / ".cache" / "gpu-check" / "site"
SUPERVISED = (
    "mlp",
    "gcn",
    "graphsage",
    "gat",
    "gatv2",
    "gin",
    "appnp",
    "jknet",
    "gcnii",
    "gprgnn",
    "fagcn",
    "polynormer",
    "sgformer",
    "nagphormer",
    "graphgps",
)
GFMS = ("graphany", "node4all")
DATASETS = ("texas", "cornell", "wisconsin", "cora", "citeseer")
EPOCH_METHODS = ("gcn", "gat", "gcnii")
MAX_EPOCH_RATIO, MEMORY_RATIO_RANGE, MAX_WALL_S = 1.10, (0.9, 1.1), 8 * 60


def bootstrap(wheels: Path | None) -> None:
    """Make this checkout importable here and in the services it starts; install the carried wheels first."""
    paths = [str(ROOT)]
    if wheels is not None:
        found = sorted(wheels.glob("*.whl"))
        if not found:
            sys.exit(f"error: no wheels in {wheels}")
        stamp = SITE / ".installed"
        wanted = "\n".join(p.name for p in found)
        if not stamp.exists() or stamp.read_text() != wanted:
            shutil.rmtree(SITE, ignore_errors=True)
            pip = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--no-index",
                    "--no-deps",
                    "--disable-pip-version-check",
                    "--target",
                    str(SITE),
                    *map(str, found),
                ]
            )
            if pip.returncode != 0:
                sys.exit(
                    f"error: pip could not install the wheels of {wheels} for this Python ({sys.version.split()[0]}): "
                    "see above"
                )
            stamp.write_text(wanted)
        paths.insert(0, str(SITE))
    sys.path[:0] = paths
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)


def host_check(device: str) -> dict[str, str]:
    import torch

    try:
        import torch_geometric
    except ImportError:
        sys.exit("error: torch_geometric is not installed on this host")
    if tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 3):
        sys.exit(f"error: torch {torch.__version__} is older than 2.3")
    if device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("error: torch sees no CUDA device here; run with --device cpu --small to check the code path on CPU")
    from methods.sdk.device import device_fields

    return {
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
        **device_fields(torch.device(device)),
    }


# ---- 1 and 2: the service against a plain loop ---------------------------------------------


def big_graph(small: bool):
    """ogbn-arxiv's size: 169,343 nodes and about 2.3M directed edges (plus one self-loop each), 128 features, 40
    classes."""
    from orchestrator.data.synthetic import sbm_graph

    if small:
        return sbm_graph(
            "gpu-check-small", num_nodes=1000, num_classes=8, num_features=32, avg_degree=10.0, homophily=0.7, seed=0
        )
    return sbm_graph(
        "gpu-check-arxiv-size",
        num_nodes=169_343,
        num_classes=40,
        num_features=128,
        avg_degree=13.6,
        homophily=0.65,
        seed=0,
    )


def plain_loop(method_cls: Any, config: dict, bundle: Any, train: Any, val: Any, device: Any) -> tuple[float, int, int]:
    """The method's own network (``build_model``) and inputs, trained by a plain full-batch loop: seconds, epochs, peak
    bytes."""
    import torch

    from methods.sdk.method import graph_tensors

    method = method_cls()
    inputs = method.model_inputs(bundle, config, device)  # resident before the peak is reset, as in the service
    y = graph_tensors(bundle, device).y
    train_t, val_t = torch.as_tensor(train, device=device), torch.as_tensor(val, device=device)
    loss_fn = torch.nn.CrossEntropyLoss()
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    torch.manual_seed(0)
    model = method.build_model(config, bundle.features.shape[1], bundle.num_classes).to(device)
    optimizer_cls = torch.optim.AdamW if config.get("optimizer") == "adamw" else torch.optim.Adam
    optimizer = optimizer_cls(method.param_groups(model, config), lr=config["lr"], weight_decay=config["weight_decay"])
    for _ in range(int(config["max_epochs"])):
        model.train()
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(*inputs)[train_t], y[train_t]).backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            float(loss_fn(model(*inputs)[val_t], y[val_t]))
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return seconds, int(config["max_epochs"]), int(torch.cuda.max_memory_allocated()) if cuda else 0


def _epoch_line(row: dict[str, Any]) -> str:
    memory = (
        (
            f"peak GPU: record {row['service_peak'] / 2**20:9.1f} MiB   in-process {row['local_peak'] / 2**20:9.1f} "
            f"MiB   ratio {row['memory_ratio']:.3f}"
        )
        if row["memory_ratio"] is not None
        else "peak GPU: n/a on CPU"
    )
    return (
        f"  {row['method']:6s} epoch: service {row['service'] * 1e3:8.2f} ms (end to end {row['e2e'] * 1e3:8.2f})   "
        f"plain loop {row['local'] * 1e3:8.2f} ms   ratio {row['time_ratio']:.3f}   |   {memory}"
    )


def epoch_rows(device_name: str, small: bool, log_dir: Path, repeats: int) -> list[dict[str, Any]]:
    import torch

    from contract.families import load_families
    from methods.families import method_classes
    from orchestrator.data.splits import make_split
    from orchestrator.run_trial import hidden_label_bundle
    from orchestrator.services.client import MethodClient
    from orchestrator.services.embedded import EmbeddedService

    device = torch.device(device_name)
    graph = big_graph(small)
    split = make_split(graph.name, graph.y, "10/10/80", 0)
    bundle = hidden_label_bundle(graph, split)
    epochs = 10 if small else 200
    print(
        f"graph: {graph.num_nodes:,} nodes, {graph.edge_index.shape[1] - graph.num_nodes:,} directed edges "
        f"(+{graph.num_nodes:,} self-loops), {graph.x.shape[1]} features, {graph.num_classes} classes; "
        f"{epochs} epochs per fit, median of {repeats} interleaved runs",
        flush=True,
    )
    classes = {m.name: m for m in method_classes(load_families()["gnn"])}
    service = EmbeddedService("gnn", log_dir=log_dir)
    service.start()
    client = MethodClient(service.endpoint)
    rows = []
    try:
        client.wait_healthy(120)
        client.ensure_graph(bundle)
        for name in EPOCH_METHODS:
            overrides = {"max_epochs": epochs, "patience": max(epochs, 20)}  # no early stop: every fit runs all epochs
            config = classes[name].resolve_config(overrides)
            runs: dict[str, list] = {"service": [], "e2e": [], "local": [], "service_peak": [], "local_peak": []}
            for attempt in range(repeats + 1):  # the first of each side warms kernels and caches up, unmeasured
                fit = client.fit(name, bundle.graph_hash, split.train, split.val, overrides, seed=0, time_limit=None)
                client.release(fit.value.model_handle)
                fit_epochs = fit.value.info["epochs"].int_value  # FitResponse.info: the SDK's epochs run
                local_s, local_epochs, local_peak = plain_loop(
                    classes[name], config, bundle, split.train, split.val, device
                )
                if attempt:
                    runs["service"].append(fit.stats.seconds / fit_epochs)
                    runs["e2e"].append(fit.e2e_seconds / fit_epochs)
                    runs["service_peak"].append(fit.stats.peak_gpu_bytes)
                    runs["local"].append(local_s / local_epochs)
                    runs["local_peak"].append(local_peak)
            row = {"method": name, **{k: statistics.median(v) for k, v in runs.items()}}
            row["time_ratio"] = row["service"] / row["local"]
            row["memory_ratio"] = row["service_peak"] / row["local_peak"] if row["local_peak"] else None
            rows.append(row)
            print(_epoch_line(row), flush=True)
    finally:
        client.close()
        service.stop()
    return rows


# ---- 3: the sweep ---------------------------------------------------------------------------


def run_sweep(
    methods: tuple[str, ...], datasets: tuple[str, ...], budget: int, parallel: int, store_path: Path, time_limit: float
) -> dict[str, Any]:
    from orchestrator.services.directory import ServiceDirectory, log_dir, resolve_methods
    from orchestrator.services.embedded import EmbeddedServices
    from orchestrator.store import Store
    from orchestrator.sweep import Sweep, SweepPlan

    plan = SweepPlan(
        methods=methods, datasets=datasets, regimes=("10/10/80",), splits=(0,), budget=budget, time_limit=time_limit
    )
    started = time.perf_counter()
    with EmbeddedServices(log_dir=log_dir(store_path)) as embedded, Store(store_path) as store:
        directory = ServiceDirectory(resolve_methods(list(methods)), embedded=embedded, replicas=parallel)
        try:
            Sweep(plan, store, directory, parallel=parallel, warmup="all").run()
        finally:
            directory.close()
        frame = store.frame()
    wall = time.perf_counter() - started
    statuses = frame["status"].value_counts().to_dict()
    by_method = {m: g["status"].value_counts().to_dict() for m, g in frame.groupby("method")}
    bad = frame[~frame["status"].isin(["ok", "oom"])]
    devices = sorted(
        {
            json.dumps(
                {
                    k: v
                    for k, v in json.loads(h).items()
                    if k in ("device", "device_name", "driver_version", "cuda_version")
                },
                sort_keys=True,
            )
            for h in frame["host_json"].dropna()
        }
    )
    print(
        f"sweep: {len(frame)} trials ({len(methods)} methods x {len(datasets)} datasets x split 0 x 10/10/80 x budget "
        f"{budget}) in {wall:.1f} s, {parallel} in flight; statuses {statuses}"
    )
    for method, counts in by_method.items():
        print(f"  {method:11s} {counts}")
    for _, row in bad.iterrows():
        print(
            f"  not ok: {row['method']} on {row['dataset']} trial {row['trial_index']}: {row['status']}: "
            f"{str(row['error'])[:200]}"
        )
    print("  the records name the device: " + "; ".join(devices))
    return {
        "trials": len(frame),
        "wall_s": wall,
        "statuses": statuses,
        "by_method": by_method,
        "devices": [json.loads(d) for d in devices],
        "not_ok": [
            dict(method=r["method"], dataset=r["dataset"], status=r["status"], error=str(r["error"]))
            for _, r in bad.iterrows()
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--device",
        default="cuda",
        choices=("cuda", "cpu"),
        help="cuda: the first GPU (CUDA_VISIBLE_DEVICES picks it); cpu: the code path without a GPU",
    )
    parser.add_argument(
        "--small", action="store_true", help="a 1,000-node graph and 10 epochs instead of 169k nodes and 200"
    )
    parser.add_argument("--wheels", type=Path, help="install the wheels here (no index) before importing anything")
    parser.add_argument("--out", type=Path, default=ROOT / ".bench" / "gpu-check")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", default=",".join(SUPERVISED + GFMS), help="the sweep's methods")
    parser.add_argument("--datasets", default=",".join(DATASETS), help="the sweep's datasets")
    parser.add_argument("--budget", type=int, default=3)
    parser.add_argument(
        "--parallel",
        type=int,
        default=0,
        help="trials in flight in the sweep, each on its own service replica (0: 8 on a GPU, 1 on CPU)",
    )
    parser.add_argument("--time-limit", type=float, default=120.0, help="per-trial fit limit in seconds")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    bootstrap(args.wheels)
    device = "cuda:0" if args.device == "cuda" else "cpu"
    if device == "cpu":
        os.environ["NODEGROUND_DEVICE"] = "cpu"  # services too; on a GPU each method picks it as in a real sweep
    os.environ.setdefault("NODEGROUND_THREADS", "1")
    if os.environ.get("NODEGROUND_MIRROR"):
        os.environ.setdefault(
            "NODEGROUND_WEIGHTS", os.environ["NODEGROUND_MIRROR"]
        )  # GFM checkpoints, laid out like their URLs
    info = host_check(device)
    import torch

    torch.set_num_threads(int(os.environ["NODEGROUND_THREADS"]))
    print("host: " + ", ".join(f"{k} {v}" for k, v in info.items()), flush=True)
    if device == "cpu":
        print("no GPU: the same code path on CPU (times are CPU times; peak GPU memory does not apply)")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = epoch_rows(device, args.small, args.out / "services", args.repeats)
    store_path = args.out / "sweep.sqlite"
    for stale in args.out.glob("sweep.sqlite*"):
        stale.unlink()  # a fresh sweep every time: a resumed one would measure nothing
    parallel = args.parallel or (8 if device != "cpu" else 1)
    sweep = run_sweep(
        tuple(args.methods.split(",")),
        tuple(args.datasets.split(",")),
        args.budget,
        parallel,
        store_path,
        args.time_limit,
    )
    wall = time.perf_counter() - started

    failures = [] if args.small else targets_missed(rows, sweep, wall)
    summary = {"host": info, "epochs": rows, "sweep": sweep, "wall_s": wall, "failures": failures, "small": args.small}
    (args.out / "gpu-check.json").write_text(json.dumps(summary, indent=2, default=str))
    if args.small:
        print(f"total {wall:.1f} s; --small: figures only, the targets apply to the full check on a GPU")
        return 0
    print(f"total {wall:.1f} s; " + ("all targets met" if not failures else "MISSED: " + "; ".join(failures)))
    return 1 if failures else 0


def targets_missed(rows: list[dict[str, Any]], sweep: dict[str, Any], wall: float) -> list[str]:
    failures = [
        f"{r['method']} epoch-time ratio {r['time_ratio']:.3f} > {MAX_EPOCH_RATIO}"
        for r in rows
        if r["time_ratio"] > MAX_EPOCH_RATIO
    ]
    failures += [
        f"{r['method']} memory ratio {r['memory_ratio']:.3f} outside {MEMORY_RATIO_RANGE}"
        for r in rows
        if r["memory_ratio"] is not None and not MEMORY_RATIO_RANGE[0] <= r["memory_ratio"] <= MEMORY_RATIO_RANGE[1]
    ]
    failures += [f"{len(sweep['not_ok'])} sweep trial(s) neither ok nor oom"] if sweep["not_ok"] else []
    failures += [f"wall time {wall:.0f} s > {MAX_WALL_S} s"] if wall > MAX_WALL_S else []
    return failures


if __name__ == "__main__":
    sys.exit(main())
