"""The graph bundle on the wire: three tensors, one content hash, chunks under 4 MiB.

The hash is defined on bytes anyone can reproduce in any language:
sha256 of ``"nodeground-graph-v1 num_classes=C\\n"``, then one line
``"<name> <dtype> <d0>x<d1>...\\n"`` per tensor in bundle order, then the
concatenated little-endian tensor bytes. The service recomputes it on receipt,
so a corrupted or truncated upload is refused rather than trained on.

On one host the payload may come as a sealed memfd instead (``contract.handover``): the same bytes, mapped
rather than streamed, checked by the same rules (``check_header``, ``assemble``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from contract.v1 import method_service_pb2 as pb

CHUNK_BYTES = 2 << 20  # 2 MiB of payload per message: well under gRPC's 4 MiB default
MAX_MESSAGE_BYTES = 4 << 20
# Both ends of every NodeGround channel allow messages of that size (a chunk and its framing fit).
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]
TENSOR_ORDER = (("features", "float32", 2), ("edge_index", "int64", 2), ("labels", "int64", 1))
_DTYPES: dict[str, np.dtype[Any]] = {"float32": np.dtype("<f4"), "int64": np.dtype("<i8")}


class BundleError(ValueError):
    """A graph bundle is malformed (shapes, dtypes, ranges or hash)."""


class BundleTooLarge(BundleError):
    """An upload declares more than the receiver will hold; refused before any byte is allocated."""


@dataclass
class GraphBundle:
    """What a method service sees of a graph. Labels outside train ∪ val are -1."""

    features: np.ndarray  # float32 (N, F)
    edge_index: np.ndarray  # int64 (2, E)
    labels: np.ndarray  # int64 (N,), -1 = hidden
    num_classes: int
    graph_hash: str = ""
    cache: dict[Any, Any] = field(default_factory=dict, repr=False)  # derived tensors, per service

    @property
    def num_nodes(self) -> int:
        return int(self.features.shape[0])

    @property
    def nbytes(self) -> int:
        return int(self.features.nbytes + self.edge_index.nbytes + self.labels.nbytes)

    def tensors(self) -> tuple[np.ndarray, ...]:
        return (self.features, self.edge_index, self.labels)


def make_bundle(features: np.ndarray, edge_index: np.ndarray, labels: np.ndarray, num_classes: int) -> GraphBundle:
    """Build a bundle in wire dtypes and compute its hash."""
    bundle = GraphBundle(
        features=np.ascontiguousarray(features, dtype=_DTYPES["float32"]),
        edge_index=np.ascontiguousarray(edge_index, dtype=_DTYPES["int64"]),
        labels=np.ascontiguousarray(labels, dtype=_DTYPES["int64"]),
        num_classes=int(num_classes),
    )
    validate(bundle)
    bundle.graph_hash = bundle_hash(bundle.num_classes, _specs(bundle), bundle.tensors())
    return bundle


def _specs(bundle: GraphBundle) -> list[pb.TensorSpec]:
    specs, offset = [], 0
    for (name, dtype, _), array in zip(TENSOR_ORDER, bundle.tensors(), strict=True):
        specs.append(pb.TensorSpec(name=name, dtype=dtype, shape=list(array.shape), offset=offset, nbytes=array.nbytes))
        offset += array.nbytes
    return specs


def bundle_hash(num_classes: int, specs: list[pb.TensorSpec], payload: Any) -> str:
    """sha256 over the header lines and the payload (a buffer or a sequence of buffers)."""
    h = hashlib.sha256(f"nodeground-graph-v1 num_classes={num_classes}\n".encode())
    for spec in specs:
        h.update(f"{spec.name} {spec.dtype} {'x'.join(str(d) for d in spec.shape)}\n".encode())
    for part in payload if isinstance(payload, (list, tuple)) else (payload,):
        h.update(memoryview(part).cast("B"))
    return h.hexdigest()


def validate(bundle: GraphBundle) -> None:
    """Refuse what would make a method crash or silently learn garbage."""
    n = bundle.features.shape[0] if bundle.features.ndim == 2 else -1
    if bundle.features.ndim != 2 or n <= 0:
        raise BundleError(f"features must be a non-empty N x F matrix, got shape {bundle.features.shape}")
    if bundle.edge_index.ndim != 2 or bundle.edge_index.shape[0] != 2:
        raise BundleError(f"edge_index must be 2 x E, got shape {bundle.edge_index.shape}")
    if bundle.labels.shape != (n,):
        raise BundleError(f"labels must have one entry per node ({n}), got shape {bundle.labels.shape}")
    if bundle.num_classes < 2:
        raise BundleError(f"num_classes must be at least 2, got {bundle.num_classes}")
    if bundle.edge_index.size and (bundle.edge_index.min() < 0 or bundle.edge_index.max() >= n):
        raise BundleError(
            f"edge_index holds node ids in [{bundle.edge_index.min()}, {bundle.edge_index.max()}], outside [0, {n})"
        )
    if bundle.labels.size and (bundle.labels.min() < -1 or bundle.labels.max() >= bundle.num_classes):
        raise BundleError(
            f"labels must lie in [-1, {bundle.num_classes}), got [{bundle.labels.min()}, {bundle.labels.max()}]"
        )
    if not np.isfinite(bundle.features).all():
        raise BundleError("features contain NaN or infinite values")


def graph_header(bundle: GraphBundle) -> pb.GraphHeader:
    """The header that announces ``bundle``: its hash, counts and where each tensor lies in the payload."""
    return pb.GraphHeader(
        graph_hash=bundle.graph_hash,
        num_nodes=bundle.num_nodes,
        num_classes=bundle.num_classes,
        tensors=_specs(bundle),
        total_bytes=bundle.nbytes,
    )


def payload(bundle: GraphBundle) -> tuple[memoryview, ...]:
    """The payload as views of the arrays' own memory, in bundle order: what follows the header, uncopied."""
    return tuple(array.data.cast("B") for array in bundle.tensors())


def encode(bundle: GraphBundle, chunk_bytes: int = CHUNK_BYTES) -> Iterator[pb.GraphChunk]:
    """Yield the upload stream: the header in the first chunk, then payload slices.

    Slices are taken from the arrays' own memory, so no second copy of the
    whole graph is ever built.
    """
    header = graph_header(bundle)
    first = True
    for view in payload(bundle):
        for start in range(0, len(view), chunk_bytes):
            data = bytes(view[start : start + chunk_bytes])
            yield pb.GraphChunk(header=header, data=data) if first else pb.GraphChunk(data=data)
            first = False
    if first:  # every tensor empty cannot happen for a valid bundle, but keep the stream well-formed
        yield pb.GraphChunk(header=header)


def held_bytes(header: pb.GraphHeader) -> int:
    """What receiving ``header``'s graph commits a service to: its tensors plus one N x C float32 prediction."""
    return int(header.total_bytes) + int(header.num_nodes) * int(header.num_classes) * 4


def check_header(header: pb.GraphHeader) -> int:
    """Refuse a header whose tensors, sizes or counts disagree with each other; the payload's size in bytes.

    Whatever carries the payload (the stream, a same-host file) is checked against this before any byte is read.
    """
    names = [s.name for s in header.tensors]
    if names != [name for name, _, _ in TENSOR_ORDER]:
        raise BundleError(f"tensors must be {[n for n, _, _ in TENSOR_ORDER]} in that order, got {names}")
    expected = 0
    for spec, (name, dtype, ndim) in zip(header.tensors, TENSOR_ORDER, strict=True):
        if spec.dtype != dtype or len(spec.shape) != ndim or any(d < 0 for d in spec.shape):
            raise BundleError(f"tensor {name}: expected {dtype} with {ndim} dims, got {spec.dtype} {list(spec.shape)}")
        size = math.prod(int(d) for d in spec.shape) * _DTYPES[dtype].itemsize  # exact: np.prod wraps around
        if spec.nbytes != size or spec.offset != expected:
            raise BundleError(f"tensor {name}: offset/nbytes {spec.offset}/{spec.nbytes} disagree with its shape")
        expected += size
    if header.total_bytes != expected:
        raise BundleError(f"total_bytes {header.total_bytes} != sum of tensor sizes {expected}")
    n = header.tensors[0].shape[0]
    if header.num_nodes != n:
        raise BundleError(f"num_nodes {header.num_nodes} disagrees with the features' {n} rows")
    if not 2 <= header.num_classes <= max(2, n):
        raise BundleError(f"num_classes must lie in [2, num_nodes = {n}], got {header.num_classes}")
    return expected


def assemble(header: pb.GraphHeader, buffer: Any) -> GraphBundle:
    """The bundle over ``buffer`` (exactly the checked header's payload, not copied) once its hash and content check."""
    arrays = [
        np.frombuffer(buffer, dtype=_DTYPES[s.dtype], count=int(np.prod(s.shape)), offset=s.offset).reshape(
            tuple(s.shape)
        )
        for s in header.tensors
    ]
    digest = bundle_hash(header.num_classes, list(header.tensors), buffer)
    if digest != header.graph_hash:
        raise BundleError(f"graph hash mismatch: header says {header.graph_hash}, content is {digest}")
    bundle = GraphBundle(arrays[0], arrays[1], arrays[2], int(header.num_classes), graph_hash=digest)
    validate(bundle)
    return bundle


def decode(chunks: Iterator[pb.GraphChunk], admit: Callable[[pb.GraphHeader], None] | None = None) -> GraphBundle:
    """Assemble an upload stream into a bundle, checking sizes, shapes and the hash.

    The header is checked first (``admit`` may refuse it, raising BundleTooLarge,
    from its declared sizes alone); the buffer then grows with the bytes that
    actually arrive, so a header that lies about its size costs nothing.
    """
    iterator = iter(chunks)
    try:
        first = next(iterator)
    except StopIteration:
        raise BundleError("empty upload stream") from None
    if not first.HasField("header"):
        raise BundleError("the first chunk must carry the graph header")
    header = first.header
    expected = check_header(header)
    if admit is not None:
        admit(header)
    buffer = bytearray()
    for chunk in _chain(first, iterator):
        if len(buffer) + len(chunk.data) > expected:
            raise BundleError(f"upload carries more than the announced {expected} bytes")
        buffer += chunk.data
    if len(buffer) != expected:
        raise BundleError(f"upload ended after {len(buffer)} of {expected} bytes")
    return assemble(header, buffer)


def _chain(first: pb.GraphChunk, rest: Iterator[pb.GraphChunk]) -> Iterator[pb.GraphChunk]:
    yield first
    yield from rest


def encode_probabilities(
    probs: np.ndarray, stats: pb.CallStats, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[pb.PredictChunk]:
    """Row chunks of an N x C float32 matrix; the last chunk carries the stats."""
    probs = np.ascontiguousarray(probs, dtype=_DTYPES["float32"])
    n, c = probs.shape
    rows = max(1, chunk_bytes // max(1, 4 * c))
    for start in range(0, n, rows):
        block = probs[start : start + rows]
        last = start + rows >= n
        yield pb.PredictChunk(
            row_offset=start,
            num_rows=block.shape[0],
            num_classes=c,
            probabilities=block.tobytes(),
            stats=stats if last else None,
        )


def decode_probabilities(
    chunks: Iterator[pb.PredictChunk], num_nodes: int, num_classes: int | None = None
) -> tuple[np.ndarray, pb.CallStats]:
    """Reassemble the probability matrix; refuse missing, misplaced or mis-sized rows and a reply without stats.

    Every field of a chunk is checked before it is interpreted (its byte length before any buffer is
    read, its class count before anything is allocated), so a malformed reply raises BundleError and
    nothing else. Without ``num_classes`` the class count is bounded by the node count (a graph has at
    most one class per node), which bounds what a reply can make the receiver allocate.
    """
    itemsize = _DTYPES["float32"].itemsize
    probs: np.ndarray | None = None
    seen = 0
    stats: pb.CallStats | None = None
    for chunk in chunks:
        classes, rows, offset = int(chunk.num_classes), int(chunk.num_rows), int(chunk.row_offset)
        if probs is None:
            if num_classes is not None and classes != num_classes:
                raise BundleError(f"prediction has {classes} classes; the graph has {num_classes}")
            if not 1 <= classes <= max(2, num_nodes):
                raise BundleError(f"prediction has {classes} classes, outside [1, {max(2, num_nodes)}]")
            probs = np.empty((num_nodes, classes), dtype=np.float32)
        if classes != probs.shape[1]:
            raise BundleError(f"prediction chunk at row {offset} has {classes} classes, earlier ones {probs.shape[1]}")
        if offset != seen:
            raise BundleError(f"prediction chunk at row {offset} does not continue row {seen}")
        if rows < 0 or seen + rows > num_nodes:
            raise BundleError(f"prediction chunk at row {offset} has {rows} rows; {num_nodes - seen} remain")
        if len(chunk.probabilities) != rows * classes * itemsize:
            raise BundleError(
                f"prediction chunk at row {offset} has {len(chunk.probabilities)} bytes of probabilities; "
                f"{rows} x {classes} float32 are {rows * classes * itemsize}"
            )
        block = np.frombuffer(chunk.probabilities, dtype=_DTYPES["float32"], count=rows * classes)
        probs[seen : seen + rows] = block.reshape(rows, classes)
        seen += rows
        if chunk.HasField("stats"):
            stats = chunk.stats
    if probs is None or seen != num_nodes:
        raise BundleError(f"prediction covers {seen} of {num_nodes} nodes")
    if stats is None:
        raise BundleError("prediction carries no stats")
    return probs, stats
