"""Method SDK: subclass TorchNodeClassifier (or Method), state capabilities, config and space.

Helpers a family shares with others live here too: the memory budget
(``methods.sdk.memory``), frozen weights with provenance and trained heads
(``methods.sdk.frozen``), in-context inference (``methods.sdk.pfn``). A family
imports only the SDK and its own modules.
"""

from contract.space import ChoiceParam, Config, ConfigError, FloatParam, IntParam
from methods.sdk.dropout import feature_dropout
from methods.sdk.memory import ResourceError, available_memory_bytes, require_declared_memory, require_memory
from methods.sdk.method import (
    TRAIN_SPACE,
    Capabilities,
    FitContext,
    FitInterrupted,
    GraphTensors,
    InputRefused,
    Method,
    TorchNodeClassifier,
    graph_tensors,
)

__all__ = [
    "TRAIN_SPACE",
    "Capabilities",
    "ChoiceParam",
    "Config",
    "ConfigError",
    "FitContext",
    "FitInterrupted",
    "FloatParam",
    "InputRefused",
    "IntParam",
    "Method",
    "ResourceError",
    "TorchNodeClassifier",
    "GraphTensors",
    "available_memory_bytes",
    "feature_dropout",
    "graph_tensors",
    "require_declared_memory",
    "require_memory",
]
