"""Trial rows of a small Lite-like protocol, for the reference, comparison and verification tests."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from orchestrator.records import COLUMNS
from tests.orchestrator.conftest import trial_record

HOST = json.dumps({"device": "cpu", "cpu_model": "Ref CPU", "compute_threads": 2, "cpu_count": 2})


def rows(methods, datasets, regimes=("10/10/80", "50/25/25"), splits=(0,), budget=3, seed=0, host=HOST,
         origin="builtin") -> pd.DataFrame:  # fmt: skip
    """One ok trial per (method, dataset, regime, split, index) with seeded metrics and costs, as a store holds."""
    rng = np.random.default_rng(seed)
    out = []
    for method in methods:
        skill = rng.uniform(0.5, 0.9)
        for dataset in datasets:
            for regime in regimes:
                for split in splits:
                    for index in range(budget):
                        score = float(np.clip(skill + rng.normal(0, 0.03), 0, 1))
                        out.append(
                            trial_record(
                                f"{method}@v|{dataset}|{regime}|{split}|c{index}|id", method=method,
                                kind="supervised", dataset=dataset, regime=regime, split=split, trial_index=index,
                                is_default=index == 0, config_json=json.dumps({"i": index}), config_hash=f"c{index}",
                                val_loss=float(1 - score + rng.normal(0, 0.01)), test_primary=score,
                                test_accuracy=score, primary_metric="accuracy", fit_service_s=1.0 + index,
                                predict_service_s=0.1, fit_peak_rss_bytes=2**29, predict_peak_rss_bytes=2**28,
                                host_json=host, origin=origin,
                            ).as_row()
                        )  # fmt: skip
    return pd.DataFrame(out, columns=list(COLUMNS))
