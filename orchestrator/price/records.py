"""The records a price learns from: the stores' trials read, a trial's cost, and the hardware to price on.

A price is for one hardware (``orchestrator.host.hardware_of``: a GPU by name and memory, else the CPU model and the
threads the service computed with), learned from the ``ok`` records of that hardware (``learn_cost_model``); the
seconds of a call are counted by the rule every cost uses (``orchestrator.records.call_seconds``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from contract.families import load_families
from orchestrator.data.synthetic import CALIBRATION_PREFIX
from orchestrator.host import hardware_of
from orchestrator.price.model import MethodModel, learn_method_model
from orchestrator.price.sizes import sizes_of
from orchestrator.protocols import CALIBRATION
from orchestrator.records import STATUS_OK, call_seconds
from orchestrator.store import read_trial_columns


class EstimateError(ValueError):
    """Records that cannot support an estimate (none on the asked hardware, none that ran)."""


RECORD_COLUMNS = (
    "method",
    "family",
    "dataset",
    "regime",
    "status",
    "config_json",
    "fit_info_json",
    "host_json",
    "protocol",
    "fit_service_s",
    "predict_service_s",
    "fit_cpu_s",
    "predict_cpu_s",
    "fit_peak_rss_bytes",
    "predict_peak_rss_bytes",
    "fit_peak_gpu_bytes",
    "predict_peak_gpu_bytes",
)


def read_records(stores: Sequence[Path]) -> pd.DataFrame:
    """The columns an estimate reads, from every given store (read-only)."""
    frames = [read_trial_columns(path, RECORD_COLUMNS) for path in stores]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(RECORD_COLUMNS))


def _column(frame: pd.DataFrame, name: str) -> np.ndarray:
    """A numeric column as floats, all NaN where the records predate it."""
    if name not in frame:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)


def json_object(text: object) -> dict:
    """A record's JSON column as a dict: empty where it is missing or not an object."""
    try:
        value = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


COST_COLUMNS = ["method", "family", "dataset", "regime", "config", "info", "hardware", "threads", "calibration"]


def trial_costs(records: pd.DataFrame) -> pd.DataFrame:
    """Per ``ok`` trial: method, family, dataset, regime, config, fit info, hardware, seconds (fit + predict), peak
    bytes (gpu, cpu) and whether it is a calibration trial."""
    ran = records[records["status"].eq(STATUS_OK) & records["fit_service_s"].notna()]
    if ran.empty:
        return pd.DataFrame(columns=[*COST_COLUMNS, "seconds", "gpu", "cpu"])
    hosts = [json_object(h) for h in ran["host_json"]]
    gpu = ran[["fit_peak_gpu_bytes", "predict_peak_gpu_bytes"]].fillna(0).astype(float).max(axis=1).to_numpy()
    protocol = ran["protocol"] if "protocol" in ran else pd.Series([None] * len(ran), index=ran.index)
    out = pd.DataFrame(
        {
            "method": ran["method"].astype(str),
            "family": ran["family"].astype(str) if "family" in ran else "",
            "dataset": ran["dataset"].astype(str),
            "regime": ran["regime"].astype(str),
            "config": [json_object(c) for c in ran["config_json"]],
            "info": [json_object(i) for i in ran["fit_info_json"]] if "fit_info_json" in ran else [{}] * len(ran),
            "hardware": [hardware_of(h) for h in ran["host_json"]],
            # CPU seconds add up every thread's work, so a floor per thread is theirs; wall seconds divide it
            "threads": np.where(
                np.isnan(_column(ran, "fit_cpu_s")) | (gpu > 0),
                [float(h.get("compute_threads") or h.get("cpu_count") or 1) for h in hosts],
                1.0,
            ),
            "calibration": (
                protocol.eq(CALIBRATION) | ran["dataset"].astype(str).str.startswith(CALIBRATION_PREFIX)
            ).to_numpy(),
            "seconds": np.clip(
                call_seconds(ran["fit_service_s"], _column(ran, "fit_cpu_s"), ran["fit_peak_gpu_bytes"])
                + np.nan_to_num(
                    call_seconds(ran["predict_service_s"], _column(ran, "predict_cpu_s"), ran["predict_peak_gpu_bytes"])
                ),
                1e-4,
                None,
            ),
            "gpu": gpu,
            "cpu": ran[["fit_peak_rss_bytes", "predict_peak_rss_bytes"]].fillna(0).astype(float).max(axis=1),
        }
    )
    return out.reset_index(drop=True)


@dataclass
class CostModel:
    """Every method's model for one hardware, from the given records."""

    hardware: str
    methods: dict[str, MethodModel]
    hardware_seen: dict[str, int]  # every hardware in the records, with its record count
    cores: int | None = None  # the host's CPU cores, as its records name them


def learn_cost_model(records: pd.DataFrame, hardware: str | None = None) -> CostModel:
    """Every method's model, learned from the records of ``hardware`` (default: the hardware most records ran on).

    ``hardware`` names a hardware as the records do, or a part of its name that only one of them has (``cpu``,
    ``H200``)."""
    costs = trial_costs(records)
    seen = {str(k): int(v) for k, v in costs["hardware"].value_counts().items()}
    if not seen:
        raise EstimateError("the given stores hold no trial that ran (no ok trial with a recorded time)")
    chosen = choose_hardware(seen, hardware)
    costs = costs[costs["hardware"] == chosen]
    sizes = sizes_of(costs["dataset"])
    families = load_families()
    models = {}
    for method, part in costs.groupby("method", sort=True):
        model = learn_method_model(part, sizes, families)
        if model is not None:
            models[str(method)] = model
    hosts = records.loc[records["host_json"].map(hardware_of) == chosen, "host_json"].map(json_object)
    cores = [h.get("cpu_count") for h in hosts if isinstance(h.get("cpu_count"), int)]
    return CostModel(chosen, models, seen, max(set(cores), key=cores.count) if cores else None)


def choose_hardware(seen: Mapping[str, int], asked: str | None) -> str:
    """The hardware to price on: the asked one (exactly, or the one name it is part of), else the commonest."""
    if asked is None:
        return max(seen, key=lambda h: seen[h])
    if asked in seen:
        return asked
    matches = [h for h in seen if asked.lower() in h.lower()]
    if len(matches) == 1:
        return matches[0]
    held = "; ".join(f"{h} ({n:,})" for h, n in seen.items())
    reason = "several hardware names contain it" if matches else "no records on it"
    raise EstimateError(f"--hardware {asked!r}: {reason}; the stores hold {held}")
