"""Method SDK: subclass TorchNodeClassifier (or Method), state capabilities, config and space."""

from contract.space import ChoiceParam, Config, ConfigError, FloatParam, IntParam
from methods.sdk.method import (
    FLOAT_BYTES,
    Capabilities,
    FitContext,
    FitInterrupted,
    GraphTensors,
    Method,
    ResourceError,
    TorchNodeClassifier,
    available_memory_bytes,
    edge_message_bytes,
    graph_tensors,
    require_memory,
)

__all__ = [
    "FLOAT_BYTES",
    "Capabilities",
    "ChoiceParam",
    "Config",
    "ConfigError",
    "FitContext",
    "FitInterrupted",
    "FloatParam",
    "IntParam",
    "Method",
    "ResourceError",
    "TorchNodeClassifier",
    "GraphTensors",
    "available_memory_bytes",
    "edge_message_bytes",
    "graph_tensors",
    "require_memory",
]
