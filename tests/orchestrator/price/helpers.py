"""Records as a store holds them, times and peaks drawn from a known law: what the price's tests learn from."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from orchestrator.data.registry import dataset_size
from orchestrator.price import PROBE_EPOCHS, PROBE_GRAPHS, Size, size_values

HOST = json.dumps({"device": "cpu", "cpu_model": "Test CPU", "compute_threads": 2, "cpu_count": 2})
SMALL = ("texas", "cornell", "wisconsin")
LARGE = ("squirrel-filtered", "actor", "minesweeper")


def gcn_law(size: Size, regime: str, config: dict, epochs: float) -> tuple[float, float]:
    """Seconds and peak bytes of a gcn trial as the prior's shape says, with other weights than the prior's."""
    v = size_values(size, regime)
    hidden, layers = config["hidden"], config["num_layers"]
    work = 3 * v["nodes"] * v["features"] * hidden + 20 * v["arcs"] * hidden * layers + v["nodes"] * hidden**2 * layers
    seconds = 0.05 + epochs * (0.004 + 0.2 * work / 1e9)
    peak = 4e8 + 6 * v["nodes"] * v["features"] + 50 * v["arcs"] + 30 * v["nodes"] * hidden * layers
    return seconds, peak


def records(datasets, law=gcn_law, seed: int = 0, calibration: bool = False, method: str = "gcn") -> pd.DataFrame:
    """Trial rows as a store holds them: three configurations per graph and regime, times and peaks from ``law``
    with 10% noise; calibration rows run PROBE_EPOCHS epochs, real ones stop early."""
    rng = np.random.default_rng(seed)
    rows = []
    for name in datasets:
        raw = dataset_size(name)
        size = Size(raw.nodes, raw.edges, raw.features, raw.classes, False)
        for regime in ("10/10/80", "50/25/25"):
            for index, (hidden, layers) in enumerate(((64, 2), (256, 3), (16, 5))):
                patience = 50 + 50 * index
                config = {"hidden": hidden, "num_layers": layers, "max_epochs": 500, "patience": patience}
                best = float(rng.integers(0, 40))
                epochs = PROBE_EPOCHS if calibration else min(500.0, best + patience + 1)
                if calibration:
                    config["max_epochs"] = PROBE_EPOCHS
                seconds, peak = law(size, regime, config, epochs)
                noise = rng.lognormal(0, 0.1, 2)
                rows.append(
                    {
                        "method": method, "family": "gnn", "dataset": name, "regime": regime, "status": "ok",
                        "config_json": json.dumps(config), "host_json": HOST,
                        "fit_info_json": json.dumps({"epochs": epochs, "best_epoch": best}),
                        "protocol": "calibration" if calibration else None,
                        "fit_service_s": seconds * noise[0] * 0.9, "predict_service_s": seconds * noise[0] * 0.1,
                        "fit_peak_rss_bytes": peak * noise[1], "predict_peak_rss_bytes": 4e8,
                        "fit_peak_gpu_bytes": 0, "predict_peak_gpu_bytes": 0,
                    }
                )  # fmt: skip
    return pd.DataFrame(rows)


def probe() -> pd.DataFrame:
    return records([g.name for g in PROBE_GRAPHS], calibration=True, seed=1)


def size_of(name: str) -> Size:
    """A catalog graph's size, as the catalog publishes it."""
    raw = dataset_size(name)
    return Size(raw.nodes, raw.edges, raw.features, raw.classes, False)
