"""`orchestrator show` on a 2 M-row store: CPU seconds, peak MiB and bytes per row, beside the way it read before.

The store (``write_trial_store``) holds realistic trial records: every method of the family manifests x 51
datasets x 2 regimes x 5 splits x as many configurations as make about 2 M rows, every column of the record,
with ``trial_key``, ``config_json``, ``fit_info_json``, ``host_json``, ``extra_json`` and ``error`` strings
of the length real sweeps write (about 1.9 KB a row in SQLite), written through the store's own schema and
indexes. Then, each in a child of its own under ``/usr/bin/time -v`` (``tests/bench/timed.py``):

- ``orchestrator show --store S --summary`` and ``orchestrator show --store S`` as they are today;
- the same printed from every row read whole (``read_trials``: ``SELECT *``), as `show` read them before.

Each pair must print the same. Target for today's `show --summary`: a peak <= 2 GiB.

    python -m tests.bench.bench_show [--rows N] [--store S] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tests.bench.timed import Usage, timed

TARGET_BYTES = 2 * 2**30
ROWS = 2_000_000
DATASETS = 51
REGIMES = 2
SPLITS = 5
VERSION = "2026-12-01"
_CHOICES = {
    "activation": ("relu", "elu", "gelu", "leaky_relu"),
    "jk": ("last", "max", "cat"),
    "norm": ("none", "batch", "layer"),
    "optimizer": ("adam", "adamw"),
}


def _configs(rng: np.random.Generator, n: int) -> list[str]:
    """``config_json`` as a supervised method's sampler writes it (13 parameters, about 290 characters)."""
    picks = {name: rng.integers(0, len(values), n) for name, values in _CHOICES.items()}
    dropout, input_dropout = rng.uniform(0, 0.8, n), rng.uniform(0, 0.5, n)
    lr, weight_decay = 10 ** rng.uniform(-4, -1.5, n), 10 ** rng.uniform(-8, -3, n)
    hidden, layers, patience = 2 ** rng.integers(4, 10, n), rng.integers(1, 6, n), rng.integers(20, 300, n)
    residual = rng.random(n) < 0.5
    return [
        f'{{"activation": "{_CHOICES["activation"][picks["activation"][i]]}", "dropout": {dropout[i]!r}, '
        f'"hidden": {hidden[i]}, "input_dropout": {input_dropout[i]!r}, "jk": "{_CHOICES["jk"][picks["jk"][i]]}", '
        f'"lr": {lr[i]!r}, "max_epochs": 500, "norm": "{_CHOICES["norm"][picks["norm"][i]]}", '
        f'"num_layers": {layers[i]}, "optimizer": "{_CHOICES["optimizer"][picks["optimizer"][i]]}", '
        f'"patience": {patience[i]}, "residual": {"true" if residual[i] else "false"}, '
        f'"weight_decay": {weight_decay[i]!r}}}'
        for i in range(n)
    ]


def _host(node: int) -> str:
    """``host_json`` of a GPU node (about 290 characters)."""
    return (
        f'{{"cpu_count": 64, "device": "cuda:0", "gpu_memory_bytes": 150754820096, "gpu_name": "NVIDIA H200", '
        f'"hostname": "gpu-node-{node:03d}.cluster.example.org", "orchestrator": "0.1.0", '
        f'"platform": "Linux-5.15.0-119-generic-x86_64-with-glibc2.35", "python": "3.11.7", "torch": "2.5.1"}}'
    )


def _method_rows(position: int, method: str, family: str, kind: str, trials: int, names: list[str]) -> list[tuple]:
    """One method's rows, in record column order (``orchestrator.records.COLUMNS``)."""
    from orchestrator.records import COLUMNS
    from tests.synthetic_trials import synthetic_trials

    gfm = kind == "gfm"
    frame = synthetic_trials(
        supervised=() if gfm else (method,),
        gfms=(method,) if gfm else (),
        n_datasets=DATASETS,
        n_splits=SPLITS,
        n_trials=trials,
        gfm_max_classes=None,
        seed=position,
    )
    n, rng = len(frame), np.random.default_rng(position)
    frame["dataset"] = frame["dataset"].cat.rename_categories(names)
    dataset = frame["dataset"].astype(str).to_numpy()
    content = {d: hashlib.sha256(d.encode()).hexdigest() for d in names}
    configs = _configs(rng, n)
    hashes = [hashlib.sha256(c.encode()).hexdigest()[:16] for c in configs]
    regime, split = frame["regime"].astype(str).to_numpy(), frame["split"].to_numpy()
    frame["trial_key"] = [
        f"{method}@{VERSION}|{d}|{r}|{s}|{h}|catalog:{content[d]}"
        for d, r, s, h in zip(dataset, regime, split, hashes, strict=True)
    ]
    frame["method_version"], frame["family"] = VERSION, family
    frame["dataset_hash"] = [content[d] for d in dataset]
    frame["config_json"], frame["config_hash"] = configs, hashes
    frame["endpoint"] = "10.0.3.17:50051"
    frame["time_limit_s"] = 3600.0
    failed = frame["status"].to_numpy() != "ok"
    frame["error"] = np.where(
        failed, "INTERNAL: RuntimeError: CUDA error: an illegal memory access was encountered", None
    )
    epochs, best = rng.integers(20, 500, n), rng.uniform(0, 1, n)
    frame["fit_info_json"] = [
        f'{{"best_epoch": {e // 3}, "best_val_accuracy": {b!r}, "best_val_loss": {1 - b!r}, "epochs": {e}}}'
        for e, b in zip(epochs, best, strict=True)
    ]
    frame["host_json"] = [_host(i % 64) for i in range(n)]
    frame["extra_json"] = (
        f'{{"weights_id": "{method}-official", "weights_official": true, '
        f'"weights_sha256": "{hashlib.sha256(method.encode()).hexdigest()}"}}'
        if gfm
        else None
    )
    frame["started_at"] = [f"2026-12-0{1 + i % 9}T{i % 24:02d}:{i % 60:02d}:{(7 * i) % 60:02d}+00:00" for i in range(n)]
    frame["finished_at"] = frame["started_at"]
    columns = []
    for name in COLUMNS:
        values = frame[name].astype(object).to_numpy()
        columns.append([None if isinstance(v, float) and v != v else v for v in values.tolist()])
    return list(zip(*columns, strict=True))


def write_trial_store(path: Path, rows: int = ROWS) -> int:
    """A store of about ``rows`` realistic trial records (through the store's schema and indexes); the rows written."""
    from contract.families import load_families
    from orchestrator.data.registry import tasks
    from orchestrator.records import COLUMNS
    from orchestrator.store import Store

    families = load_families().values()
    methods = [
        (m, f.name, "supervised" if f.pretraining_graphs is None else "gfm") for f in families for m in f.methods
    ]
    names = [t["name"] for t in tasks()][:DATASETS]
    trials = max(1, round(rows / (len(methods) * DATASETS * REGIMES * SPLITS)))
    Store(path).close()  # the schema and indexes a sweep's store has
    db = sqlite3.connect(path)
    db.execute("PRAGMA synchronous=OFF")
    insert = f"INSERT INTO trials ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})"
    written = 0
    for position, (method, family, kind) in enumerate(methods):
        batch = _method_rows(position, method, family, kind, trials, names)
        with db:
            db.executemany(insert, batch)
        written += len(batch)
    db.close()
    return written


def old_show(store: Path, summary: bool) -> None:
    """`show` as it was: every row of the store read whole (``SELECT *``), then the same selection and table."""
    from rich.console import Console

    from orchestrator.cli.run import print_results
    from orchestrator.results import summarize, summary_table
    from orchestrator.store import read_trials

    frame = read_trials(store)
    if summary:
        Console(width=200).print(summary_table(summarize(frame)))
    else:
        print_results(frame)


def _line(name: str, usage: Usage, rows: int) -> str:
    return f"{name:>26}: CPU {usage.cpu_s:6.1f} s, peak {usage.peak_mib:7.0f} MiB, {usage.peak_bytes / rows:6.0f} B/row"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=ROWS, help="about how many trial records the store holds")
    ap.add_argument("--store", type=Path, help="measure this store instead of writing one")
    ap.add_argument("--keep", type=Path, help="write the store into this folder and keep it")
    ap.add_argument("--old-show", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--summary", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.old_show:
        old_show(args.old_show, args.summary)
        return 0
    with tempfile.TemporaryDirectory(prefix="nodeground-bench-show-") as work:
        store = args.store or (args.keep or Path(work)) / "trials.sqlite"
        if args.store is None:
            store.parent.mkdir(parents=True, exist_ok=True)
            store.unlink(missing_ok=True)
            started = time.perf_counter()
            written = write_trial_store(store, args.rows)
            took = time.perf_counter() - started
            print(
                f"wrote {written:,} trial records to {store} ({store.stat().st_size / 2**30:.2f} GiB) in {took:.0f} s"
            )
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
            rows = db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
        ok = True
        for flags in (["--summary"], []):
            name = f"show {' '.join(flags)}".strip()
            today = timed(["-m", "orchestrator", "show", "--store", str(store), *flags])
            before = timed(["-m", "tests.bench.bench_show", "--old-show", str(store), *flags])
            same = today.stdout == before.stdout
            lines = len(today.stdout.splitlines())
            print(f"{name}: {lines:,} lines printed, the same as before: {'yes' if same else 'NO'}")
            print(_line(f"{name} (today)", today, rows))
            print(_line(f"{name} (SELECT *, before)", before, rows))
            cpu, peak = before.cpu_s / today.cpu_s, before.peak_mib / today.peak_mib
            print(f"{'before / today':>26}: CPU {cpu:6.1f}x,   peak {peak:7.1f}x")
            ok = ok and same and (today.peak_bytes <= TARGET_BYTES or flags != ["--summary"])
    verdict = "OK" if ok else "OVER TARGET"
    print(f"target: show --summary peaks <= {TARGET_BYTES / 2**30:.0f} GiB at {rows:,} rows -> {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
