"""`make demo`: a small real sweep, then its results table.

MLP and GCN, each through its gRPC service, on a synthetic graph and on the real Texas web graph
(heterophilous: the MLP wins there), under both label regimes, with the default configuration
plus one sampled configuration per cell, two trials at a time on two service replicas: the benchmark's
whole loop in about a minute on a two-core laptop.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from orchestrator.cli.main import app

STORE = Path("runs/demo.sqlite")


def main() -> int:
    for path in STORE.parent.glob(f"{STORE.name}*"):  # a fresh store: the demo really runs every trial
        path.unlink()
    os.environ.setdefault("NODEGROUND_THREADS", "1")
    # A table: one flag and its value per line: the formatter keeps the pairs.
    args = [
        "run",
        "--methods", "mlp,gcn",
        "--datasets", "synthetic-tiny,texas",
        "--regimes", "10/10/80,50/25/25",
        "--splits", "0",
        "--budget", "2",
        "--parallel", "2",
        "--store", str(STORE),
    ]  # fmt: skip
    print("orchestrator " + " ".join(args), flush=True)
    try:
        app(args=args, prog_name="orchestrator")
    except SystemExit as exit_:
        if exit_.code:
            return int(exit_.code)
    print(f"\nrecords: {STORE}  (inspect with `orchestrator show --store {STORE}`)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
