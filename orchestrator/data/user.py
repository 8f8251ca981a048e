"""Bring your own dataset: validate a user graph and register it beside the catalog.

Accepted files:
- ``.npz`` with features (``x`` | ``features`` | ``node_features``, N x F),
  edges (``edge_index`` | ``edges``, 2 x E or E x 2), labels (``y`` | ``labels``
  | ``node_labels``, N integers, negative = unlabeled) and optionally published
  masks (``train_mask``/``val_mask``/``test_mask`` or the plural forms, (N,) or (K, N));
- a saved PyG ``Data`` or dict of tensors (``torch.save(data, path)``) with ``x``,
  ``edge_index``, ``y`` and optionally ``train_mask``/``val_mask``/``test_mask``, read
  with ``weights_only=True``: a file that needs pickled code to load is refused.

The canonical graph is stored under ``$NODEGROUND_CACHE/user/`` and listed in
``registry.json`` there, so ``orchestrator run --datasets NAME`` finds it.

The file must be a regular file no larger than the memory budget (never a FIFO or a device such as
``/dev/zero``: ``contract.files``). The registry is read whole and checked (an entry's file is a bare
name inside ``user/``, so ``datasets remove`` never deletes outside it), and changed only under an
exclusive lock (``registry.lock``) by a read-modify-write that ends in renaming a temporary file of its
own: several ``datasets add`` at once each keep their registration.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import re
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from contract.errors import UserError
from contract.files import FileRefused, check_regular, json_field, json_object, read_json, size_text
from contract.settings import ADD_MEMORY, SettingError
from orchestrator.data.cache import read_graph, save_graph
from orchestrator.data.fetch import cache_dir
from orchestrator.data.graph import Graph, GraphError, canonicalize
from orchestrator.data.safe_pickle import UnsafeFileError, load_tensor_file, one_line

MIN_PER_CLASS = 3  # one node each for train, val and test
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_KEYS = {
    "x": ("x", "features", "node_features"),
    "edge_index": ("edge_index", "edges"),
    "y": ("y", "labels", "node_labels"),
}


def accepted_names() -> str:
    """The array names an .npz may use, for help texts (one definition: ``_KEYS``)."""
    return "; ".join(f"{what}: {' | '.join(names)}" for what, names in _KEYS.items())


class UserDatasetError(ValueError, UserError):
    """A user dataset file cannot be registered; the message says what is wrong."""


def user_dir() -> Path:
    return cache_dir() / "user"


def _registry_path() -> Path:
    return user_dir() / "registry.json"


def user_registry() -> dict[str, dict[str, Any]]:
    """The registered user datasets by name, each entry checked (``UserDatasetError``, one line, when one is not)."""
    path = _registry_path()
    if not path.exists():
        return {}
    what = "the user dataset registry"
    try:
        registry = json_object(read_json(path, what), path, what)
        for name, entry in registry.items():
            entry = json_object(entry, path, f"{what}'s entry {name!r} in")
            _registry_file(json_field(entry, "file", str, path, f"{what}'s entry {name!r} in"), name)
            json_field(entry, "content_hash", str, path, f"{what}'s entry {name!r} in")
    except FileRefused as exc:
        raise UserDatasetError(f"{exc}; remove it and add the datasets again") from None
    return registry


def _registry_file(file: str, name: str) -> Path:
    """Where a registry entry's canonical copy is: a bare file name inside ``user_dir()``, never a path out of it."""
    if not file or file != Path(file).name or file in (".", "..") or file.startswith(".") or "\x00" in file:
        raise UserDatasetError(
            f"the user dataset registry's entry {name!r} names the file {file[:80]!r}, which is not a file name inside "
            f"{user_dir()}; remove {_registry_path()} and add the datasets again"
        )
    return user_dir() / file


@contextlib.contextmanager
def _registry_lock() -> Iterator[None]:
    """Hold the registry for one read-modify-write (an exclusive flock, released when the process ends)."""
    user_dir().mkdir(parents=True, exist_ok=True)
    fd = os.open(user_dir() / "registry.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _pick(raw: dict[str, Any], what: str, path: Path) -> Any:
    for key in _KEYS[what]:
        if key in raw and raw[key] is not None:
            return raw[key]
    raise UserDatasetError(f"{path.name}: no {what} array (looked for {', '.join(_KEYS[what])})")


# What `datasets add` may decompress. A member larger than BOMB_MIN_BYTES that inflates more than
# MAX_INFLATION-fold is refused from its header: deflate cannot exceed about 1032:1, constant arrays come close,
# and no real graph's features or edges do (bag-of-words features at 1% density inflate about 40-fold).
# The declared total must also fit the memory budget: NODEGROUND_ADD_MEMORY bytes, else a quarter of this
# machine's memory (registering holds the arrays about three times: as read, canonicalized, saved).
MAX_INFLATION = 500
BOMB_MIN_BYTES = 64 << 20
MEMORY_ENV = ADD_MEMORY.env


def memory_budget() -> int:
    """Bytes a dataset's declared arrays may take (``NODEGROUND_ADD_MEMORY``, else a quarter of physical memory)."""
    try:
        explicit = ADD_MEMORY.read()
    except SettingError as exc:
        raise UserDatasetError(str(exc)) from None
    if explicit is not None:
        return int(explicit)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def check_archive_sizes(path: Path, budget: int | None = None) -> None:
    """Refuse a zip archive (an .npz, or a .pt that torch.save wrote) from its members' headers alone, before any
    byte is inflated: a decompression bomb, a declared total beyond the memory budget, or .npz arrays that are not
    real numbers. torch.load inflates deflated members as readily as np.load does."""
    budget = memory_budget() if budget is None else budget
    total = 0
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if path.suffix == ".npz":
                    if not info.filename.endswith(".npy"):
                        continue
                    name = f"array {info.filename[: -len('.npy')]!r}"
                    shape, dtype = _npy_header(archive, info, path, name)
                    declared = math.prod(int(d) for d in shape) * dtype.itemsize
                    what = f"{_gib(declared)} ({'x'.join(map(str, shape))} {dtype})"
                else:
                    name, declared = f"member {info.filename!r}", info.file_size
                    what = _gib(declared)
                total += declared
                inflation = declared / max(1, info.compress_size)
                if declared > BOMB_MIN_BYTES and inflation > MAX_INFLATION:
                    raise UserDatasetError(
                        f"{path.name}: {name} declares {what} from {info.compress_size:,} compressed bytes, a "
                        f"{inflation:,.0f}-fold inflation; no real graph inflates over {MAX_INFLATION}-fold (refused "
                        "as a decompression bomb)"
                    )
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        if isinstance(exc, UserDatasetError):
            raise
        raise UserDatasetError(
            f"{path.name}: not a readable {'.npz file' if path.suffix == '.npz' else 'zip archive'} "
            f"({type(exc).__name__}: {exc})"
        ) from None
    if total > budget:
        raise UserDatasetError(
            f"{path.name}: its arrays declare {_gib(total)}, over the memory budget of {_gib(budget)} "
            f"(set {MEMORY_ENV} to the bytes this machine can give)"
        )


def _npy_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path, name: str) -> tuple[tuple, np.dtype]:
    """An .npz member's shape and dtype from its header only (no array byte is read); non-real dtypes refused."""
    with archive.open(info) as member:
        version = np.lib.format.read_magic(member)
        fmt = np.lib.format
        read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, dtype = read_header(member)
    if dtype.hasobject or not (np.issubdtype(dtype, np.number) or dtype == np.bool_):
        raise UserDatasetError(f"{path.name}: {name} is not numeric (dtype {dtype})")
    if np.issubdtype(dtype, np.complexfloating):
        raise UserDatasetError(f"{path.name}: {name} is complex ({dtype}); give real numbers")
    return shape, dtype


def _gib(nbytes: int) -> str:
    return f"{nbytes / (1 << 30):.2f} GiB"


def _to_numpy(value: Any, what: str, path: Path) -> np.ndarray:
    """A plain numeric array from an array or a tensor (torch is duck-typed: the orchestrator never imports it);
    sparse, meta-device, complex and non-numeric values are refused in one line."""
    if hasattr(value, "detach"):
        layout = str(getattr(value, "layout", "torch.strided"))
        if layout != "torch.strided":
            raise UserDatasetError(f"{path.name}: {what} is a sparse tensor ({layout}); save it dense (.to_dense())")
        if getattr(value, "is_meta", False):
            raise UserDatasetError(f"{path.name}: {what} is on the meta device and holds no values")
        if getattr(value, "is_complex", lambda: False)():
            raise UserDatasetError(f"{path.name}: {what} is complex ({value.dtype}); give real numbers")
        if getattr(value, "is_quantized", False):
            raise UserDatasetError(f"{path.name}: {what} is a quantized tensor ({value.dtype}); give plain numbers")
        if str(value.dtype) in ("torch.bfloat16", "torch.float16"):
            value = value.float()  # numpy has no bfloat16: widen losslessly
        try:
            value = value.detach().cpu().numpy()
        except Exception as exc:
            raise UserDatasetError(f"{path.name}: {what} cannot be read as an array ({one_line(exc)})") from None
    try:
        array = np.asarray(value)
    except Exception as exc:
        raise UserDatasetError(f"{path.name}: {what} cannot be read as an array ({one_line(exc)})") from None
    if np.iscomplexobj(array):
        raise UserDatasetError(f"{path.name}: {what} is complex ({array.dtype}); give real numbers")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise UserDatasetError(f"{path.name}: {what} is not numeric (dtype {array.dtype})")
    return array


def read_user_file(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple | None]:
    """(x, edge_index 2 x E, y, masks or None) from an .npz or a saved PyG Data: a regular file no larger than the
    memory budget (a FIFO, a device or a sparse file of hundreds of GiB is refused before a byte is read)."""
    budget = memory_budget()
    try:
        size = check_regular(path, "dataset file")
    except FileRefused as exc:
        raise UserDatasetError(str(exc)) from None
    if size > budget:
        raise UserDatasetError(
            f"{path.name}: the file holds {size_text(size)}, over the memory budget of {size_text(budget)} (set "
            f"{MEMORY_ENV} to the bytes this machine can give)"
        )
    if path.suffix == ".npz" or zipfile.is_zipfile(path):
        check_archive_sizes(path, budget)
    if path.suffix == ".npz":
        try:
            with np.load(path, allow_pickle=False) as npz:
                raw: dict[str, Any] = {k: npz[k] for k in npz.files}
        except Exception as exc:
            raise UserDatasetError(f"{path.name}: not a readable .npz file ({type(exc).__name__}: {exc})") from None
    else:
        try:
            data = load_tensor_file(path)
        except UnsafeFileError as exc:
            raise UserDatasetError(f"{exc}; give an .npz or a saved PyG Data / dict of tensors") from None
        raw = (
            dict(data)
            if isinstance(data, dict)
            else {k: getattr(data, k, None) for k in (*sum(_KEYS.values(), ()), "train_mask", "val_mask", "test_mask")}
        )
    x = _to_numpy(_pick(raw, "x", path), "x", path)
    edges = _to_numpy(_pick(raw, "edge_index", path), "edge_index", path)
    y = _to_numpy(_pick(raw, "y", path), "y", path)
    if edges.ndim == 2 and edges.shape[0] != 2 and edges.shape[1] == 2:
        edges = edges.T
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise UserDatasetError(
            f"{path.name}: labels must be one integer per node (shape (N,)), got shape {y.shape}; multilabel tasks "
            "are out of scope"
        )
    if np.issubdtype(y.dtype, np.floating):
        if np.any(np.isfinite(y) & (y != np.round(y))):
            raise UserDatasetError(f"{path.name}: labels must be integer class ids, found non-integer values")
        y = np.where(np.isfinite(y), y, -1).astype(np.int64)
    masks = None
    for names in (("train_mask", "val_mask", "test_mask"), ("train_masks", "val_masks", "test_masks")):
        if all(raw.get(n) is not None for n in names):
            masks = tuple(_to_numpy(raw[n], n, path).astype(bool) for n in names)
    return x, edges, y, masks


def validate_user_graph(
    name: str, x: np.ndarray, edges: np.ndarray, y: np.ndarray, masks: tuple | None = None
) -> Graph:
    """Canonicalize with every check a benchmark task needs; UserDatasetError says what is wrong."""
    if x.ndim == 2 and y.ndim == 1 and x.shape[0] != y.shape[0]:
        raise UserDatasetError(
            f"{name}: {x.shape[0]} feature rows but {y.shape[0]} labels; they must have one entry per node"
        )
    if not np.issubdtype(np.asarray(x).dtype, np.number):
        raise UserDatasetError(f"{name}: features must be numeric, got dtype {np.asarray(x).dtype}")
    try:
        graph = canonicalize(name, x, edges, y, masks, strict_splits=True)
    except GraphError as exc:
        raise UserDatasetError(str(exc)) from None
    counts = np.bincount(graph.y[graph.y >= 0], minlength=graph.num_classes)
    small = np.flatnonzero(counts < MIN_PER_CLASS)
    if small.size:
        c = int(small[0])
        raise UserDatasetError(
            f"{name}: class {c} (after remapping to 0..{graph.num_classes - 1}) has {int(counts[c])} labeled node(s); "
            f"every class needs at least {MIN_PER_CLASS} to stratify train/val/test"
        )
    return graph


def store_user_dataset(
    path: Path | str, name: str, replace: bool = False, same_content: Callable[[str, str], list[str]] | None = None
) -> Graph:
    """Validate ``path`` and register it as ``name``; returns the canonical graph.

    Built-in names are the registry's to refuse (``registry.add_user_dataset``, the entry point).
    A name already registered is refused unless ``replace``: results are keyed by
    the dataset's content hash, so runs of the old graph are never served as the new one's.
    """
    path = Path(path)
    if not _NAME.match(name):
        raise UserDatasetError(
            f"dataset name {name!r} must be 1-64 lower-case letters, digits, '.', '_' or '-', starting with a letter "
            "or digit"
        )
    existing = user_registry().get(name)
    if existing is not None and not replace:
        raise UserDatasetError(
            f"a dataset named {name!r} is already registered (content hash {existing.get('content_hash', '?')[:16]}, "
            f"from {existing.get('source')}); "
            "pass --replace to register this file under that name instead"
        )
    x, edges, y, masks = read_user_file(path)
    graph = validate_user_graph(name, x, edges, y, masks)
    with _registry_lock():  # the check above again, the copy and the entry: as one step among concurrent adds
        registry = user_registry()
        if name in registry and not replace and registry[name].get("content_hash") != graph.content_hash:
            raise UserDatasetError(
                f"a dataset named {name!r} was registered meanwhile (content hash "
                f"{registry[name]['content_hash'][:16]}); pass --replace to register this file under that name instead"
            )
        save_graph(graph, user_dir() / f"{name}.npz")
        entry: dict[str, Any] = {
            "file": f"{name}.npz",
            "source": str(path.resolve()),
            "content_hash": graph.content_hash,
            **graph_summary(graph),
        }
        matches = same_content(graph.content_hash, name) if same_content is not None else []
        if matches:
            entry["same_content_as"] = matches
        registry[name] = entry
        _write_registry(registry)
    return graph


def graph_summary(graph: Graph) -> dict[str, Any]:
    """What `datasets list` and `datasets add` say about a user graph (kept in the registry: listing loads nothing)."""
    return {
        "nodes": graph.num_nodes,
        "edges": int((graph.edge_index[0] < graph.edge_index[1]).sum()),
        "features": int(graph.x.shape[1]),
        "classes": graph.num_classes,
        "task_type": graph.task_type,
        "unlabeled": int((graph.y < 0).sum()),
    }


def _write_registry(registry: dict[str, dict[str, Any]]) -> None:
    """Replace the registry by a temporary file of this writer's own (under ``_registry_lock``)."""
    fd, tmp = tempfile.mkstemp(prefix="registry.", suffix=".json.part", dir=user_dir())
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(registry, indent=2, sort_keys=True))
        os.replace(tmp, _registry_path())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def remove_user_dataset(name: str) -> dict[str, Any]:
    """Unregister ``name`` and delete its canonical copy (the user's own file is untouched); returns its entry."""
    with _registry_lock():
        registry = user_registry()
        if name not in registry:
            known = ", ".join(sorted(registry)) or "none"
            raise UserDatasetError(f"{name!r} is not a registered user dataset (registered: {known})")
        entry = registry.pop(name)
        _write_registry(registry)
    _registry_file(entry["file"], name).unlink(missing_ok=True)
    return entry


def user_rows() -> list[dict[str, Any]]:
    """One row per registered user dataset, in name order: what `datasets list` shows beside the catalog."""
    rows = []
    for name, entry in sorted(user_registry().items()):
        if "nodes" not in entry:  # registered before the registry kept a summary: read it once
            try:
                entry = {**entry, **graph_summary(load_user_dataset(name))}
            except UserDatasetError:
                entry = {**entry, "task_type": "missing file"}
        rows.append(
            {
                "name": name,
                "source": "user",
                "domain": "-",
                "task_type": entry.get("task_type"),
                "nodes": entry.get("nodes"),
                "classes": entry.get("classes"),
                "local": _registry_file(entry["file"], name).is_file(),
                "from": entry.get("source"),
            }
        )
    return rows


def load_user_dataset(name: str) -> Graph:
    info = user_registry().get(name)
    if info is None:
        raise UserDatasetError(f"{name!r} is not a registered user dataset")
    path = _registry_file(info["file"], name)
    graph = read_graph(path, verify=True)
    if graph is None:
        raise UserDatasetError(
            f"user dataset {name!r}: {path} is missing or damaged; add it again with `orchestrator datasets add`"
        )
    return graph
