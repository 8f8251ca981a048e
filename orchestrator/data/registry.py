"""Dataset names -> canonical graphs: the built-in synthetic tasks, the catalog, and user datasets."""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from contract.errors import UserError
from orchestrator.data.cache import (
    cache_path,
    catalog_identity,
    entry_key,
    read_content_hash,
    read_graph,
    read_shapes,
    save_graph,
)
from orchestrator.data.fetch import is_local
from orchestrator.data.graph import Graph
from orchestrator.data.loaders import LOADERS, run_loader
from orchestrator.data.synthetic import (
    CALIBRATION_PREFIX,
    SYNTHETIC,
    CalibrationGraph,
    CalibrationNameError,
    load_synthetic,
)
from orchestrator.data.user import UserDatasetError, load_user_dataset, store_user_dataset, user_registry
from orchestrator.records import TASK_TYPES

# The catalog is ``datasets/catalog.toml``; this package's ``catalog.toml`` links to it, so that a wheel holds it as
# package data (a wheel copies the file a link names) and an installed package reads it where a checkout does.
CATALOG_PATH = Path(__file__).resolve().parent / "catalog.toml"

DOMAINS = ("web", "social", "scholarly", "e-commerce", "transportation", "finance")
SOURCES = ("pyg", "hf-tag", "heterophilous", "ogb")
REQUIRED = (
    "name",
    "aliases",
    "source",
    "loader",
    "args",
    "domain",
    "task_type",
    "license",
    "citation",
    "notes",
    "files",
)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class DatasetError(LookupError, UserError):
    """Unknown dataset name, or a catalog entry that is not well-formed."""


@lru_cache(maxsize=1)
def tasks() -> tuple[dict[str, Any], ...]:
    """The catalog's tasks in file order, validated."""
    parsed = tomllib.loads(CATALOG_PATH.read_text()).get("task", [])
    problems = validate_catalog(parsed)
    if problems:
        raise DatasetError(f"{CATALOG_PATH}: " + "; ".join(problems))
    return tuple(parsed)


@lru_cache(maxsize=1)
def catalog() -> dict[str, dict[str, Any]]:
    """Catalog entries by lower-case name and alias."""
    entries: dict[str, dict[str, Any]] = {}
    for task in tasks():
        for key in [task["name"], *task.get("aliases", [])]:
            entries[key.lower()] = task
    return entries


def validate_catalog(parsed: list[dict[str, Any]]) -> list[str]:
    """Every problem with the catalog's entries (empty when it is well-formed)."""
    problems = []
    seen: dict[str, str] = {}
    for task in parsed:
        name = task.get("name", "?")
        missing = [k for k in REQUIRED if k not in task]
        if missing:
            problems.append(f"{name}: missing {', '.join(missing)}")
            continue
        if task["domain"] not in DOMAINS:
            problems.append(f"{name}: domain {task['domain']!r} not in {DOMAINS}")
        if task["source"] not in SOURCES:
            problems.append(f"{name}: source {task['source']!r} not in {SOURCES}")
        if task["task_type"] not in TASK_TYPES:
            problems.append(f"{name}: task_type {task['task_type']!r} not in {TASK_TYPES}")
        if task["loader"] not in LOADERS:
            problems.append(f"{name}: unknown loader {task['loader']!r}")
        if not task["files"]:
            problems.append(f"{name}: no files")
        for spec in task["files"]:
            if not str(spec.get("url", "")).startswith(("https://", "http://")):
                problems.append(f"{name}: file without an http(s) url")
            digest = spec.get("sha256", "")
            if digest != "unverified" and not _SHA256.match(digest):
                problems.append(f"{name}: sha256 of {spec.get('url')} is neither 64 hex digits nor 'unverified'")
        for key in [name, *task["aliases"]]:
            low = key.lower()
            if low in seen and seen[low] != name:
                problems.append(f"{name}: name or alias {key!r} also used by {seen[low]}")
            seen[low] = name
    return problems


def known_names() -> list[str]:
    return sorted(set(SYNTHETIC) | {t["name"] for t in tasks()} | set(user_registry()))


def calibration_graph(name: str) -> CalibrationGraph | None:
    """The calibration graph a name stands for (``orchestrator.data.synthetic``), else None; DatasetError for a
    calibration name beyond the limits."""
    try:
        return CalibrationGraph.parse(name)
    except CalibrationNameError as exc:
        raise DatasetError(str(exc)) from None


def resolve_name(name: str) -> str:
    """The canonical task name for a name or alias; DatasetError with suggestions otherwise."""
    key = name.strip().lower()
    if key in SYNTHETIC:
        return key
    if (calibration := calibration_graph(key)) is not None:
        return calibration.name
    if key in catalog():
        return catalog()[key]["name"]
    users = {n.lower(): n for n in user_registry()}
    if key in users:
        return users[key]
    close = close_names(name)
    hint = f"; did you mean {', '.join(close)}?" if close else "; `orchestrator datasets list` shows the known datasets"
    raise DatasetError(f"unknown dataset {name!r}{hint}")


def close_names(name: str) -> list[str]:
    """The known dataset names and aliases closest to a name that is none of them (at most three)."""
    return difflib.get_close_matches(name.strip().lower(), sorted(set(known_names()) | set(catalog())), n=3)


def is_builtin_name(name: str) -> bool:
    """A synthetic task, a catalog task or one of its aliases: never a user dataset's name."""
    key = name.strip().lower()
    return key in SYNTHETIC or key in catalog() or key.startswith(CALIBRATION_PREFIX)


def add_user_dataset(path: Path | str, name: str, replace: bool = False) -> Graph:
    """Register a user's graph file as ``name`` (``orchestrator datasets add``); a built-in name is refused.

    The registry records which known datasets hold the same content (``same_content_as``):
    the catalog tasks whose content is known offline, and other registered datasets.
    """
    name = name.strip()
    if is_builtin_name(name):
        raise UserDatasetError(f"{name!r} is already a built-in dataset name; choose another --name")
    return store_user_dataset(path, name, replace, same_content=same_content)


def graph_identities(name: str) -> set[str]:
    """The canonical graphs a dataset name stands for: its catalog task (an alias resolves to it, a task
    sharing another's topology counts as that one), and, for a registered dataset, every dataset whose
    content it was found to equal when it was added (``same_content_as``)."""
    key = str(name).strip().lower()
    entry = catalog().get(key)
    if entry is not None:
        return {str(entry.get("same_topology_as", entry["name"])).lower()}
    users = {n.lower(): info for n, info in user_registry().items()}
    found = {key}
    for other in users.get(key, {}).get("same_content_as", []):
        found |= graph_identities(other) if str(other).lower() != key else set()
    return found


def same_content(content_hash: str, name: str) -> list[str]:
    """The datasets other than ``name`` whose content hash is ``content_hash``: catalog tasks (when cached) first."""
    matches = [t["name"] for t in tasks() if _cached_hash(t) == content_hash]
    matches += [
        n for n, info in sorted(user_registry().items()) if n != name and info.get("content_hash") == content_hash
    ]
    return matches


def _cached_hash(entry: dict[str, Any]) -> str | None:
    key = entry_key(entry)
    return read_content_hash(cache_path(key)) if key is not None and cache_path(key).exists() else None


def is_cached(entry: dict[str, Any]) -> bool:
    key = entry_key(entry)
    return key is not None and cache_path(key).exists()


def is_available(entry: dict[str, Any]) -> bool:
    """Loadable offline: processed in the cache, or every upstream file kept or in the mirror."""
    return is_cached(entry) or all(is_local(spec["url"], spec.get("sha256", "")) for spec in entry["files"])


def load_entry(entry: dict[str, Any]) -> Graph:
    """A catalog task's canonical graph: from the content-keyed cache, or loaded, verified and cached."""
    key = entry_key(entry)
    if key is not None:
        cached = read_graph(cache_path(key))
        if cached is not None:
            return cached
    graph = run_loader(entry)
    key = key or entry_key(entry)  # first downloads have recorded their hashes by now
    if key is not None:
        save_graph(graph, cache_path(key))
    return graph


def load_dataset(name: str) -> Graph:
    canonical = resolve_name(name)
    if canonical in SYNTHETIC:
        return load_synthetic(canonical)
    if (calibration := calibration_graph(canonical)) is not None:
        return calibration.generate()
    if canonical.lower() in catalog():
        return load_entry(catalog()[canonical.lower()])
    return load_user_dataset(canonical)


def ensure_dataset(name: str) -> None:
    """Make ``name`` loadable now: fetched, verified and processed into the cache (a cached catalog task costs a
    stat), so that a sweep knows every dataset of its plan is there before any service starts."""
    canonical = resolve_name(name)
    entry = catalog().get(canonical.lower())
    if entry is not None and is_cached(entry):
        return
    load_dataset(canonical)


def dataset_hash(name: str) -> str:
    """A dataset's content hash, read from the cache or registry when it is there, else by loading it."""
    return known_content_hash(name) or load_dataset(name).content_hash


def known_content_hash(name: str) -> str | None:
    """A dataset's content hash where it is known without loading: the cache (catalog), the registry (user
    datasets), or generation (synthetic); None for a catalog task not processed on this machine yet."""
    canonical = resolve_name(name)
    if canonical in SYNTHETIC or calibration_graph(canonical) is not None:
        return load_dataset(canonical).content_hash
    if canonical.lower() in catalog():
        key = entry_key(catalog()[canonical.lower()])
        return read_content_hash(cache_path(key)) if key is not None else None
    known = user_registry().get(canonical, {}).get("content_hash")
    return str(known) if known else None


def is_catalog_task(name: str) -> bool:
    return resolve_name(name).lower() in catalog()


def dataset_identity(name: str) -> str:
    """A dataset's part of every trial key, known without its data where that can be.

    A catalog task: what the catalog pins (``catalog_identity``), so planning the protocol needs no
    download. A user dataset: its content hash, which its registration recorded (its content is on
    this disk by definition). A synthetic task: the content hash of the graph it generates.
    """
    canonical = resolve_name(name)
    if canonical.lower() in catalog():
        return catalog_identity(catalog()[canonical.lower()])
    return dataset_hash(canonical)


@dataclass(frozen=True)
class DatasetSize:
    """What a cost estimate needs of a graph: nodes, undirected edges (no self-loops), features and classes.

    A field is None where it cannot be known without the data (a catalog task whose entry does not
    publish it and that this machine has not processed yet).
    """

    nodes: int | None
    edges: int | None
    features: int | None
    classes: int | None


def dataset_size(name: str) -> DatasetSize:
    """A dataset's size, loading nothing that is not on disk: a catalog task's published figures, completed from
    the processed cache when it holds the task; a user or synthetic graph's own (it is on disk, or generated)."""
    canonical = resolve_name(name)
    if (calibration := calibration_graph(canonical)) is not None:  # its name is its size: nothing is generated
        return DatasetSize(calibration.nodes, calibration.edges, calibration.features, calibration.classes)
    if canonical.lower() not in catalog():
        return _size_of(load_dataset(canonical))
    entry = catalog()[canonical.lower()]
    published = DatasetSize(*(entry.get(k) for k in ("nodes", "edges", "features", "classes")))
    if None not in (published.nodes, published.edges, published.features, published.classes):
        return published
    key = entry_key(entry)
    shapes = read_shapes(cache_path(key)) if key is not None else None
    if shapes is None:
        return published
    nodes = shapes["x"][0]
    return DatasetSize(
        published.nodes or nodes,
        published.edges or (shapes["edge_index"][1] - nodes) // 2,
        published.features or shapes["x"][1],
        published.classes,
    )


def _size_of(graph: Graph) -> DatasetSize:
    """A canonical graph's size: its edge list holds both directions and one self-loop per node."""
    return DatasetSize(
        graph.num_nodes, (graph.edge_index.shape[1] - graph.num_nodes) // 2, graph.x.shape[1], graph.num_classes
    )


def list_tasks() -> list[dict[str, Any]]:
    """One row per catalog task: what `orchestrator datasets list` shows."""
    rows = []
    for task in tasks():
        rows.append(
            {
                "name": task["name"],
                "source": task["source"],
                "domain": task["domain"],
                "task_type": task["task_type"],
                "nodes": task.get("nodes"),
                "edges": task.get("edges"),
                "features": task.get("features"),
                "classes": task.get("classes"),
                "local": is_available(task),
            }
        )
    return rows
