from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MethodKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    METHOD_KIND_UNSPECIFIED: _ClassVar[MethodKind]
    METHOD_KIND_SUPERVISED: _ClassVar[MethodKind]
    METHOD_KIND_GFM: _ClassVar[MethodKind]
METHOD_KIND_UNSPECIFIED: MethodKind
METHOD_KIND_SUPERVISED: MethodKind
METHOD_KIND_GFM: MethodKind

class Value(_message.Message):
    __slots__ = ("int_value", "float_value", "string_value", "bool_value")
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    FLOAT_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    int_value: int
    float_value: float
    string_value: str
    bool_value: bool
    def __init__(self, int_value: _Optional[int] = ..., float_value: _Optional[float] = ..., string_value: _Optional[str] = ..., bool_value: _Optional[bool] = ...) -> None: ...

class Param(_message.Message):
    __slots__ = ("name", "float_range", "int_range", "choice")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FLOAT_RANGE_FIELD_NUMBER: _ClassVar[int]
    INT_RANGE_FIELD_NUMBER: _ClassVar[int]
    CHOICE_FIELD_NUMBER: _ClassVar[int]
    name: str
    float_range: FloatRange
    int_range: IntRange
    choice: Choice
    def __init__(self, name: _Optional[str] = ..., float_range: _Optional[_Union[FloatRange, _Mapping]] = ..., int_range: _Optional[_Union[IntRange, _Mapping]] = ..., choice: _Optional[_Union[Choice, _Mapping]] = ...) -> None: ...

class FloatRange(_message.Message):
    __slots__ = ("low", "high", "log")
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    low: float
    high: float
    log: bool
    def __init__(self, low: _Optional[float] = ..., high: _Optional[float] = ..., log: _Optional[bool] = ...) -> None: ...

class IntRange(_message.Message):
    __slots__ = ("low", "high", "log")
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    low: int
    high: int
    log: bool
    def __init__(self, low: _Optional[int] = ..., high: _Optional[int] = ..., log: _Optional[bool] = ...) -> None: ...

class Choice(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedCompositeFieldContainer[Value]
    def __init__(self, values: _Optional[_Iterable[_Union[Value, _Mapping]]] = ...) -> None: ...

class Capabilities(_message.Message):
    __slots__ = ("max_classes", "max_features", "max_nodes", "needs_gpu", "uses_gpu", "supports_binary", "supports_multiclass")
    MAX_CLASSES_FIELD_NUMBER: _ClassVar[int]
    MAX_FEATURES_FIELD_NUMBER: _ClassVar[int]
    MAX_NODES_FIELD_NUMBER: _ClassVar[int]
    NEEDS_GPU_FIELD_NUMBER: _ClassVar[int]
    USES_GPU_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_BINARY_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_MULTICLASS_FIELD_NUMBER: _ClassVar[int]
    max_classes: int
    max_features: int
    max_nodes: int
    needs_gpu: bool
    uses_gpu: bool
    supports_binary: bool
    supports_multiclass: bool
    def __init__(self, max_classes: _Optional[int] = ..., max_features: _Optional[int] = ..., max_nodes: _Optional[int] = ..., needs_gpu: _Optional[bool] = ..., uses_gpu: _Optional[bool] = ..., supports_binary: _Optional[bool] = ..., supports_multiclass: _Optional[bool] = ...) -> None: ...

class MethodInfo(_message.Message):
    __slots__ = ("name", "version", "family", "kind", "capabilities", "default_config", "search_space", "library_versions", "description")
    class DefaultConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    class LibraryVersionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_CONFIG_FIELD_NUMBER: _ClassVar[int]
    SEARCH_SPACE_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    family: str
    kind: MethodKind
    capabilities: Capabilities
    default_config: _containers.MessageMap[str, Value]
    search_space: _containers.RepeatedCompositeFieldContainer[Param]
    library_versions: _containers.ScalarMap[str, str]
    description: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., family: _Optional[str] = ..., kind: _Optional[_Union[MethodKind, str]] = ..., capabilities: _Optional[_Union[Capabilities, _Mapping]] = ..., default_config: _Optional[_Mapping[str, Value]] = ..., search_space: _Optional[_Iterable[_Union[Param, _Mapping]]] = ..., library_versions: _Optional[_Mapping[str, str]] = ..., description: _Optional[str] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("methods", "family", "device", "device_name", "driver_version", "cuda_version", "not_ready", "fit_labels", "graphs_received", "shared_graph_dir", "cpu_model", "compute_threads", "device_memory_bytes", "kernels")
    METHODS_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_NAME_FIELD_NUMBER: _ClassVar[int]
    DRIVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    CUDA_VERSION_FIELD_NUMBER: _ClassVar[int]
    NOT_READY_FIELD_NUMBER: _ClassVar[int]
    FIT_LABELS_FIELD_NUMBER: _ClassVar[int]
    GRAPHS_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    SHARED_GRAPH_DIR_FIELD_NUMBER: _ClassVar[int]
    CPU_MODEL_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_THREADS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    KERNELS_FIELD_NUMBER: _ClassVar[int]
    methods: _containers.RepeatedCompositeFieldContainer[MethodInfo]
    family: str
    device: str
    device_name: str
    driver_version: str
    cuda_version: str
    not_ready: _containers.RepeatedCompositeFieldContainer[NotReady]
    fit_labels: bool
    graphs_received: int
    shared_graph_dir: str
    cpu_model: str
    compute_threads: int
    device_memory_bytes: int
    kernels: str
    def __init__(self, methods: _Optional[_Iterable[_Union[MethodInfo, _Mapping]]] = ..., family: _Optional[str] = ..., device: _Optional[str] = ..., device_name: _Optional[str] = ..., driver_version: _Optional[str] = ..., cuda_version: _Optional[str] = ..., not_ready: _Optional[_Iterable[_Union[NotReady, _Mapping]]] = ..., fit_labels: _Optional[bool] = ..., graphs_received: _Optional[int] = ..., shared_graph_dir: _Optional[str] = ..., cpu_model: _Optional[str] = ..., compute_threads: _Optional[int] = ..., device_memory_bytes: _Optional[int] = ..., kernels: _Optional[str] = ...) -> None: ...

class NotReady(_message.Message):
    __slots__ = ("method", "weights_id", "reason")
    METHOD_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    method: str
    weights_id: str
    reason: str
    def __init__(self, method: _Optional[str] = ..., weights_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class HasGraphRequest(_message.Message):
    __slots__ = ("graph_hash",)
    GRAPH_HASH_FIELD_NUMBER: _ClassVar[int]
    graph_hash: str
    def __init__(self, graph_hash: _Optional[str] = ...) -> None: ...

class HasGraphResponse(_message.Message):
    __slots__ = ("held",)
    HELD_FIELD_NUMBER: _ClassVar[int]
    held: bool
    def __init__(self, held: _Optional[bool] = ...) -> None: ...

class TensorSpec(_message.Message):
    __slots__ = ("name", "dtype", "shape", "offset", "nbytes")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    NBYTES_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: str
    shape: _containers.RepeatedScalarFieldContainer[int]
    offset: int
    nbytes: int
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[str] = ..., shape: _Optional[_Iterable[int]] = ..., offset: _Optional[int] = ..., nbytes: _Optional[int] = ...) -> None: ...

class GraphHeader(_message.Message):
    __slots__ = ("graph_hash", "num_nodes", "num_classes", "tensors", "total_bytes")
    GRAPH_HASH_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    NUM_CLASSES_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    graph_hash: str
    num_nodes: int
    num_classes: int
    tensors: _containers.RepeatedCompositeFieldContainer[TensorSpec]
    total_bytes: int
    def __init__(self, graph_hash: _Optional[str] = ..., num_nodes: _Optional[int] = ..., num_classes: _Optional[int] = ..., tensors: _Optional[_Iterable[_Union[TensorSpec, _Mapping]]] = ..., total_bytes: _Optional[int] = ...) -> None: ...

class GraphChunk(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: GraphHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[GraphHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class AttachGraphRequest(_message.Message):
    __slots__ = ("header", "handover")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    HANDOVER_FIELD_NUMBER: _ClassVar[int]
    header: GraphHeader
    handover: str
    def __init__(self, header: _Optional[_Union[GraphHeader, _Mapping]] = ..., handover: _Optional[str] = ...) -> None: ...

class UploadGraphResponse(_message.Message):
    __slots__ = ("graph_hash", "already_held", "service_seconds")
    GRAPH_HASH_FIELD_NUMBER: _ClassVar[int]
    ALREADY_HELD_FIELD_NUMBER: _ClassVar[int]
    SERVICE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    graph_hash: str
    already_held: bool
    service_seconds: float
    def __init__(self, graph_hash: _Optional[str] = ..., already_held: _Optional[bool] = ..., service_seconds: _Optional[float] = ...) -> None: ...

class CallStats(_message.Message):
    __slots__ = ("seconds", "peak_rss_bytes", "peak_gpu_bytes", "cpu_seconds")
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    PEAK_RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    PEAK_GPU_BYTES_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    seconds: float
    peak_rss_bytes: int
    peak_gpu_bytes: int
    cpu_seconds: float
    def __init__(self, seconds: _Optional[float] = ..., peak_rss_bytes: _Optional[int] = ..., peak_gpu_bytes: _Optional[int] = ..., cpu_seconds: _Optional[float] = ...) -> None: ...

class FitRequest(_message.Message):
    __slots__ = ("method", "graph_hash", "train_nodes", "val_nodes", "config", "seed", "time_limit_seconds", "train_labels", "val_labels")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    METHOD_FIELD_NUMBER: _ClassVar[int]
    GRAPH_HASH_FIELD_NUMBER: _ClassVar[int]
    TRAIN_NODES_FIELD_NUMBER: _ClassVar[int]
    VAL_NODES_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TRAIN_LABELS_FIELD_NUMBER: _ClassVar[int]
    VAL_LABELS_FIELD_NUMBER: _ClassVar[int]
    method: str
    graph_hash: str
    train_nodes: _containers.RepeatedScalarFieldContainer[int]
    val_nodes: _containers.RepeatedScalarFieldContainer[int]
    config: _containers.MessageMap[str, Value]
    seed: int
    time_limit_seconds: float
    train_labels: _containers.RepeatedScalarFieldContainer[int]
    val_labels: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, method: _Optional[str] = ..., graph_hash: _Optional[str] = ..., train_nodes: _Optional[_Iterable[int]] = ..., val_nodes: _Optional[_Iterable[int]] = ..., config: _Optional[_Mapping[str, Value]] = ..., seed: _Optional[int] = ..., time_limit_seconds: _Optional[float] = ..., train_labels: _Optional[_Iterable[int]] = ..., val_labels: _Optional[_Iterable[int]] = ...) -> None: ...

class FitResponse(_message.Message):
    __slots__ = ("model_handle", "stats", "info")
    class InfoEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...
    MODEL_HANDLE_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    model_handle: str
    stats: CallStats
    info: _containers.MessageMap[str, Value]
    def __init__(self, model_handle: _Optional[str] = ..., stats: _Optional[_Union[CallStats, _Mapping]] = ..., info: _Optional[_Mapping[str, Value]] = ...) -> None: ...

class PredictRequest(_message.Message):
    __slots__ = ("model_handle",)
    MODEL_HANDLE_FIELD_NUMBER: _ClassVar[int]
    model_handle: str
    def __init__(self, model_handle: _Optional[str] = ...) -> None: ...

class PredictChunk(_message.Message):
    __slots__ = ("row_offset", "num_rows", "num_classes", "probabilities", "stats")
    ROW_OFFSET_FIELD_NUMBER: _ClassVar[int]
    NUM_ROWS_FIELD_NUMBER: _ClassVar[int]
    NUM_CLASSES_FIELD_NUMBER: _ClassVar[int]
    PROBABILITIES_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    row_offset: int
    num_rows: int
    num_classes: int
    probabilities: bytes
    stats: CallStats
    def __init__(self, row_offset: _Optional[int] = ..., num_rows: _Optional[int] = ..., num_classes: _Optional[int] = ..., probabilities: _Optional[bytes] = ..., stats: _Optional[_Union[CallStats, _Mapping]] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("model_handle",)
    MODEL_HANDLE_FIELD_NUMBER: _ClassVar[int]
    model_handle: str
    def __init__(self, model_handle: _Optional[str] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: bool
    def __init__(self, released: _Optional[bool] = ...) -> None: ...
