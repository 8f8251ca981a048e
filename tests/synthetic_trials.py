"""Synthetic trial tables for the tests and the benchmarks: shaped like the benchmark, or written row by row.

``synthetic_trials`` is built with vectorised numpy (no per-row Python), so the full-size table (21 methods x
51 datasets x 2 regimes x 5 splits x 201 trials, about 2.15 million rows) takes a few seconds; ``trial_rows``
and ``mixed_status_trials`` are small tables whose every row a test spells out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from contract.families import load_families
from orchestrator.records import COLUMNS, TASK_BINARY, TASK_MULTICLASS

# Method names as the records store them, read from the family manifests (the one place a
# method's name is declared): a synthetic table and a real store spell every view the same way.
# GFM families are those that declare their pretraining graphs.
_FAMILIES = load_families().values()
SUPERVISED = tuple(m for f in _FAMILIES if f.pretraining_graphs is None for m in f.methods)
GFMS = tuple(m for f in _FAMILIES if f.pretraining_graphs is not None for m in f.methods)
REGIMES = ("10/10/80", "50/25/25")
_NONE = np.array(None, dtype=object)  # np.where's missing value in object columns


def synthetic_dataset_stats(n_datasets: int = 51, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    names = [f"ds{i:02d}" for i in range(n_datasets)]
    return pd.DataFrame(
        {
            "dataset": names,
            "num_nodes": np.round(10 ** rng.uniform(np.log10(183), np.log10(568_795), n_datasets)).astype(int),
            "avg_degree": 10 ** rng.uniform(0, 2, n_datasets),
            "adjusted_homophily": rng.uniform(-0.3, 0.94, n_datasets),
            "feature_dim": np.round(10 ** rng.uniform(np.log10(12), np.log10(8710), n_datasets)).astype(int),
            "feature_nonzero_fraction": 10 ** rng.uniform(-3, 0, n_datasets),
            "num_classes": np.where(np.arange(n_datasets) % 5 == 0, 2, rng.integers(3, 71, n_datasets)),
            "class_imbalance": 10 ** rng.uniform(0, 2, n_datasets),
        }
    )


def synthetic_trials(
    supervised: tuple[str, ...] = SUPERVISED,
    gfms: tuple[str, ...] = GFMS,
    n_datasets: int = 51,
    regimes: tuple[str, ...] = REGIMES,
    n_splits: int = 5,
    n_trials: int = 201,
    gfm_trials: int | None = None,
    failure_rate: float = 0.02,
    gfm_max_classes: int | None = 10,
    user_methods: tuple[str, ...] = (),
    seed: int = 0,
    full_schema: bool = True,
) -> pd.DataFrame:
    """A trial table with every column of the record contract (``full_schema``) or the core ones.

    GFMs get ``gfm_trials`` trials (default: as many as supervised methods) and, when
    ``gfm_max_classes`` is set, no rows at all on datasets with more classes (missing results
    that the analysis imputes). ``user_methods`` are supervised methods with origin "user:<name>"
    that skip the last dataset (a hole that must never be imputed).
    """
    rng = np.random.default_rng(seed)
    stats = synthetic_dataset_stats(n_datasets, seed)
    methods = list(supervised) + list(gfms) + list(user_methods)
    kinds = ["supervised"] * len(supervised) + ["gfm"] * len(gfms) + ["supervised"] * len(user_methods)
    origins = ["builtin"] * (len(supervised) + len(gfms)) + [f"user:{m.lower()}" for m in user_methods]
    trials_per = [n_trials] * len(supervised) + [gfm_trials or n_trials] * len(gfms) + [n_trials] * len(user_methods)
    world = _World(
        m_skill=rng.normal(0, 0.03, len(methods)),
        ds_base=rng.uniform(0.55, 0.9, n_datasets),
        md_skill=rng.normal(0, 0.03, (len(methods), n_datasets)),
        m_cost=10 ** rng.uniform(-1, 1, len(methods)),
        ds_cost=10 ** rng.uniform(-0.5, 1.5, n_datasets),
        num_classes=stats["num_classes"].to_numpy(),
        n_regimes=len(regimes),
        n_splits=n_splits,
        failure_rate=failure_rate,
    )
    parts = []
    for mi, (m, kind, origin, nt) in enumerate(zip(methods, kinds, origins, trials_per, strict=True)):
        ds = np.arange(n_datasets)
        if kind == "gfm" and gfm_max_classes is not None:
            ds = ds[world.num_classes[ds] <= gfm_max_classes]
        if origin != "builtin":
            ds = ds[:-1]
        parts.append(_method_trials(rng, world, mi, m, kind, origin, ds, nt))
    df = pd.concat(parts, ignore_index=True)
    df["dataset"] = pd.Categorical.from_codes(df.pop("d"), categories=np.array(stats["dataset"]))
    df["regime"] = pd.Categorical.from_codes(df.pop("r"), categories=list(regimes))
    _add_metrics(df, world.num_classes)
    return _with_full_schema(df) if full_schema else df


@dataclass(frozen=True)
class _World:
    """What every method's trials are drawn from: skills, costs and the datasets' class counts."""

    m_skill: np.ndarray
    ds_base: np.ndarray
    md_skill: np.ndarray
    m_cost: np.ndarray
    ds_cost: np.ndarray
    num_classes: np.ndarray
    n_regimes: int
    n_splits: int
    failure_rate: float


def _method_trials(
    rng: np.random.Generator, world: _World, mi: int, m: str, kind: str, origin: str, ds: np.ndarray, nt: int
) -> pd.DataFrame:
    """Method ``mi``'s trials on datasets ``ds``: dataset and regime as codes (``d``, ``r``), the score apart."""
    grid = np.array(
        np.meshgrid(ds, np.arange(world.n_regimes), np.arange(world.n_splits), np.arange(nt), indexing="ij")
    )
    d, r, s, t = (a.ravel() for a in grid)
    n = len(d)
    # trial quality: default is decent, sampled configs scatter around the tuned optimum
    q = world.ds_base[d] + world.m_skill[mi] + world.md_skill[mi, d] + 0.04 * r + rng.normal(0, 0.015, n)
    q = np.where(t == 0, q - 0.03, q - np.abs(rng.normal(0, 0.04, n)))
    q = np.clip(q, 0.01, 0.995)
    score = np.clip(q + rng.normal(0, 0.01, n), 0, 1)
    val_loss = -np.log(np.clip(q + rng.normal(0, 0.01, n), 1e-3, 0.999))
    status = np.where(rng.random(n) < world.failure_rate * (t > 0), "failed", "ok")
    ok = status == "ok"
    m_cost, ds_cost = world.m_cost[mi], world.ds_cost[d]
    fit = m_cost * ds_cost * (1 + 0.3 * rng.random(n)) * (1 + r)
    fit_rss = (2e8 + 1e7 * m_cost * ds_cost) * (1 + 0.2 * rng.random(n))
    gpu = (5e8 * m_cost * ds_cost * (1 + 0.2 * rng.random(n))) if kind == "gfm" or mi % 2 == 0 else np.zeros(n)
    return pd.DataFrame(
        {
            "method": m,
            "kind": kind,
            "origin": origin,
            "d": d,
            "r": r,
            "split": s,
            "trial_index": t,
            "status": status,
            "val_loss": np.where(ok, val_loss, np.nan),
            "score": np.where(ok, score, np.nan),
            "fit_service_s": np.where(ok, fit, fit * 0.5),
            "predict_service_s": np.where(ok, 0.05 * fit, np.nan),
            "fit_peak_rss_bytes": fit_rss,
            "predict_peak_rss_bytes": np.where(ok, 0.8 * fit_rss, np.nan),
            "fit_peak_gpu_bytes": gpu,
            "predict_peak_gpu_bytes": np.where(ok, 0.7 * gpu, np.nan),
        }
    )


def _add_metrics(df: pd.DataFrame, num_classes: np.ndarray) -> None:
    """The test metrics from the score (binary datasets report AUROC first), in place."""
    is_bin = num_classes[df["dataset"].cat.codes.to_numpy()] == 2
    score = df.pop("score").to_numpy()
    ok = df["status"].to_numpy() == "ok"
    df["task_type"] = np.where(is_bin, TASK_BINARY, TASK_MULTICLASS)
    df["primary_metric"] = np.where(ok, np.where(is_bin, "auroc", "accuracy"), _NONE)
    df["test_primary"] = score
    df["test_accuracy"] = np.where(is_bin, score - 0.05, score)
    df["test_auroc"] = np.where(is_bin, score, np.nan)
    df["test_macro_f1"] = np.where(is_bin | ~ok, np.nan, score - 0.08)
    df["test_precision"] = np.where(is_bin & ok, score - 0.1, np.nan)
    df["test_cross_entropy"] = np.where(ok, df["val_loss"] * 1.05, np.nan)
    df["val_accuracy"] = np.where(ok, np.exp(-df["val_loss"]), np.nan)
    df["num_classes"] = num_classes[df["dataset"].cat.codes.to_numpy()]
    df["is_default"] = df["trial_index"] == 0


def _with_full_schema(df: pd.DataFrame) -> pd.DataFrame:
    """Every column of the record contract, in its order: the bookkeeping ones made up, the rest empty."""
    ok = df["status"].to_numpy() == "ok"
    df["method_version"] = "1.0"
    df["family"] = df["method"]
    df["dataset_hash"] = df["dataset"].astype(str)
    df["config_hash"] = df["trial_index"].astype(str)
    df["config_json"] = "{}"
    df["seed"] = df["split"]
    df["error"] = np.where(ok, _NONE, "synthetic failure")
    df["fit_e2e_s"] = df["fit_service_s"] * 1.1
    df["predict_e2e_s"] = df["predict_service_s"] * 1.1
    df["upload_e2e_s"] = 0.0
    df["started_at"] = "2026-01-01T00:00:00Z"
    df["finished_at"] = "2026-01-01T00:00:01Z"
    df["trial_key"] = (
        df["method"].astype(str)
        + "@1.0|"
        + df["dataset"].astype(str)
        + "|"
        + df["regime"].astype(str)
        + "|"
        + df["split"].astype(str)
        + "|"
        + df["trial_index"].astype(str)
    )
    for col in COLUMNS:
        if col not in df.columns:
            df[col] = None
    return df[list(COLUMNS)]


def write_store(df: pd.DataFrame, path, chunk_rows: int = 200_000) -> None:
    """Write a trial table to a SQLite store (table ``trials``), Parquet or CSV, by suffix."""
    import sqlite3
    from pathlib import Path

    path = Path(path)
    if path.suffix == ".parquet":
        df.to_parquet(path, index=False)
        return
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
        return
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        cols = list(df.columns)
        con.execute(f"CREATE TABLE IF NOT EXISTS trials ({', '.join(cols)})")
        sql = f"INSERT INTO trials VALUES ({', '.join('?' * len(cols))})"
        for start in range(0, len(df), chunk_rows):
            part = df.iloc[start : start + chunk_rows]
            arrays = []
            for c in cols:
                s = part[c]
                if isinstance(s.dtype, pd.CategoricalDtype) or s.dtype == object or str(s.dtype).startswith("str"):
                    arrays.append(s.astype(object).where(s.notna(), None).tolist())
                elif s.dtype.kind == "b":
                    arrays.append(s.astype(int).tolist())
                elif s.dtype.kind in "iu":
                    arrays.append(s.tolist())
                else:
                    arrays.append([None if x != x else x for x in s.tolist()])
            con.executemany(sql, zip(*arrays, strict=True))
        con.commit()
    finally:
        con.close()


def trial_rows(rows: list[dict]) -> pd.DataFrame:
    """A minimal trial table from partial rows (defaults fill the identity columns)."""
    base = {
        "method_version": "1",
        "kind": "supervised",
        "task_type": "multiclass",
        "regime": "10/10/80",
        "status": "ok",
        "origin": "builtin",
        "primary_metric": "accuracy",
        "fit_service_s": 1.0,
        "predict_service_s": 0.1,
        "fit_peak_rss_bytes": 100.0,
        "predict_peak_rss_bytes": 50.0,
        "fit_peak_gpu_bytes": 0.0,
        "predict_peak_gpu_bytes": 0.0,
    }
    return pd.DataFrame([{**base, **r} for r in rows])


#: The cells of ``mixed_status_trials`` whose every trial ended with one non-ok status: (method, dataset, split).
ONLY_STATUS = {
    "timeout": ("gcn", "d0", 0),
    "oom": ("gcn", "d0", 1),
    "failed": ("mlp", "d0", 0),
    "nonfinite": ("mlp", "d0", 1),
    "unavailable": ("gcn", "d1", 0),
}


def mixed_status_trials() -> pd.DataFrame:
    """A store a sweep can write mid-way: each non-ok status is the only one of a cell (``ONLY_STATUS``), and on
    ``d2`` only the GFM has an ok trial (every supervised trial there timed out). Two splits, two trials per
    supervised cell, one per GFM cell; failed trials carry what a real one records (a fit time, no peaks)."""
    rows = []
    for dataset in ("d0", "d1", "d2", "d3"):
        for split in (0, 1):
            rows.append(dict(method="graphany", kind="gfm", dataset=dataset, split=split, trial_index=0,
                             val_loss=0.6, test_primary=0.55 + 0.01 * split))  # fmt: skip
            for method, skill in (("gcn", 0.1), ("mlp", 0.0)):
                status = next((s for s, cell in ONLY_STATUS.items() if cell == (method, dataset, split)), "ok")
                if dataset == "d2":
                    status = "timeout"
                for index in (0, 1):
                    ok = status == "ok"
                    rows.append(dict(
                        method=method, dataset=dataset, split=split, trial_index=index, status=status,
                        val_loss=0.5 - 0.1 * index if ok else np.nan,
                        test_primary=0.6 + skill + 0.02 * index + 0.01 * split if ok else np.nan,
                        primary_metric="accuracy" if ok else None,
                        fit_service_s=1.0 + index, predict_service_s=0.1 if ok else np.nan,
                        fit_peak_rss_bytes=100.0 if ok else np.nan, predict_peak_rss_bytes=50.0 if ok else np.nan,
                    ))  # fmt: skip
    return trial_rows(rows)
