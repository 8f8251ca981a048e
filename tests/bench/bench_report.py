"""Benchmark `orchestrator report` on a synthetic store shaped like the full benchmark.

21 methods x 51 datasets x 2 regimes x 5 splits x 201 trials (2,152,710 rows), every column of
the record contract, written as a SQLite store; then the report command runs in a child process
so its wall time and peak RSS are its own. Targets: < 120 s and < 4 GiB.

    python tests/bench/bench_report.py [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGET_S = 120.0
TARGET_BYTES = 4 * 1024**3

_CHILD = "import typer; from orchestrator.cli.report import report; app = typer.Typer(); app.command()(report); app()"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=None, help="where to put the store and the report")
    ap.add_argument("--keep", action="store_true", help="keep the store and report afterwards")
    ap.add_argument("--store", type=Path, default=None, help="reuse an existing store instead of building one")
    args = ap.parse_args(argv)

    from tests.synthetic_trials import synthetic_dataset_stats, synthetic_trials, write_store

    work = args.workdir or Path(tempfile.mkdtemp(prefix="nodeground-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    store = args.store or work / "runs.sqlite"
    stats = work / "dataset_stats.csv"
    synthetic_dataset_stats(51).to_csv(stats, index=False)
    if args.store is None:
        t = time.perf_counter()
        trials = synthetic_trials(n_datasets=51, n_trials=201, gfm_max_classes=None)
        print(f"built table: {len(trials):,} rows x {trials.shape[1]} columns in {time.perf_counter() - t:.1f}s")
        t = time.perf_counter()
        if store.exists():
            store.unlink()
        write_store(trials, store)
        del trials
        print(f"wrote store {store} ({store.stat().st_size / 1e9:.2f} GB) in {time.perf_counter() - t:.1f}s")

    out = work / "report"
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, "--store", str(store), "--out", str(out), "--dataset-stats", str(stats)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # Linux reports KiB
    print(proc.stdout.strip())
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return proc.returncode
    ok = wall < TARGET_S and peak < TARGET_BYTES
    print(
        f"report: wall {wall:.1f} s (target < {TARGET_S:.0f} s), peak RSS {peak / 1024**3:.2f} GiB "
        f"(target < {TARGET_BYTES / 1024**3:.0f} GiB) -> {'OK' if ok else 'OVER TARGET'}"
    )
    manifest = out / "manifest.json"
    if manifest.exists():
        print(f"stage timings: {manifest.read_text().split('timings_s')[1][:600]}")
    if not args.keep and args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
