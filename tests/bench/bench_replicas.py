"""Scale-out: trials per second with 2 service replicas against 1, on a method whose trials are fit.

What is measured: GCN (default configuration) on synthetic-homophilous, 2 regimes x 5 splits = 10
trials per sweep, through real gRPC to embedded service processes (one torch thread each), run
with ``--parallel 1`` (one replica) and ``--parallel 2`` (two replicas) in turn, A B A B, each on a
fresh store, after a warm-up sweep that starts both replicas (start-up is charged to neither).
Printed per pair: trials per second of each and their ratio, and the share of the serial sweep's
wall time spent inside Fit (the trials must be fit-bound for the ratio to speak to scale-out).
The same directory code serves replicas behind a DNS name (Swarm dnsrr, Kubernetes headless).
Target: ratio >= 1.6 on two idle cores.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from orchestrator.services.directory import ServiceDirectory, resolve_methods
from orchestrator.services.embedded import EmbeddedServices
from orchestrator.store import Store
from orchestrator.sweep import Sweep, SweepPlan

PLAN = SweepPlan(
    methods=("gcn",),
    datasets=("synthetic-homophilous",),
    regimes=("10/10/80", "50/25/25"),
    splits=(0, 1, 2, 3, 4),
    budget=1,
)


def sweep_once(embedded: EmbeddedServices, parallel: int) -> tuple[float, float, int]:
    """(wall seconds, seconds inside Fit summed over trials, ok trials) of one sweep on a fresh store."""
    with tempfile.TemporaryDirectory() as scratch, Store(Path(scratch) / "runs.sqlite") as store:
        directory = ServiceDirectory(resolve_methods(list(PLAN.methods)), embedded=embedded, replicas=parallel)
        try:
            sweep = Sweep(PLAN, store, directory, parallel=parallel, warmup="none")
            started = time.perf_counter()
            records = sweep.run()
            wall = time.perf_counter() - started
        finally:
            directory.close()
    return wall, sum(r.fit_e2e_s or 0.0 for r in records), sum(r.status == "ok" for r in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    trials = len(PLAN.regimes) * len(PLAN.splits)
    with EmbeddedServices() as embedded:
        sweep_once(embedded, 2)  # starts and warms both replicas
        ratios = []
        print(
            f"{'pair':>4} {'1 replica trials/s':>19} {'2 replicas trials/s':>20} {'ratio':>6} "
            f"{'fit share (1 replica)':>22}"
        )
        for pair in range(args.pairs):
            one, fit_one, ok_one = sweep_once(embedded, 1)
            two, _, ok_two = sweep_once(embedded, 2)
            assert ok_one == ok_two == trials, (ok_one, ok_two)
            ratios.append(one / two)
            print(f"{pair:>4} {trials / one:>19.3f} {trials / two:>20.3f} {one / two:>6.2f} {fit_one / one:>22.1%}")
    print(
        f"median ratio (2 replicas / 1 replica, trials per second): {statistics.median(ratios):.2f}  (target >= 1.6 "
        "on two idle cores)"
    )


if __name__ == "__main__":
    main()
