"""The price where it is used: from records of small graphs and the cost probe, graphs 5-55 times larger.

On this machine, in order (each store resumes, so a second run with ``--keep DIR`` only reprices):

1. the records a researcher has: a sweep of ``METHODS`` on the three smallest WebKB graphs (texas, cornell,
   wisconsin: 183-251 nodes), both regimes, split 0, budget 3;
2. the cost probe of the same methods (``orchestrator calibrate``), its wall and CPU time quoted;
3. the sweep being priced, on ``TARGETS`` (2,223-10,000 nodes, none of them in the records), run for real;
4. ``orchestrator backtest --by-size 5`` on the three stores: each method fitted on the small graphs and the
   probe, predicting the larger graphs' trials (their own configurations, the epochs the model expects).

Targets per method: predicted / measured service time within 0.5-2, peak memory within 0.67-1.5. The
measured side is wall time of the service's own compute, as every record's, so run it on a quiet machine.

    python -m tests.bench.bench_estimate [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.bench.timed import ROOT, timed

METHODS = "mlp,gcn,gat,graphsage,appnp"
SMALL = "texas,cornell,wisconsin"
TARGETS = "squirrel-filtered,actor,minesweeper"
SWEEP = ["--regimes", "10/10/80,50/25/25", "--splits", "0", "--budget", "3", "--methods", METHODS]
TIME_RANGE = (0.5, 2.0)
MEMORY_RANGE = (0.67, 1.5)


def orchestrator(*args: str) -> str:
    """Run an orchestrator command (its output shown as it goes); its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args], cwd=ROOT, stdout=subprocess.PIPE, text=True, env=os.environ
    )
    if done.returncode != 0:
        raise SystemExit(f"orchestrator {' '.join(args)} exited {done.returncode}")
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep", type=Path, help="keep (and resume) the stores in this directory")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-estimate-"))
    work.mkdir(parents=True, exist_ok=True)
    small, probe, large = work / "small.sqlite", work / "probe.sqlite", work / "large.sqlite"
    print(f"stores in {work}", flush=True)
    orchestrator("run", "--datasets", SMALL, *SWEEP, "--store", str(small))
    usage = timed(["-m", "orchestrator", "calibrate", "--methods", METHODS, "--store", str(probe)])
    print(usage.stdout)
    print(f"cost probe of {METHODS}: {usage.cpu_s:,.0f} s CPU, {usage.peak_mib:,.0f} MiB peak (orchestrator)")
    price = orchestrator(
        "plan", "--datasets", TARGETS, *SWEEP, "--estimate", "--from", str(small), "--from", str(probe)
    )
    print(price)
    orchestrator("run", "--datasets", TARGETS, *SWEEP, "--store", str(large))
    table = orchestrator("backtest", "--by-size", "5", "--from", str(small), "--from", str(probe), "--from", str(large))
    print(table)
    verdicts = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) < 13 or not re.fullmatch(r"[a-z0-9]+", cells[1] or "-") or cells[1] == "method":
            continue
        time_ratio, peak_ratio = float(cells[8]), float(cells[12])
        ok = TIME_RANGE[0] <= time_ratio <= TIME_RANGE[1] and MEMORY_RANGE[0] <= peak_ratio <= MEMORY_RANGE[1]
        verdicts.append(ok)
        print(
            f"{cells[1]:>10}: time {time_ratio:.2f}, peak {peak_ratio:.2f}: {'within' if ok else 'OUTSIDE'} the targets"
        )
    print(f"{sum(verdicts)}/{len(verdicts)} methods within time {TIME_RANGE} and memory {MEMORY_RANGE}")


if __name__ == "__main__":
    main()
