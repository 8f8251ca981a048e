"""Generated hostile input over four surfaces: the wire decoder (in process and over gRPC to a
real service process), `datasets add`, the CLI's flags, and the settings a service and the
orchestrator read (each flag and variable). Every input ends in a result or the surface's own
one-line error: no other exception, no traceback, no hang, and the service's RSS stays under
RSS_BOUND_BYTES. Example counts are fixed (EXAMPLES) so `make test` stays bounded: 1,160
generated inputs in all, a few seconds per surface."""

from __future__ import annotations

import io
from collections.abc import Iterator

import grpc
import numpy as np
import psutil
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from contract.settings import ORCHESTRATOR_SETTINGS, SERVICE_LIMITS, SERVICE_SETTINGS, SettingError
from contract.v1 import method_service_pb2 as pb
from contract.v1 import method_service_pb2_grpc as pb_grpc
from contract.wire import MAX_MESSAGE_BYTES, BundleError, BundleTooLarge, decode, encode, held_bytes, make_bundle
from methods.serve import PORT
from methods.serve import main as serve_main
from orchestrator.cli.main import app
from orchestrator.data.registry import add_user_dataset
from orchestrator.data.user import UserDatasetError
from orchestrator.store import Store
from tests.conftest import HANG_S, served, tiny_graph

EXAMPLES = {"decode": 300, "upload": 120, "datasets_add": 160, "cli": 180, "service_settings": 240, "settings": 160}
RSS_BOUND_BYTES = 256 << 20  # growth of the service over the whole upload fuzz
ADMIT_BYTES = 16 << 20  # what the in-process decoder is allowed to commit to
INT64 = st.integers(-(2**63), 2**63 - 1)
# No per-example deadline (a shared CI machine's timing is no property of ours); a hang fails the
# surface's test through the suite's pytest timeout instead (a 300 s one of its own was a load-bound limit).
FUZZ = dict(
    deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)


def _valid_chunks(n: int = 40, chunk_bytes: int = 256) -> list[pb.GraphChunk]:
    x, e, y = tiny_graph(n)
    return list(encode(make_bundle(x, e, y, 3), chunk_bytes=chunk_bytes))


VALID = _valid_chunks()


@st.composite
def specs(draw) -> pb.TensorSpec:
    return pb.TensorSpec(
        name=draw(st.sampled_from(["features", "edge_index", "labels", "x", ""])),
        dtype=draw(st.sampled_from(["float32", "int64", "float64", ""])),
        shape=draw(st.lists(st.one_of(st.integers(-3, 64), INT64), max_size=3)),
        offset=draw(st.one_of(st.integers(0, 4096), INT64)),
        nbytes=draw(st.one_of(st.integers(0, 4096), INT64)),
    )


@st.composite
def streams(draw) -> list[pb.GraphChunk]:
    """A valid upload with its header fields or payload tampered with, or a header made up whole."""
    chunks = [pb.GraphChunk() for _ in VALID]
    for mine, original in zip(chunks, VALID, strict=True):
        mine.CopyFrom(original)
    header = chunks[0].header
    kind = draw(st.sampled_from(["field", "spec", "payload", "truncate", "extra", "arbitrary", "no-header"]))
    if kind == "field":
        field = draw(st.sampled_from(["num_nodes", "total_bytes", "num_classes", "graph_hash"]))
        if field == "num_classes":
            header.num_classes = draw(st.integers(-(2**31), 2**31 - 1))
        elif field == "graph_hash":
            header.graph_hash = draw(st.text(max_size=70))
        else:
            setattr(header, field, draw(INT64))
    elif kind == "spec":
        header.tensors[draw(st.integers(0, 2))].CopyFrom(draw(specs()))
    elif kind == "payload":
        i = draw(st.integers(0, len(chunks) - 1))
        data = bytearray(chunks[i].data)
        if data:
            data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
        chunks[i].data = bytes(data)
    elif kind == "truncate":
        chunks = chunks[: draw(st.integers(1, len(chunks) - 1))]
    elif kind == "extra":
        chunks.append(pb.GraphChunk(data=draw(st.binary(min_size=1, max_size=64))))
    elif kind == "arbitrary":
        header.CopyFrom(pb.GraphHeader(
            graph_hash=draw(st.text(max_size=8)), num_nodes=draw(INT64),
            num_classes=draw(st.integers(-(2**31), 2**31 - 1)),
            tensors=draw(st.lists(specs(), max_size=4)), total_bytes=draw(INT64),
        ))  # fmt: skip
        chunks = [chunks[0]] + [pb.GraphChunk(data=b) for b in draw(st.lists(st.binary(max_size=64), max_size=3))]
    else:
        chunks[0].ClearField("header")
    return chunks


def _admit(header: pb.GraphHeader) -> None:
    if held_bytes(header) > ADMIT_BYTES:
        raise BundleTooLarge("over the fuzz limit")


@settings(max_examples=EXAMPLES["decode"], **FUZZ)
@given(streams())
def test_decoder_answers_a_bundle_or_a_bundle_error(chunks):
    try:
        bundle = decode(iter(chunks), _admit)
    except BundleError:
        return
    assert bundle.nbytes <= ADMIT_BYTES
    assert (
        bundle.graph_hash
        == make_bundle(bundle.features, bundle.edge_index, bundle.labels, bundle.num_classes).graph_hash
    )


# ---- the same streams over gRPC to a real service process ----------------------------------


@pytest.fixture(scope="module")
def service() -> Iterator[tuple[psutil.Process, str]]:
    with served("gnn", "--max-upload-bytes", str(64 << 20)) as running:
        yield running


@pytest.fixture(scope="module")
def upload(service):
    channel = grpc.insecure_channel(service[1], options=[("grpc.max_send_message_length", MAX_MESSAGE_BYTES)])
    stub, health = pb_grpc.MethodServiceStub(channel), health_pb2_grpc.HealthStub(channel)
    rss = [service[0].memory_info().rss]
    yield stub, health, rss
    grown = service[0].memory_info().rss - rss[0]
    channel.close()
    assert grown < RSS_BOUND_BYTES, f"the service grew by {grown >> 20} MiB over the upload fuzz"


ANSWERS = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED}


@settings(max_examples=EXAMPLES["upload"], **FUZZ)
@given(streams(), st.booleans())
def test_service_answers_every_upload_with_a_status_it_means(upload, chunks, fresh):
    stub, health, _ = upload
    if fresh and chunks[0].HasField("header"):  # not already held: the service decodes it in full
        chunks[0].header.graph_hash = "f" * 64
    try:
        stub.UploadGraph(iter(chunks), timeout=HANG_S)
    except grpc.RpcError as exc:
        assert exc.code() in ANSWERS, f"{exc.code().name}: {exc.details()}"
    assert (
        health.Check(health_pb2.HealthCheckRequest(), timeout=HANG_S).status == health_pb2.HealthCheckResponse.SERVING
    )


# ---- datasets add ---------------------------------------------------------------------------


def arrays(dtypes, max_dims=2, max_side=12):
    from hypothesis.extra import numpy as hnp

    return hnp.arrays(
        st.sampled_from(dtypes), hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=max_side)
    )


@st.composite
def user_files(draw) -> dict[str, np.ndarray]:
    floats, ints = ["float32", "float64", "float16"], ["int64", "int32", "uint8", "int8"]
    n = draw(st.integers(0, 12))
    raw: dict[str, np.ndarray] = {}
    x_key = draw(st.sampled_from(["x", "features", "node_features", "nothing"]))
    raw[x_key] = draw(
        st.one_of(
            arrays(floats + ints + ["bool", "complex64", "U3"]), st.just(np.random.default_rng(n).normal(size=(n, 3)))
        )
    )
    raw[draw(st.sampled_from(["edge_index", "edges"]))] = draw(
        st.one_of(arrays(ints + floats), st.just(np.stack([np.arange(n), (np.arange(n) + 1) % max(n, 1)])))
    )
    raw[draw(st.sampled_from(["y", "labels"]))] = draw(
        st.one_of(arrays(ints + floats, max_dims=2), st.just(np.arange(n) % 3))
    )
    if draw(st.booleans()):
        for part in ("train_mask", "val_mask", "test_mask"):
            raw[part] = draw(arrays(["bool", "int64"], max_dims=2))
    return raw


@settings(max_examples=EXAMPLES["datasets_add"], **FUZZ)
@given(user_files(), st.sampled_from([".npz", ".pt", ".bin"]))
def test_datasets_add_registers_or_refuses_in_one_line(tmp_path_factory, monkeypatch, raw, suffix):
    root = tmp_path_factory.mktemp("add")
    monkeypatch.setenv("NODEGROUND_CACHE", str(root / "cache"))
    path = root / f"g{suffix}"
    if suffix == ".npz":
        np.savez(path, **raw)
    elif suffix == ".pt":
        import torch

        torch.save(
            {
                k: torch.from_numpy(np.ascontiguousarray(v)) if v.dtype.kind in "fiub" and v.dtype != np.uint16 else v
                for k, v in raw.items()
            },
            path,
        )
    else:
        buffer = io.BytesIO()
        np.savez(buffer, **raw)
        path.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])  # a damaged file
    try:
        graph = add_user_dataset(path, "fuzzed")
    except UserDatasetError as exc:
        assert "\n" not in str(exc)
        return
    assert graph.num_nodes >= 3 and graph.num_classes >= 2 and graph.x.shape[1] >= 1


# ---- CLI flags ------------------------------------------------------------------------------

TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
NUMBER = st.one_of(
    st.integers(-(10**25), 10**25).map(str), st.floats(allow_nan=True, allow_infinity=True).map(str), TEXT
)


@st.composite
def run_flags(draw) -> list[str]:
    """`orchestrator run` with every flag drawn from plausible and hostile values."""
    flags = {
        "--methods": draw(st.one_of(st.sampled_from(["mlp", "mlp,gcn", "gcn,", ",", "nosuch"]), TEXT)),
        "--datasets": draw(
            st.one_of(st.sampled_from(["synthetic-tiny", "cora", "texas,synthetic-tiny", "nope"]), TEXT)
        ),
        "--regimes": draw(st.one_of(st.sampled_from(["10/10/80", "public", "50/25/25,10/10/80", "1/1/98"]), TEXT)),
        "--splits": draw(st.one_of(st.sampled_from(["0", "0,1,4", "5", "-1", "0,,1"]), TEXT)),
        "--budget": draw(NUMBER),
        "--time-limit": draw(NUMBER),
        "--parallel": draw(NUMBER),
        "--services": draw(st.one_of(st.just("embedded"), TEXT)),
    }
    chosen = draw(st.lists(st.sampled_from(sorted(flags)), unique=True))
    args = ["run"]
    for flag in sorted(set(chosen) | {"--methods", "--datasets", "--services"}):
        args += [flag, flags[flag]]
    if draw(st.booleans()):
        args += ["--endpoint", draw(st.one_of(st.just("mlp=127.0.0.1:1"), TEXT))]
    return args


@pytest.fixture(scope="module")
def held_store(tmp_path_factory):
    """A store another writer holds: a run whose flags all pass stops at the claim, before any service starts."""
    path = tmp_path_factory.mktemp("cli") / "runs.sqlite"
    with Store(path) as store:
        store.claim()
        yield path


@settings(max_examples=EXAMPLES["cli"], **FUZZ)
@given(run_flags())
def test_run_flags_end_in_one_line_never_a_traceback(held_store, args):
    result = CliRunner().invoke(app, [*args, "--store", str(held_store)])
    assert result.exit_code == 2, (args, result.output, result.exception)
    assert "Traceback" not in result.output and result.output.strip().startswith("error: "), (args, result.output)
    assert result.output.strip().count("\n") == 0, result.output  # a usage error too: one line, no usage box


# ---- settings -------------------------------------------------------------------------------

SETTING_VALUES = st.one_of(
    st.sampled_from(["abc", "-1", "1e99", "", " ", "0", "1", "2", "8e9", "1.5", "0x10", "1_000", "+5", "nan", "-inf"]),
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    TEXT,
)


def _parses(setting, raw: str) -> bool:
    try:
        setting.parse(raw)
    except SettingError:
        return False
    return True


def _one_error_line(text: str, name: str) -> None:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {name}=") and "Traceback" not in text, text


@settings(max_examples=EXAMPLES["service_settings"], **FUZZ)
@given(st.sampled_from([*SERVICE_SETTINGS, PORT, *SERVICE_LIMITS]), SETTING_VALUES, st.booleans())
def test_a_service_setting_is_taken_or_refused_in_one_line(monkeypatch, capsys, setting, raw, as_flag):
    """`methods.serve --check` with one generated setting, as its flag or its variable: exit 0 where the rule
    accepts the value, else exit 2 and one line naming it."""
    as_flag = (as_flag and bool(setting.flag)) or not setting.env  # the port has no variable, THREADS no flag
    with monkeypatch.context() as env:
        if not as_flag:
            env.setenv(setting.env, raw)
        try:
            code = serve_main(["--family", "gnn", "--check", *([f"{setting.flag}={raw}"] if as_flag else [])])
        except SystemExit as exit_:
            code = exit_.code
    err = capsys.readouterr().err
    accepted = _parses(setting, raw) or (not as_flag and not raw.strip())  # an empty variable is an unset one
    assert code == (0 if accepted else 2), (setting.env or setting.flag, raw, err)
    if not accepted:
        _one_error_line(err, setting.flag if as_flag else setting.env)


@settings(max_examples=EXAMPLES["settings"], **FUZZ)
@given(st.sampled_from(ORCHESTRATOR_SETTINGS), SETTING_VALUES)
def test_an_orchestrator_setting_is_taken_or_refused_in_one_line(monkeypatch, setting, raw):
    """Any command with one generated variable in its environment: it runs, or exits 2 with one line naming it."""
    with monkeypatch.context() as env:
        env.setenv(setting.env, raw)
        result = CliRunner().invoke(app, ["methods", "list"])
    accepted = _parses(setting, raw) or not raw.strip()
    assert result.exit_code == (0 if accepted else 2), (setting.env, raw, result.output, result.exception)
    if not accepted:
        _one_error_line(result.output, setting.env)
