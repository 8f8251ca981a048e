"""Loaders: turn a catalog entry's verified files into a canonical graph.

Each loader reuses the ecosystem's reader (PyG dataset classes, OGB's node
property loader, numpy for the Heterophilous ``.npz`` files) after our own
verified fetch has placed the raw files where that reader looks for them, so
the reader never downloads anything unverified: while a reader runs, its
download functions are replaced by a guard that only accepts files already in
place and otherwise fails naming the URL it wanted. Nor does a reader run code
pickled into a file: readers run under ``safe_pickle.no_pickled_code`` (a
verified hash pins a file, it does not make its author trusted; files marked
``unverified`` are trusted by nobody).

Readers run in a scratch directory that is removed afterwards, whatever
happens; only the canonical tensors are cached (see ``cache.py``), and only
after a load succeeded.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import shutil
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from contract.errors import UserError
from orchestrator.data.fetch import FetchError, cache_dir, fetch
from orchestrator.data.graph import Graph, GraphError, canonicalize, exclude_small_classes
from orchestrator.data.safe_pickle import UnsafeFileError, load_tensor_file, no_pickled_code


class LoaderError(RuntimeError, UserError):
    """A reader is missing or produced something that is not a single-label node-classification graph."""


# ---------------------------------------------------------------- file placement


@contextlib.contextmanager
def scratch_dir() -> Iterator[Path]:
    """A private working directory under the cache, removed on exit."""
    base = cache_dir() / "work"
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="load-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        with contextlib.suppress(OSError):
            base.rmdir()  # only when empty


def place_files(entry: dict[str, Any], root: Path) -> None:
    """Fetch (verified) every file of ``entry`` and put it where the reader looks.

    A file spec has ``url``, ``sha256`` and optionally ``path`` (relative to the
    reader's root; default: the URL's file name) and ``extract`` (``zip`` or
    ``tar``: unpack into the directory of ``path`` instead of placing the archive).
    """
    for spec in entry.get("files", []):
        local = fetch(spec["url"], spec["sha256"])
        target = root / spec.get("path", Path(spec["url"].split("?")[0]).name)
        target.parent.mkdir(parents=True, exist_ok=True)
        kind = spec.get("extract")
        if kind == "zip":
            with zipfile.ZipFile(local) as archive:
                archive.extractall(target.parent)
        elif kind == "tar":
            with tarfile.open(local) as archive:
                archive.extractall(target.parent, filter="data")
        elif kind:
            raise LoaderError(f"{entry['name']}: unknown extract kind {kind!r}")
        else:
            _link_or_copy(local, target)


def _link_or_copy(source: Path, target: Path) -> None:
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


@contextlib.contextmanager
def no_unverified_downloads(*modules: Any) -> Iterator[None]:
    """While a reader runs, its downloads may only 'find' files we already placed, and PyG's tensor files (its
    processed dataset, the raw .pt files some readers take) load as data only: ``load_tensor_file`` instead of
    PyG's ``fs.torch_load``, whose fallback on a refused class is a full unpickle."""

    def guarded_download_url(url: str, folder: str, log: bool = True, filename: str | None = None) -> str:
        if filename is None:
            filename = url.rpartition("/")[2]
            filename = filename if filename[0] == "?" else filename.split("?")[0]
        path = os.path.join(folder, filename)
        if os.path.exists(path):
            return path
        raise FetchError(
            f"the reader asked to download {url} into {path}, which the catalog does not provide; refusing an "
            "unverified download"
        )

    def guarded_google(id: str, folder: str, filename: str, log: bool = True) -> str:
        return guarded_download_url(
            f"https://drive.usercontent.google.com/download?id={id}&confirm=t", folder, log, filename
        )

    def guarded_cp(path1: str, path2: str, *args: Any, **kwargs: Any) -> None:
        raise FetchError(
            f"the reader asked to download {path1}, which the catalog does not provide; refusing an unverified download"
        )

    patches: list[tuple[Any, str, Any]] = []
    for module in modules:
        for attr, guard in (("download_url", guarded_download_url), ("download_google_url", guarded_google)):
            if hasattr(module, attr):
                patches.append((module, attr, guard))
    from torch_geometric.io import fs as pyg_fs

    patches.append((pyg_fs, "cp", guarded_cp))
    patches.append((pyg_fs, "torch_load", lambda path, map_location=None: load_tensor_file(path, map_location)))
    saved = [(m, a, getattr(m, a)) for m, a, _ in patches]
    chatter = io.StringIO()  # readers print progress ("Processing...") we do not want on the console
    try:
        for module, attr, guard in patches:
            setattr(module, attr, guard)
        with contextlib.redirect_stdout(chatter), contextlib.redirect_stderr(chatter):
            yield
    finally:
        for module, attr, original in saved:
            setattr(module, attr, original)


# ---------------------------------------------------------------- helpers


def _numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor, possibly sparse
        import torch

        if value.layout != torch.strided:
            value = value.to_dense()
        value = value.detach().cpu().numpy()
    elif hasattr(value, "toarray"):  # scipy.sparse
        value = value.toarray()
    return np.asarray(value)


def _labels(y: Any, entry: dict[str, Any]) -> np.ndarray:
    """Integer labels with -1 for "no valid label" (NaN, and the values the catalog names)."""
    y = _numpy(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise LoaderError(f"{entry['name']}: labels have shape {y.shape}; only single-label tasks are in scope")
    if np.issubdtype(y.dtype, np.floating):
        missing = ~np.isfinite(y)
        y = np.where(missing, -1, y).astype(np.int64)
    y = y.astype(np.int64)
    for value in entry.get("args", {}).get("unlabeled_values", []):
        y[y == value] = -1
    return y


def _masks_from_data(data: Any) -> tuple[Any, Any, Any] | None:
    names = ("train_mask", "val_mask", "test_mask")
    if all(getattr(data, n, None) is not None for n in names):
        return tuple(_numpy(getattr(data, n)).astype(bool) for n in names)  # type: ignore[return-value]
    return None


def _from_pyg_data(entry: dict[str, Any], data: Any, public: bool = True) -> Graph:
    x = _numpy(data.x).astype(np.float32, copy=False)
    masks = _masks_from_data(data) if public and entry.get("public_split", True) else None
    return canonicalize(entry["name"], x, _numpy(data.edge_index), _labels(data.y, entry), masks)


def _reader_class(path: str) -> Any:
    module_name, _, attr = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise LoaderError(f"reader {path} is not available ({exc}); install the package that provides it") from None


# ---------------------------------------------------------------- loaders


def load_planetoid(entry: dict[str, Any]) -> Graph:
    """PyG Planetoid (public split as the ``public`` regime)."""
    import torch_geometric.datasets.planetoid as module

    name = entry["args"]["name"]
    with scratch_dir() as root:
        for spec in entry["files"]:
            spec.setdefault("path", f"{name}/raw/{spec['url'].rsplit('/', 1)[1]}")
        place_files(entry, root)
        with no_unverified_downloads(module):
            data = module.Planetoid(str(root), name)[0]
        return _from_pyg_data(entry, data)


def load_pyg(entry: dict[str, Any]) -> Graph:
    """Any PyG ``InMemoryDataset`` class: ``args.cls`` plus ``args.kwargs``; files placed by ``path``."""
    args = entry["args"]
    cls = _reader_class(f"torch_geometric.datasets.{args['cls']}")
    module = importlib.import_module(cls.__module__)
    with scratch_dir() as root:
        place_files(entry, root)
        with no_unverified_downloads(module):
            dataset = cls(str(root), **args.get("kwargs", {}))
        data = dataset[0]
        return _from_pyg_data(entry, data)


def load_heterophilous_npz(entry: dict[str, Any]) -> Graph:
    """The Heterophilous Graphs collection ``.npz`` (features, labels, edges, 10 published masks)."""
    spec = entry["files"][0]
    path = fetch(spec["url"], spec["sha256"])
    with np.load(path) as raw:
        missing = {"node_features", "node_labels", "edges"} - set(raw.files)
        if missing:
            raise LoaderError(f"{entry['name']}: {path.name} lacks {', '.join(sorted(missing))}")
        masks = (raw["train_masks"], raw["val_masks"], raw["test_masks"]) if "train_masks" in raw.files else None
        return canonicalize(
            entry["name"], raw["node_features"], raw["edges"].T, _labels(raw["node_labels"], entry), masks
        )


def load_ogb(entry: dict[str, Any]) -> Graph:
    """OGB node property prediction (``ogb.nodeproppred.NodePropPredDataset``), with its official split."""
    try:
        from ogb.nodeproppred import NodePropPredDataset
    except ImportError as exc:
        raise LoaderError(f"{entry['name']} needs the `ogb` package ({exc}); pip install ogb") from None
    import ogb.nodeproppred.dataset as module

    name = entry["args"]["name"]  # e.g. ogbn-arxiv
    with scratch_dir() as root:
        for spec in entry["files"]:
            spec.setdefault("path", spec["url"].rsplit("/", 1)[1])
            spec.setdefault("extract", "zip")
        place_files(entry, root)
        download_name = entry["args"]["download_name"]  # the zip's top folder, e.g. arxiv
        (root / download_name).rename(root / name.replace("-", "_"))
        with no_unverified_downloads(module):
            dataset = NodePropPredDataset(name=name, root=str(root))
        graph, labels = dataset[0]
        split = dataset.get_idx_split()
        return canonicalize(
            entry["name"],
            graph["node_feat"],
            graph["edge_index"],
            _labels(labels, entry),
            (split["train"], split["valid"], split["test"]),
        )


def load_hf_tag(entry: dict[str, Any]) -> Graph:
    """A text-attributed graph from the HuggingFace hub: a graph file (PyG ``Data`` or dict) plus a feature tensor.

    ``args.graph`` and ``args.features`` name the files (by their ``path``);
    features are sentence embeddings of the node texts, shipped by the dataset.
    """
    files = {
        spec.get("path", spec["url"].rsplit("/", 1)[1]): fetch(spec["url"], spec["sha256"]) for spec in entry["files"]
    }
    args = entry["args"]
    try:
        raw = load_tensor_file(files[args["graph"]])
        features = load_tensor_file(files[args["features"]])
    except UnsafeFileError as exc:
        raise LoaderError(f"{entry['name']}: {exc}") from None
    get = raw.get if isinstance(raw, dict) else lambda key, default=None: getattr(raw, key, default)
    edge_index, y = get("edge_index"), get("y")
    if edge_index is None or y is None:
        raise LoaderError(f"{entry['name']}: {args['graph']} holds no edge_index / y")
    if isinstance(features, dict):
        features = features.get("x", next(iter(features.values())))
    x = _numpy(features).astype(np.float32, copy=False)
    masks = None
    if all(get(k) is not None for k in ("train_mask", "val_mask", "test_mask")):
        masks = tuple(_numpy(get(k)).astype(bool) for k in ("train_mask", "val_mask", "test_mask"))
    return canonicalize(entry["name"], x, _numpy(edge_index), _labels(y, entry), masks)


LOADERS: dict[str, Callable[[dict[str, Any]], Graph]] = {
    "planetoid": load_planetoid,
    "pyg": load_pyg,
    "heterophilous_npz": load_heterophilous_npz,
    "ogb": load_ogb,
    "hf_tag": load_hf_tag,
}


def run_loader(entry: dict[str, Any]) -> Graph:
    """Load an entry; a failing reader is reported with the dataset's name."""
    loader = LOADERS.get(entry["loader"])
    if loader is None:
        raise LoaderError(f"{entry['name']}: unknown loader {entry['loader']!r}; known: {', '.join(sorted(LOADERS))}")
    entry = {**entry, "files": [dict(f) for f in entry.get("files", [])]}
    try:
        with no_pickled_code():  # readers we reuse unpickle their raw files (Planetoid, np.load(allow_pickle=True))
            return exclude_small_classes(loader(entry))
    except (FetchError, GraphError, LoaderError):
        raise
    except Exception as exc:  # a third-party reader failed on the files it was given
        raise LoaderError(f"{entry['name']}: the {entry['loader']} reader failed: {type(exc).__name__}: {exc}") from exc
