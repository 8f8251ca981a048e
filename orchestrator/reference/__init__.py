"""Reference records the project ships: the Lite tier's trials of every built-in method that runs with official
weights here, so a contributor's method runs alone and is ranked among them (`orchestrator report --reference lite`).

The table (``lite.csv``, plain CSV, one row per trial, the record columns a report and a rerun need) and its
manifest (``lite.json``: the protocol, the methods and datasets covered, those missing and why, those pending with
their estimated hours, the hardware, the time the builds took, the code version, the table's sha256) are package
data, so an installed CLI finds them. ``make reference`` (``orchestrator reference build``) writes both, resuming
from the table itself: its rows go back into a store, the sweep runs what is missing, the table is written anew.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from contract.files import FileRefused, json_field, json_object, read_json
from orchestrator.metrics import TEST_METRICS, VAL_METRICS

REFERENCE_DIR = Path(__file__).resolve().parent
NAMES = ("lite",)  # the protocols a reference ships for
# What a reference row keeps of a trial record: identity, configuration, outcome, cost and metrics. The hardware is
# one line per row (``orchestrator.host.hardware_of``), not the host's whole description.
TABLE_COLUMNS = (
    "trial_key",
    "method",
    "method_version",
    "family",
    "kind",
    "dataset",
    "dataset_hash",
    "task_type",
    "num_classes",
    "regime",
    "split",
    "trial_index",
    "is_default",
    "config_json",
    "config_hash",
    "seed",
    "status",
    "error",
    "time_limit_s",
    "fit_service_s",
    "predict_service_s",
    "fit_cpu_s",
    "predict_cpu_s",
    "fit_peak_rss_bytes",
    "predict_peak_rss_bytes",
    "fit_peak_gpu_bytes",
    "predict_peak_gpu_bytes",
    "fit_info_json",
    *VAL_METRICS,
    *TEST_METRICS,
    "primary_metric",
    "test_primary",
    "extra_json",
    "protocol",
    "hardware",
)
ERROR_CHARS = 300  # an error's first characters are kept (a traceback's tail is not a result)


class ReferenceError(ValueError):
    """A reference that is not shipped, or whose table does not match its manifest."""


@dataclass
class Manifest:
    """What a shipped reference table holds and how it was made."""

    protocol: str
    budget: int
    regimes: list[str]
    splits: list[int]
    methods: list[str]  # covered
    missing: dict[str, str]  # method -> why it is not shipped (random-initialised weights, ...)
    datasets: list[str]  # complete: every cell of every method
    pending: dict[str, float]  # dataset -> estimated hours still to run (make reference extends the table)
    hardware: str
    rows: int = 0
    sha256: str = ""
    builds: list[dict[str, Any]] = field(default_factory=list)  # each make reference: when, wall and CPU s, commit

    @property
    def wall_s(self) -> float:
        return float(sum(b.get("wall_s", 0.0) for b in self.builds))

    @property
    def cpu_s(self) -> float:
        return float(sum(b.get("cpu_s", 0.0) for b in self.builds))


def paths(name: str, root: Path | None = None) -> tuple[Path, Path]:
    """The table and manifest of reference ``name`` under ``root`` (default: the package's own folder)."""
    folder = REFERENCE_DIR if root is None else root
    return folder / f"{name}.csv", folder / f"{name}.json"


def table_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_manifest(name: str, root: Path | None = None) -> Manifest:
    """The manifest of reference ``name``, each field of its type; ReferenceError (one line) otherwise."""
    if name not in NAMES:
        raise ReferenceError(f"unknown reference {name!r}; the project ships: {', '.join(NAMES)}")
    _, manifest = paths(name, root)
    if not manifest.exists():
        raise ReferenceError(f"no {name} reference is shipped here ({manifest} is missing): `make reference` builds it")
    try:
        document = json_object(read_json(manifest, "the reference manifest"), manifest, "the reference manifest")
        unknown = sorted(set(document) - set(_MANIFEST_FIELDS))
        if unknown:
            raise FileRefused(f"the reference manifest {manifest} has unknown field(s) {', '.join(unknown)[:120]}")
        fields = {
            key: json_field(document, key, kinds, manifest, "the reference manifest", **optional)
            for key, (kinds, optional) in _MANIFEST_FIELDS.items()
        }
    except FileRefused as exc:
        raise ReferenceError(f"{exc}: rebuild it with `make reference`") from None
    return Manifest(**fields)


#: Each manifest field: its JSON kinds, and a default where an older manifest may lack it.
_MANIFEST_FIELDS: dict[str, tuple[type | tuple[type, ...], dict[str, Any]]] = {
    "protocol": (str, {}),
    "budget": (int, {}),
    "regimes": (list, {}),
    "splits": (list, {}),
    "methods": (list, {}),
    "missing": (dict, {}),
    "datasets": (list, {}),
    "pending": (dict, {}),
    "hardware": (str, {}),
    "rows": (int, {"default": 0}),
    "sha256": (str, {"default": ""}),
    "builds": (list, {"default": []}),
}


def load_reference(name: str, root: Path | None = None) -> tuple[pd.DataFrame, Manifest]:
    """The reference table, checked against its manifest's sha256, and the manifest."""
    manifest = read_manifest(name, root)
    table, _ = paths(name, root)
    if not table.exists() or table_sha256(table) != manifest.sha256:
        raise ReferenceError(f"{table} does not match its manifest's sha256: rebuild it with `make reference`")
    frame = pd.read_csv(table, dtype={"config_json": str, "fit_info_json": str, "extra_json": str, "error": str})
    return frame, manifest


def write_reference(frame: pd.DataFrame, manifest: Manifest, root: Path | None = None) -> None:
    """Write the table (sorted, so a rebuild of the same trials writes the same bytes) and its manifest."""
    table, path = paths(manifest.protocol, root)
    table.parent.mkdir(parents=True, exist_ok=True)
    rows = frame.loc[:, list(TABLE_COLUMNS)].sort_values(["dataset", "regime", "split", "method", "trial_index"])
    rows = rows.assign(
        error=rows["error"].astype("string").str.slice(0, ERROR_CHARS), is_default=rows["is_default"].astype(bool)
    )
    rows.to_csv(table, index=False, float_format="%.10g", lineterminator="\n")
    manifest.rows, manifest.sha256 = len(rows), table_sha256(table)
    path.write_text(json.dumps(asdict(manifest), indent=2, sort_keys=True) + "\n")


def store_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Reference rows as trial rows a store takes back (``Store.write_rows``): a build resumes from the shipped table.

    A row's hardware line goes into its ``host_json`` (``hardware_of`` reads it back), its other host facts are gone.
    """
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    for row in rows:
        row["host_json"] = json.dumps({"hardware": row.pop("hardware") or "cpu"})
        for flag in ("is_default",):
            row[flag] = bool(row[flag]) if row[flag] is not None else None
    return rows
