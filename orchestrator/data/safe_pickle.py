"""Reading third-party files without running code they carry.

A pickle can name any importable callable and have it called on load
(``os.system`` through ``__reduce__``), so no file we did not write is ever
unpickled by the stock unpickler. Tensor files go through
``torch.load(weights_only=True)`` (tensors, containers, numbers, strings and the
PyG classes PyG itself allowlists). Readers we reuse (PyG's Planetoid reader
unpickles numpy and scipy objects, ``np.load(allow_pickle=True)`` in several PyG
datasets, PyG's ``torch_load`` falls back to ``weights_only=False``) run inside
:func:`no_pickled_code`, which swaps the ``pickle`` module's entry points for an
unpickler that resolves only the data classes listed in ``ALLOWED`` and refuses
every other global by name.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_SPARSE = ("csr_matrix", "csc_matrix", "coo_matrix", "lil_matrix", "csr_array", "csc_array", "coo_array", "lil_array")
_SPARSE_MODULES = (
    "scipy.sparse",
    "scipy.sparse.csr",
    "scipy.sparse.csc",
    "scipy.sparse.coo",
    "scipy.sparse.lil",
    "scipy.sparse._csr",
    "scipy.sparse._csc",
    "scipy.sparse._coo",
    "scipy.sparse._lil",
    "scipy.sparse._arrays",
)

# (module, name) pairs a data pickle may name: containers, numpy arrays, scipy sparse
# matrices and torch tensors. Each only stores state; none runs anything given.
ALLOWED: frozenset[tuple[str, str]] = frozenset(
    {
        (m, n)
        for m in ("builtins", "__builtin__")
        for n in (
            "list",
            "dict",
            "set",
            "frozenset",
            "tuple",
            "int",
            "float",
            "complex",
            "bool",
            "str",
            "bytes",
            "bytearray",
            "slice",
            "range",
            "object",
        )
    }
    | {
        ("collections", "OrderedDict"),
        ("collections", "defaultdict"),
        ("copy_reg", "_reconstructor"),
        ("copyreg", "_reconstructor"),
    }
    | {(m, n) for m in ("numpy.core.multiarray", "numpy._core.multiarray") for n in ("_reconstruct", "scalar")}
    | {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.ma.core", "_mareconstruct"), ("numpy.ma.core", "MaskedArray")}
    | {(m, n) for m in _SPARSE_MODULES for n in _SPARSE}
    | {
        ("torch._utils", "_rebuild_tensor_v2"),
        ("torch._utils", "_rebuild_parameter"),
        ("torch", "Size"),
        ("torch", "device"),
    }
)


class RestrictedUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that resolves only ``ALLOWED`` globals."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ALLOWED or _torch_allowlisted(module, name):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"refusing to unpickle {module}.{name}: a data file may hold only arrays, tensors and containers"
        )


def _torch_allowlisted(module: str, name: str) -> bool:
    """Classes torch's own safe loading accepts here: ``add_safe_globals`` entries and PyG's data classes."""
    import sys

    if "torch" not in sys.modules:
        return False
    return any(
        getattr(c, "__module__", None) == module and getattr(c, "__qualname__", None) == name for c in _tensor_globals()
    )


def _tensor_globals() -> list[Any]:
    """What a saved tensor file may name beyond torch's defaults: everything registered, plus a pickled PyG ``Data``.

    PyG registers ``Data`` but not the attribute/storage classes a ``torch.save(data)``
    pickles with it; they only hold a graph's tensors.
    """
    import torch

    found = [e[0] if isinstance(e, tuple) else e for e in torch.serialization.get_safe_globals()]
    try:
        from torch_geometric.data import data, storage
    except ImportError:
        return found
    return found + [
        data.Data,
        data.DataEdgeAttr,
        data.DataTensorAttr,
        storage.BaseStorage,
        storage.GlobalStorage,
        storage.NodeStorage,
        storage.EdgeStorage,
    ]


def _load(
    file: Any, *, fix_imports: bool = True, encoding: str = "ASCII", errors: str = "strict", buffers: Any = None
) -> Any:
    return RestrictedUnpickler(file, fix_imports=fix_imports, encoding=encoding, errors=errors, buffers=buffers).load()


def _loads(
    data: bytes, /, *, fix_imports: bool = True, encoding: str = "ASCII", errors: str = "strict", buffers: Any = None
) -> Any:
    return _load(io.BytesIO(data), fix_imports=fix_imports, encoding=encoding, errors=errors, buffers=buffers)


_LOCK = threading.RLock()
_DEPTH = 0
_ORIGINAL = (pickle.load, pickle.loads, pickle.Unpickler)


@contextlib.contextmanager
def no_pickled_code() -> Iterator[None]:
    """While third-party readers run, every ``pickle.load``/``loads``/``Unpickler`` is restricted.

    The swap is process-wide (readers look the functions up on the module) and
    only ever narrows what loads; nested uses share one swap.
    """
    global _DEPTH
    with _LOCK:
        if _DEPTH == 0:
            pickle.load, pickle.loads, pickle.Unpickler = _load, _loads, RestrictedUnpickler  # type: ignore[misc,assignment]
        _DEPTH += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0:
                pickle.load, pickle.loads, pickle.Unpickler = _ORIGINAL  # type: ignore[misc]


def load_tensor_file(path: Path, map_location: Any = "cpu") -> Any:
    """``torch.load(weights_only=True)`` with what ``_tensor_globals`` allows and no fallback: it never runs pickled
    code, and the error is one line naming what was refused.

    Only the classes that are not allowed already are added for the load and removed after it: removing all of
    them (``safe_globals`` on its own removes what it was given) would unregister PyG's own ``Data``, and PyG's
    next load of its processed file would fail and fall back to unrestricted unpickling.
    """
    import torch

    wanted = _tensor_globals()  # first: it imports PyG, which registers its classes as it is imported
    registered = set(torch.serialization.get_safe_globals())
    added = [entry for entry in wanted if entry not in registered]
    try:
        with torch.serialization.safe_globals(added), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's warnings on a legacy or raw pickle: the error below says it all
            return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:
        raise UnsafeFileError(
            f"{Path(path).name}: cannot be read as data without running code it carries ({one_line(exc)})"
        ) from None


class UnsafeFileError(ValueError):
    """A file could not be read as plain data (tensors, arrays, containers)."""


def one_line(exc: BaseException, limit: int = 240) -> str:
    """``Type: first line of the message``, cut to ``limit`` characters."""
    lines = str(exc).strip().splitlines()
    first = lines[0] if lines else ""
    for line in lines:  # torch's weights_only error puts the refused global on a later line
        if any(mark in line.lower() for mark in ("unsupported global", "refusing")):
            first = line.strip()
            break
    text = f"{type(exc).__name__}: {first}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
