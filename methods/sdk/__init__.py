"""Method SDK: subclass TorchNodeClassifier (or Method), state capabilities, config and space.

Helpers a family shares with others live here too: the memory budget and the declared resource check
(``methods.sdk.memory``), graph operators (``methods.sdk.graph_ops``), frozen weights with provenance and trained
heads (``methods.sdk.frozen``, ``methods.sdk.weights``), in-context inference (``methods.sdk.pfn``). A family
imports only this face (``__all__``) and its own modules (tests/methods/test_family_layout.py).
"""

from contract.space import (
    ChoiceParam,
    Config,
    ConfigError,
    FloatParam,
    IntParam,
)
from methods.sdk.dropout import (
    feature_dropout,
)
from methods.sdk.frozen import (
    ARCH_ENV,
    RANDOM_INIT_SEED,
    SELECTION,
    FrozenGFM,
    HeadState,
    Provenance,
    adaptation_flags,
    arch_overrides,
    frozen_representations,
    load_frozen,
    locate_or_random,
    locate_weights,
    located_state_dict,
    train_head,
)
from methods.sdk.graph_ops import (
    WeightedPropagation,
    edges_without_self_loops,
    laplacian_eigenvectors,
    sym_norm_weights,
)
from methods.sdk.memory import (
    ResourceError,
    available_memory_bytes,
    memory_budget_bytes,
    require_declared_memory,
    require_memory,
)
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
    seed_everything,
)
from methods.sdk.pfn import (
    attention_chunk,
    chunked_attention,
    edge_array_without_self_loops,
    finish_probs,
    param_bytes,
)
from methods.sdk.weights import (
    WeightsError,
    load_weights_catalog,
    safe_torch_load,
)

__all__ = [
    "ARCH_ENV",
    "RANDOM_INIT_SEED",
    "SELECTION",
    "TRAIN_SPACE",
    "Capabilities",
    "ChoiceParam",
    "Config",
    "ConfigError",
    "FitContext",
    "FitInterrupted",
    "FloatParam",
    "FrozenGFM",
    "GraphTensors",
    "HeadState",
    "InputRefused",
    "IntParam",
    "Method",
    "Provenance",
    "ResourceError",
    "TorchNodeClassifier",
    "WeightedPropagation",
    "WeightsError",
    "adaptation_flags",
    "arch_overrides",
    "attention_chunk",
    "available_memory_bytes",
    "chunked_attention",
    "edge_array_without_self_loops",
    "edges_without_self_loops",
    "feature_dropout",
    "finish_probs",
    "frozen_representations",
    "graph_tensors",
    "laplacian_eigenvectors",
    "load_frozen",
    "load_weights_catalog",
    "locate_or_random",
    "locate_weights",
    "located_state_dict",
    "memory_budget_bytes",
    "param_bytes",
    "require_declared_memory",
    "require_memory",
    "safe_torch_load",
    "seed_everything",
    "sym_norm_weights",
    "train_head",
]
