"""A request's checks, before any method code runs: each refusal is INVALID_ARGUMENT (``context.abort``) with a
message that says what to fix."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import grpc
import numpy as np

from contract.v1 import method_service_pb2 as pb
from contract.wire import GraphBundle
from methods.sdk.method import Method


def check_time_limit(limit: float, context: grpc.ServicerContext) -> None:
    """A fit's own time limit: a finite number of seconds, 0 for none."""
    if not math.isfinite(limit) or limit < 0:  # 0 is the proto's "none"; NaN, inf and negatives mean nothing
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"time_limit_seconds must be a finite number of seconds > 0 (or 0 for none), got {limit!r}",
        )


def split_labels(
    graph: GraphBundle, request: pb.FitRequest, context: grpc.ServicerContext
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """A fit's labels for its training and validation nodes as (name, node ids, labels): one a node, each in range."""
    parts: list[tuple[str, np.ndarray, np.ndarray]] = []
    for what, nodes, labels in (
        ("train", request.train_nodes, request.train_labels),
        ("val", request.val_nodes, request.val_labels),
    ):
        ids = np.asarray(nodes, dtype=np.int64)
        values = np.asarray(labels, dtype=np.int64)
        if values.shape != ids.shape:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{what}_labels has {values.size} entries for {ids.size} {what}_nodes; give one label per node",
            )
        if ids.size and (ids.min() < 0 or ids.max() >= graph.num_nodes):
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"{what}_nodes holds node ids outside [0, {graph.num_nodes})"
            )
        if values.size and (values.min() < 0 or values.max() >= graph.num_classes):
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{what}_labels must lie in [0, {graph.num_classes}), got [{values.min()}, {values.max()}]",
            )
        parts.append((what, ids, values))
    return parts


def node_set(field: str, nodes: Sequence[int], graph: GraphBundle, context: grpc.ServicerContext) -> np.ndarray:
    """A fit's training or validation nodes: some, in range, labelled, each once."""
    array = np.asarray(nodes, dtype=np.int64)
    if array.size == 0:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field} is empty")
    if array.min() < 0 or array.max() >= graph.num_nodes:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field} holds node ids outside [0, {graph.num_nodes})")
    if (graph.labels[array] < 0).any():
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{field} includes nodes whose label is hidden (-1)")
    if np.unique(array).size != array.size:
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"{field} repeats node ids ({array.size - np.unique(array).size} duplicates); each node counts once",
        )
    return array


def hosted_method(
    methods: Mapping[str, type[Method]], family: str, name: str, context: grpc.ServicerContext
) -> type[Method]:
    """The method a request names, one the service hosts."""
    method = methods.get(name)
    if method is None:
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"unknown method {name!r}; this {family} service hosts {', '.join(sorted(methods))}",
        )
    return method


def fit_nodes(
    request: pb.FitRequest, graph: GraphBundle, context: grpc.ServicerContext
) -> tuple[np.ndarray, np.ndarray]:
    """A fit's training and validation nodes, each a ``node_set``, and apart: validation is held out."""
    train = node_set("train_nodes", request.train_nodes, graph, context)
    val = node_set("val_nodes", request.val_nodes, graph, context)
    if np.intersect1d(train, val).size:
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, "train_nodes and val_nodes overlap; validation must be held out"
        )
    return train, val


def check_capabilities(method: type[Method], graph: GraphBundle, context: grpc.ServicerContext) -> None:
    """The graph within what the method declares it takes (``Capabilities``)."""
    caps = method.capabilities
    limits = (
        (caps.max_classes, graph.num_classes, "classes"),
        (caps.max_features, graph.features.shape[1], "features"),
        (caps.max_nodes, graph.num_nodes, "nodes"),
    )
    for limit, actual, what in limits:
        if limit and actual > limit:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{method.name} supports at most {limit} {what}; the graph has {actual}",
            )
    binary = graph.num_classes == 2
    if (binary and not caps.supports_binary) or (not binary and not caps.supports_multiclass):
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"{method.name} does not support {'binary' if binary else 'multiclass'} tasks",
        )
