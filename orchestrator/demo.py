"""`make demo`: a small real sweep (MLP and GCN on a synthetic graph and on Cora), then its results table."""

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
    args = [
        "run",
        "--methods", "mlp,gcn",
        "--datasets", "synthetic-homophilous,cora",
        "--regimes", "10/10/80",
        "--splits", "0,1",
        "--budget", "2",
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
