"""What `make reference` runs and ships: the reference methods, the cells that fit its time, the rows it keeps.

Methods: every supervised method, and a GFM whose every weights file has a published digest and loads here
(the weights directory or the mirror): its records are its official weights' results. The other GFMs are listed
as missing with the reason (tests run them on random parameters, which are never results).

Datasets: every catalog task this machine can load offline, cheapest first. The build prices every dataset's
cells with the cost estimate (``plan --estimate``'s: the probe's and the stores' records) and runs the datasets
that fit in its hours; the rest are pending in the manifest with their estimated hours, and the next build starts
from the shipped table and extends it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from contract.families import Family
from contract.files import FileRefused, read_json
from contract.weights import load_weights_catalog, weights_dir
from orchestrator.data.fetch import is_local
from orchestrator.host import hardware_of
from orchestrator.plan import Plan
from orchestrator.price import CostModel, estimate_cells, sizes_of
from orchestrator.protocols import Protocol
from orchestrator.records import call_seconds
from orchestrator.reference import TABLE_COLUMNS


def reference_methods(families: Mapping[str, Family]) -> tuple[list[str], dict[str, str]]:
    """(methods shipped, method -> why not) over every family."""
    catalog = load_weights_catalog()
    shipped: list[str] = []
    missing: dict[str, str] = {}
    for family in families.values():
        entries = [e for e in catalog.values() if e.family == family.name]
        unofficial = [e.id for e in entries if e.integrity[0] != "sha256"]
        absent = [
            e.id for e in entries if not (weights_dir() / e.relative_path).exists() and not is_local(e.url, e.sha256)
        ]
        for method in family.methods:
            if family.kind == "supervised" or (entries and not unofficial and not absent):
                shipped.append(method)
            elif unofficial:
                missing[method] = f"weights {', '.join(unofficial)} have no published digest: not official results"
            else:
                missing[method] = (
                    f"weights {', '.join(absent)} are neither in the weights directory nor in the mirror here "
                    "(tests run it on random parameters, which are never shipped as results)"
                )
    return shipped, missing


@dataclass(frozen=True)
class Sizing:
    """Which datasets a build runs (cheapest first, while their estimated hours fit) and which stay pending."""

    run: list[str]
    pending: dict[str, float]  # dataset -> estimated wall hours
    hours: dict[str, float]  # every dataset's estimated wall hours (priced cells), for the build's own line
    remaining: dict[str, float]  # every dataset's estimated wall hours of the trials the store does not hold
    unpriced: int  # trials of the plan the estimate could not price


def size_up(plan: Plan, model: CostModel, hours: float, held: set[str], parallel: int) -> Sizing:
    """Order the plan's datasets by the estimated wall hours of their trials the store does not hold (``held``: trial
    keys with an outcome; nodes break ties) and keep those that fit, up to the first that does not: the reference
    grows by the most datasets its hours buy.

    A dataset's wall hours are its trials' estimated service hours over the ``parallel`` services that run them side
    by side, so ``--hours 4`` is about four hours of the build's own time. A trial costs its cell's seconds per trial
    (the sweep's ETA prices it alike), so a dataset that a stopped build left half done, or whose rows of one method
    a new version made stale, is priced at what is left of it; pending lists a dataset's whole price, which is what
    a build from the shipped table alone pays.
    """
    costs = estimate_cells(plan, model)
    per_dataset: dict[str, float] = {}
    remaining: dict[str, float] = {}
    unpriced = 0
    for cell, cost in zip(plan.cells, costs, strict=True):
        whole = (cost.seconds or 0.0) / 3600 / parallel
        missing = sum(t.key not in held for t in plan.trials([cell]))
        per_dataset[cell.dataset] = per_dataset.get(cell.dataset, 0.0) + whole
        remaining[cell.dataset] = remaining.get(cell.dataset, 0.0) + (whole * missing / cell.trials if missing else 0)
        unpriced += cell.trials if cost.seconds is None else 0
    sizes = sizes_of(plan.sweep.datasets)

    def needs(dataset: str) -> float:
        return remaining.get(dataset, 0.0)

    ordered = sorted(plan.sweep.datasets, key=lambda d: (needs(d), sizes[d].nodes if d in sizes else float("inf")))
    run: list[str] = []
    pending: dict[str, float] = {}
    spent = 0.0
    for dataset in ordered:
        if not pending and spent + needs(dataset) <= hours:
            run.append(dataset)
            spent += needs(dataset)
        else:
            pending[dataset] = round(per_dataset.get(dataset, 0.0), 2)
    return Sizing(run, pending, per_dataset, remaining, unpriced)


def table_rows(trials: pd.DataFrame, keys: set[str], protocol: Protocol) -> pd.DataFrame:
    """The store's trials that the protocol's plan holds, as reference rows (the hardware one line each)."""
    rows = trials[trials["trial_key"].isin(keys)].copy()
    rows["protocol"] = protocol.name
    rows["hardware"] = [hardware_of(h) for h in rows["host_json"]]
    return rows.loc[:, list(TABLE_COLUMNS)]


def held_keys(rows: pd.DataFrame) -> set[str]:
    """The keys of the trials that have an outcome: a rerun skips them."""
    return set(rows.loc[rows["status"] != "unavailable", "trial_key"])


def complete_datasets(rows: pd.DataFrame, plan: Plan) -> list[str]:
    """The plan's datasets every planned trial of which has a row with an outcome (a rerun would skip it)."""
    held = held_keys(rows)
    complete = []
    for dataset in plan.sweep.datasets:
        cells = [c for c in plan.cells if c.dataset == dataset]
        if all(t.key in held for t in plan.trials(cells)):
            complete.append(dataset)
    return complete


def build_costs(rows: pd.DataFrame) -> dict[str, float]:
    """What a build's trials took, summed over fit and predict: the services' CPU hours (what the cost pages use,
    ``records.call_seconds``) beside their wall hours (which other work on the machine lengthens)."""
    cpu = np.nansum(call_seconds(rows["fit_service_s"], rows["fit_cpu_s"], rows["fit_peak_gpu_bytes"]))
    cpu += np.nansum(call_seconds(rows["predict_service_s"], rows["predict_cpu_s"], rows["predict_peak_gpu_bytes"]))
    wall = np.nansum(rows["fit_service_s"].astype(float)) + np.nansum(rows["predict_service_s"].astype(float))
    return {"service_cpu_h": round(float(cpu) / 3600, 3), "service_wall_h": round(float(wall) / 3600, 3)}


class LoadSampler:
    """The machine's load while a build runs, so its record says what it shared the machine with: the 1-minute load
    average (runnable processes, the build's own included) every ``interval`` seconds, against the cores."""

    def __init__(self, interval: float = 30.0, on_sample: Callable[[dict[str, float]], None] | None = None) -> None:
        self.interval = interval
        self.on_sample = on_sample  # called with ``summary()`` after every sample (the build's journal)
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="load-sampler", daemon=True)

    def _sample(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self.on_sample is not None:
                self.on_sample(self.summary())
            if self._stop.wait(self.interval):
                return

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, float]:
        samples = self.samples or [os.getloadavg()[0]]
        return {
            "load_mean": round(float(np.mean(samples)), 2),
            "load_max": round(float(np.max(samples)), 2),
            "cores": os.cpu_count() or 1,
        }


class BuildJournal:
    """A running build's line, in a file beside its working store, rewritten at every load sample.

    A build stopped by Ctrl-C writes its own line into the manifest; one killed outright (SIGKILL, the machine lost)
    cannot. Its last line stays in the journal, and the next build on the store ships it among the manifest's builds
    (``killed``, with the wall and CPU seconds it had run), so the hours a table took never go missing.
    """

    def __init__(self, store: Path, entry: dict[str, Any]) -> None:
        self.path = store.with_name(store.name + ".builds.json")
        self.key = f"{entry.get('started', '')}/{os.getpid()}"
        self.entry = {**entry, "key": self.key}
        self._lock = threading.Lock()

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            held = read_json(self.path, "the reference build's journal")
        except (FileNotFoundError, FileRefused):
            return {}  # none yet, or not ours to read (a build never writes what fails here): start it afresh
        if not isinstance(held, dict):
            return {}
        return {k: v for k, v in held.items() if isinstance(v, dict)}

    def orphans(self) -> list[dict[str, Any]]:
        """Earlier builds on this store that never wrote their manifest line, as manifest builds (a line that does not
        read as one is left out)."""
        lines: list[dict[str, Any]] = []
        for key, line in self._read().items():
            if key == self.key:
                continue
            try:
                figures = {k: float(line.get(k, 0.0)) for k in ("wall_s", "cpu_s")}
            except (TypeError, ValueError):
                continue
            lines.append(
                {
                    "finished": str(line.get("last_seen", line.get("started", "?"))),
                    **figures,
                    "datasets_added": [],
                    "commit": str(line.get("commit", "unknown")),
                    "interrupted": True,
                    "killed": True,
                    "services": line.get("services", "?"),
                    **{k: line[k] for k in ("load_mean", "load_max", "cores") if k in line},
                }
            )
        return sorted(lines, key=lambda b: b["finished"])

    def beat(self, **figures: Any) -> None:
        """Write this build's line now (its figures so far); the other builds' lines stay."""
        with self._lock:
            self.entry.update(figures, last_seen=datetime.now(UTC).isoformat(timespec="seconds"))
            lines = {**self._read(), self.key: self.entry}
            temporary = self.path.with_name(self.path.name + ".tmp")
            temporary.write_text(json.dumps(lines, indent=1, sort_keys=True) + "\n")
            os.replace(temporary, self.path)

    def close(self) -> None:
        """The manifest holds every line now (this build's and the orphans'): the journal is done with."""
        with self._lock:
            self.path.unlink(missing_ok=True)
