"""An in-process run's timing spans against the service path's: one method's Lite cells, each way, side by side.

The service path is `orchestrator run --parallel 1` with one embedded one-thread service; the in-process path is
``nodeground.run`` in a process of its own (a researcher's script), on the same thread rule. Both record every fit
and predict as measured by the service's ``ResourceProbe``; the figure to read is the ratio of their CPU seconds
summed over the cells' trials (what NodeGround counts as a call's time on a CPU, ``records.call_seconds``), which
load on a shared machine does not lengthen. Wall seconds are printed beside it, and so is whether the two runs made
the same trials (keys, selections, metrics). Rounds alternate which path runs first, so load drifts hit both alike.

    python -m tests.bench.bench_inprocess [--method gcn] [--dataset texas] [--rounds 1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from orchestrator.store import read_trials
from orchestrator.submission.verify import COMPARED

REPO = Path(__file__).resolve().parents[2]
SPANS = ("fit_cpu_s", "predict_cpu_s", "fit_service_s", "predict_service_s")
IN_PROCESS = """
import sys
import nodeground
from methods.families import method_classes
from contract.families import family_of, load_families

method, dataset, store = sys.argv[1:]
cls = next(c for c in method_classes(family_of(method, load_families())) if c.name == method)
nodeground.run(cls, dataset, store=store, verbose=False)
"""


def service_path(method: str, dataset: str, store: Path, env: dict[str, str]) -> None:
    args = ["run", "--methods", method, "--datasets", dataset, "--protocol", "lite", "--parallel", "1"]
    subprocess.run(
        [sys.executable, "-m", "orchestrator", *args, "--services", "embedded", "--store", str(store)],
        cwd=REPO, env=env, check=True, capture_output=True,
    )  # fmt: skip


def in_process(method: str, dataset: str, store: Path, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-c", IN_PROCESS, method, dataset, str(store)], env=env, check=True)


def same_trials(a: pd.DataFrame, b: pd.DataFrame) -> str:
    """Whether two runs made the same trials: keys in order, statuses, the largest metric difference."""
    order = ["regime", "trial_index"]
    a, b = a.sort_values(order).reset_index(drop=True), b.sort_values(order).reset_index(drop=True)
    if list(a["trial_key"]) != list(b["trial_key"]) or list(a["status"]) != list(b["status"]):
        return "different trials"
    largest = max(float((a[c] - b[c]).abs().max()) if a[c].notna().any() else 0.0 for c in COMPARED)
    return f"the same {len(a)} trials (largest metric difference {largest:.2g})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="gcn")
    parser.add_argument("--dataset", default="texas")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    env = {**os.environ, "NODEGROUND_THREADS": os.environ.get("NODEGROUND_THREADS", "1")}
    sums: dict[str, list[pd.Series]] = {"service": [], "in-process": []}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            stores = {name: Path(scratch) / f"{name}-{round_}.sqlite" for name in sums}
            paths = [("service", service_path), ("in-process", in_process)]
            for name, run in paths if round_ % 2 == 0 else paths[::-1]:
                run(args.method, args.dataset, stores[name], env)
            trials = {name: read_trials(store) for name, store in stores.items()}
            print(f"round {round_}: {same_trials(trials['service'], trials['in-process'])}", flush=True)
            for name, frame in trials.items():
                sums[name].append(frame[list(SPANS)].sum())
    service, local = (pd.concat(sums[name], axis=1).sum(axis=1) for name in ("service", "in-process"))
    print(f"{args.method} on {args.dataset}, lite, {args.rounds} round(s), one thread; seconds summed over the trials:")
    for span in SPANS:
        print(f"  {span:>18}: service {service[span]:8.2f}  in-process {local[span]:8.2f}  "
              f"ratio {local[span] / service[span]:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
