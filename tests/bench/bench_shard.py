"""A SLURM shard task's start on the paper's plan: CPU seconds and peak memory before its services start.

The plan: every method of every family with a committed description, every catalog dataset, regimes
10/10/80 and 50/25/25, splits 0-4, budget 201 (about 1.9 M trials), shard 0 of 64. Each side runs in a
child of its own under ``/usr/bin/time -v`` (``tests/bench/timed.py``), against an empty store:

- today: what ``orchestrator run --shard 0/64`` does before any service starts: plan the cells, record the
  shard's plan in the store (``Sweep.shard_record``: the plan id from the plan's definition, the shards'
  sizes from the cells, the shard's own keys) and list the trials it has to run;
- whole plan: the same record from every trial of the plan spelled out (``tests.orchestrator.whole_plan``),
  as shard tasks computed it before, then the same list.

Both must record the same shard sizes and keys. Target for today's: <= 10 s CPU and <= 300 MiB.

    python -m tests.bench.bench_shard [--shard I/N]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

from tests.bench.timed import timed

TARGET_CPU_S = 10.0
TARGET_MIB = 300.0
REGIMES = ("10/10/80", "50/25/25")
SPLITS = (0, 1, 2, 3, 4)
BUDGET = 201


def _sweep(store: Path, index: int, count: int):
    """The paper plan's shard as ``orchestrator run`` builds it: methods planned from their committed descriptions."""
    from contract.descriptions import read_description
    from contract.families import load_families
    from orchestrator.data.registry import tasks
    from orchestrator.plan import SweepPlan, described_specs
    from orchestrator.services.directory import Directory, resolve_methods
    from orchestrator.store import Store
    from orchestrator.sweep import Sweep

    methods = [m for f in load_families().values() if read_description(f) is not None for m in f.methods]
    datasets = tuple(t["name"] for t in tasks())
    plan = SweepPlan(tuple(methods), datasets, REGIMES, SPLITS, BUDGET, shard=(index, count))
    specs = described_specs(methods, resolve_methods(methods))
    return Sweep(plan, Store(store), Directory(), record_plan=True, described=specs)  # no service is asked for


def child(side: str, store: Path, index: int, count: int) -> None:
    """One side's shard start; prints what it recorded (digests, so the parent compares the two sides)."""
    sweep = _sweep(store, index, count)
    if side == "today":
        record = sweep.shard_record()
        sweep.store.write_plan(record)
        todo = [t.key for t in sweep._todo()]  # what run() runs, after what prepare() and the record did
    else:
        from tests.orchestrator.whole_plan import whole_plan_record

        record = whole_plan_record(sweep.planned(), index, count)
        sweep.store.write_plan(record)
        done = sweep.store.done_keys(sweep.plan.time_limit)
        todo = [k for k in record.keys if k not in done]
    keys = hashlib.sha256("\n".join(record.keys).encode()).hexdigest()[:16]
    print(f"total={sum(record.counts)} cells={len(sweep.planned().cells)} shard={len(record.keys)} todo={len(todo)}")
    print(f"counts={hashlib.sha256(repr(record.counts).encode()).hexdigest()[:16]} keys={keys} id={record.plan_id}")
    sweep.store.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shard", default="0/64", help="the shard to start, I/N")
    ap.add_argument("--child", nargs=2, metavar=("SIDE", "STORE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    index, count = (int(v) for v in args.shard.split("/"))
    if args.child:
        child(args.child[0], Path(args.child[1]), index, count)
        return 0
    with tempfile.TemporaryDirectory(prefix="nodeground-bench-shard-") as work:
        runs = {
            side: timed(
                ["-m", "tests.bench.bench_shard", "--shard", args.shard, "--child", side, f"{work}/{side}.sqlite"]
            )
            for side in ("today", "whole")
        }
    today, whole = runs["today"], runs["whole"]
    sizes = dict(part.split("=") for part in today.stdout.split())
    print(
        f"paper plan: {int(sizes['total']):,} trials in {int(sizes['cells']):,} cells; shard {args.shard}: "
        f"{int(sizes['shard']):,} trials"
    )
    agree = today.stdout.split("id=")[0] == whole.stdout.split("id=")[0]
    print(f"same shard sizes and keys as the whole plan's: {'yes' if agree else 'NO'}")
    for name, usage in (("shard start (today)", today), ("whole-plan enumeration", whole)):
        print(f"{name:>24}: CPU {usage.cpu_s:6.1f} s, peak {usage.peak_mib:7.0f} MiB")
    cpu, peak = whole.cpu_s / today.cpu_s, whole.peak_mib / today.peak_mib
    print(f"{'whole plan / today':>24}: CPU {cpu:6.1f}x,  peak {peak:7.1f}x")
    ok = agree and today.cpu_s <= TARGET_CPU_S and today.peak_mib <= TARGET_MIB
    print(f"target: <= {TARGET_CPU_S:.0f} s CPU and <= {TARGET_MIB:.0f} MiB -> {'OK' if ok else 'OVER TARGET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
