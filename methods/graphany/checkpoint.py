"""Reading GraphAny's released Lightning checkpoints without running pickled code.

Each upstream file is a ``torch.save`` zip holding ``state_dict``,
``optimizer_state_dict`` and ``graph_any_config``, an omegaconf ``DictConfig``
whose values are interpolations into the whole training config (which also
holds unrelated settings of the authors' machines: we read only the model keys
below and never log or keep the rest).

Loading reads the zip ourselves and unpickles ``data.pkl`` with a restricted
``pickle.Unpickler`` whose ``find_class`` answers from a fixed table and
refuses everything else: tensors are rebuilt by our own function from the raw
storage bytes; the omegaconf classes become *inert stand-ins* (they record their
pickled state and have no behaviour); ``collections.defaultdict`` becomes a
plain-``dict`` factory that ignores its argument; ``typing.Any`` is itself. So
neither omegaconf nor any code named in the file is imported or called, and a
``__reduce__`` to, say, ``os.system`` ends in a :class:`CheckpointError`.
(We do not use torch's ``weights_only`` allowlist: it is process-global, and
torch_geometric registers the real ``defaultdict`` in it, so a name-mapped
stand-in there is not reliably picked.)

Interpolations are resolved by us, not by omegaconf: ``${key}`` takes the root
config's ``key``; the channel lists use upstream's ``${eval:'"${feat_chn}".split("+")'}``
resolver, which we recognise by pattern and evaluate as a plain split. Any
other expression is an error (we evaluate no code from the file).
"""

from __future__ import annotations

import collections
import io
import pickle
import re
import typing
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


class CheckpointError(ValueError):
    """A GraphAny checkpoint is malformed, or asks the unpickler for something not allowlisted."""


class _Inert:
    """Stand-in for a pickled omegaconf object: keeps its state, does nothing."""

    state: dict

    def __setstate__(self, state: Any) -> None:
        self.state = state if isinstance(state, dict) else {"_state": state}


class DictConfigStandIn(_Inert):
    pass


class ListConfigStandIn(_Inert):
    pass


class AnyNodeStandIn(_Inert):
    pass


class MetadataStandIn(_Inert):
    pass


class ContainerMetadataStandIn(_Inert):
    pass


def _plain_dict(*_args: Any) -> dict:
    """Replaces ``collections.defaultdict(factory)``: the factory is ignored, never called."""
    return {}


class _StorageType:
    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype


def _rebuild_tensor(storage: torch.Tensor, offset: int, size: tuple, stride: tuple, *_rest: Any) -> torch.Tensor:
    if not isinstance(storage, torch.Tensor):
        raise CheckpointError("tensor rebuild without a storage")
    return torch.as_strided(storage, tuple(size), tuple(stride), int(offset)).clone()


_STORAGES = {
    "FloatStorage": torch.float32,
    "DoubleStorage": torch.float64,
    "HalfStorage": torch.float16,
    "LongStorage": torch.int64,
    "IntStorage": torch.int32,
    "BoolStorage": torch.bool,
}

ALLOWED: dict[str, Any] = {
    "omegaconf.dictconfig.DictConfig": DictConfigStandIn,
    "omegaconf.listconfig.ListConfig": ListConfigStandIn,
    "omegaconf.nodes.AnyNode": AnyNodeStandIn,
    "omegaconf.base.Metadata": MetadataStandIn,
    "omegaconf.base.ContainerMetadata": ContainerMetadataStandIn,
    "collections.defaultdict": _plain_dict,
    "collections.OrderedDict": collections.OrderedDict,
    "typing.Any": typing.Any,
    "builtins.dict": dict,
    "builtins.list": list,
    "builtins.int": int,
    "__builtin__.dict": dict,  # python-2 names as torch's protocol-2 pickles write them
    "__builtin__.list": list,
    "__builtin__.long": int,
    "torch._utils._rebuild_tensor_v2": _rebuild_tensor,
    **{f"torch.{name}": _StorageType(dtype) for name, dtype in _STORAGES.items()},
}


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, archive: zipfile.ZipFile, prefix: str) -> None:
        super().__init__(io.BytesIO(data))
        self.archive, self.prefix = archive, prefix

    def find_class(self, module: str, name: str) -> Any:
        found = ALLOWED.get(f"{module}.{name}")
        if found is None:
            raise CheckpointError(
                f"refused global {module}.{name} (only tensors, plain containers and inert config stand-ins are "
                "allowed)"
            )
        return found

    def persistent_load(self, pid: Any) -> torch.Tensor:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _StorageType)):
            raise CheckpointError(f"unexpected persistent id {str(pid)[:80]}")
        _, kind, key, _location, numel = pid
        try:
            raw = self.archive.read(f"{self.prefix}/data/{key}")
        except KeyError:
            raise CheckpointError(f"storage {key} missing from the archive") from None
        flat = torch.frombuffer(bytearray(raw), dtype=kind.dtype) if raw else torch.empty(0, dtype=kind.dtype)
        if flat.numel() < int(numel):
            raise CheckpointError(f"storage {key} holds {flat.numel()} values, {numel} announced")
        return flat


def _unpickle(path: Path) -> Any:
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
        if len(pickles) != 1:
            raise CheckpointError(f"{path.name}: expected one data.pkl in the archive, found {len(pickles)}")
        prefix = pickles[0][: -len("/data.pkl")]
        order = (
            archive.read(f"{prefix}/byteorder").decode().strip()
            if f"{prefix}/byteorder" in archive.namelist()
            else "little"
        )
        if order != "little":
            raise CheckpointError(f"{path.name}: byte order {order!r} is not supported")
        return _RestrictedUnpickler(archive.read(pickles[0]), archive, prefix).load()


# The graph_any_config keys the model needs, and their expected types after resolution.
MODEL_KEYS: dict[str, type | tuple[type, ...]] = {
    "n_hidden": int,
    "feat_channels": list,
    "pred_channels": list,
    "entropy": (int, float),
    "att_temperature": (int, float),
    "n_mlp_layer": int,
}
_CHANNEL = re.compile(r"^(X|L[12]|H[12])$")
_SPLIT_EVAL = re.compile(r"""^\$\{eval:'"\$\{(\w+)\}"\.split\("\+"\)'\}$""")
_REF = re.compile(r"^\$\{(\w+)\}$")


@dataclass(frozen=True)
class GraphAnyCheckpoint:
    state_dict: dict[str, torch.Tensor]  # keys of the attention MLP, without the "gnn_model.mlp." prefix
    n_hidden: int
    n_mlp_layer: int
    feat_channels: tuple[str, ...]
    pred_channels: tuple[str, ...]
    entropy: float
    att_temperature: float


def load_checkpoint(path: Path) -> GraphAnyCheckpoint:
    try:
        raw = _unpickle(path)
    except CheckpointError as exc:
        raise CheckpointError(f"{path.name}: {exc}" if not str(exc).startswith(path.name) else str(exc)) from None
    except (
        pickle.UnpicklingError,
        zipfile.BadZipFile,
        OSError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
    ) as exc:
        raise CheckpointError(f"{path.name}: not a readable GraphAny checkpoint: {type(exc).__name__}: {exc}") from None
    if not isinstance(raw, dict) or "state_dict" not in raw or "graph_any_config" not in raw:
        raise CheckpointError(f"{path.name}: expected a dict with state_dict and graph_any_config")
    config = _model_config(raw["graph_any_config"])
    prefix = "gnn_model.mlp."
    state = {k[len(prefix) :]: v for k, v in raw["state_dict"].items() if k.startswith(prefix)}
    if not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{path.name}: state_dict holds no attention-module tensors under {prefix!r}")
    return GraphAnyCheckpoint(
        state_dict=state,
        n_hidden=int(config["n_hidden"]),
        n_mlp_layer=int(config["n_mlp_layer"]),
        feat_channels=tuple(config["feat_channels"]),
        pred_channels=tuple(config["pred_channels"]),
        entropy=float(config["entropy"]),
        att_temperature=float(config["att_temperature"]),
    )


def _model_config(node: Any) -> dict[str, Any]:
    if not isinstance(node, DictConfigStandIn):
        raise CheckpointError(f"graph_any_config is a {type(node).__name__}, not a pickled DictConfig")
    content = node.state.get("_content")
    root = _root(node)
    root_content = root.state.get("_content") if root is not None else None
    if not isinstance(content, dict) or not isinstance(root_content, dict):
        raise CheckpointError("graph_any_config has no content or no parent config to resolve against")
    resolved: dict[str, Any] = {}
    for key, kind in MODEL_KEYS.items():
        if key not in content:
            raise CheckpointError(f"graph_any_config lacks {key!r}")
        value = _resolve(_value(content[key]), root_content, depth=0)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise CheckpointError(f"graph_any_config {key} resolved to {value!r}, expected {kind}")
        resolved[key] = value
    for key in ("feat_channels", "pred_channels"):
        bad = [c for c in resolved[key] if not isinstance(c, str) or not _CHANNEL.match(c)]
        if bad or not resolved[key]:
            raise CheckpointError(f"graph_any_config {key} holds unknown channels {bad}")
    return resolved


def _root(node: _Inert) -> _Inert | None:
    seen = 0
    while isinstance(node, _Inert) and node.state.get("_parent") is not None and seen < 64:
        node, seen = node.state["_parent"], seen + 1
    return node if isinstance(node, DictConfigStandIn) else None


def _value(node: Any) -> Any:
    if isinstance(node, AnyNodeStandIn):
        return node.state.get("_val")
    if isinstance(node, ListConfigStandIn):
        return [_value(v) for v in node.state.get("_content", [])]
    if isinstance(node, (int, float, str, list)) or node is None:
        return node
    raise CheckpointError(f"unexpected node {type(node).__name__} in graph_any_config")


def _resolve(value: Any, root: dict[str, Any], depth: int) -> Any:
    if depth > 8:
        raise CheckpointError("interpolation too deep in graph_any_config")
    if not isinstance(value, str) or not value.startswith("${"):
        return value
    match = _SPLIT_EVAL.match(value)
    if match:
        text = _resolve(_lookup(root, match.group(1)), root, depth + 1)
        if not isinstance(text, str):
            raise CheckpointError(f"{match.group(1)} is not a string")
        return text.split("+")
    match = _REF.match(value)
    if match:
        return _resolve(_lookup(root, match.group(1)), root, depth + 1)
    raise CheckpointError(f"graph_any_config holds an interpolation we do not evaluate: {value[:60]!r}")


def _lookup(root: dict[str, Any], key: str) -> Any:
    if key not in root:
        raise CheckpointError(f"graph_any_config refers to {key!r}, absent from the saved config")
    return _value(root[key])
