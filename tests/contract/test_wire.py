import numpy as np
import pytest

from contract.v1 import method_service_pb2 as pb
from contract.wire import (
    MAX_MESSAGE_BYTES,
    BundleError,
    BundleTooLarge,
    decode,
    decode_probabilities,
    encode,
    encode_probabilities,
    make_bundle,
)
from tests.conftest import tiny_graph


def bundle(n=60):
    x, e, y = tiny_graph(n)
    return make_bundle(x, e, y, 3)


def test_round_trip_preserves_tensors_and_hash():
    b = bundle()
    back = decode(encode(b, chunk_bytes=100))
    assert back.graph_hash == b.graph_hash
    np.testing.assert_array_equal(back.features, b.features)
    np.testing.assert_array_equal(back.edge_index, b.edge_index)
    np.testing.assert_array_equal(back.labels, b.labels)


def test_hash_depends_on_content_including_hidden_labels():
    x, e, y = tiny_graph()
    a = make_bundle(x, e, y, 3)
    y2 = y.copy()
    y2[0] = -1
    assert make_bundle(x, e, y2, 3).graph_hash != a.graph_hash
    assert make_bundle(x, e, y, 3).graph_hash == a.graph_hash


def test_large_graph_streams_in_messages_under_the_limit():
    rng = np.random.default_rng(0)
    n = 20000
    b = make_bundle(
        rng.normal(size=(n, 64)).astype(np.float32), rng.integers(0, n, (2, 50000)), rng.integers(0, 3, n), 3
    )
    chunks = list(encode(b))
    assert len(chunks) > 2
    assert max(c.ByteSize() for c in chunks) < MAX_MESSAGE_BYTES
    assert decode(iter(chunks)).graph_hash == b.graph_hash


def test_corrupted_or_truncated_uploads_are_refused():
    chunks = list(encode(bundle(), chunk_bytes=64))
    flipped = [pb.GraphChunk() for _ in chunks]
    for src, dst in zip(chunks, flipped, strict=True):
        dst.CopyFrom(src)
    flipped[1].data = bytes([flipped[1].data[0] ^ 1]) + flipped[1].data[1:]
    with pytest.raises(BundleError, match="hash mismatch"):
        decode(iter(flipped))
    with pytest.raises(BundleError, match="ended after"):
        decode(iter(chunks[:-1]))
    with pytest.raises(BundleError, match="header"):
        decode(iter(chunks[1:]))


def test_bad_bundles_are_refused():
    x, e, y = tiny_graph()
    with pytest.raises(BundleError, match="outside"):
        make_bundle(x, np.array([[0], [999]]), y, 3)
    with pytest.raises(BundleError, match="NaN"):
        make_bundle(np.full_like(x, np.nan), e, y, 3)
    with pytest.raises(BundleError, match="labels must lie"):
        make_bundle(x, e, y + 5, 3)


def test_probabilities_round_trip_in_row_chunks():
    probs = np.random.default_rng(1).dirichlet(np.ones(7), size=1000).astype(np.float32)
    stats = pb.CallStats(seconds=1.5, peak_rss_bytes=10)
    chunks = list(encode_probabilities(probs, stats, chunk_bytes=4 * 7 * 100))
    assert len(chunks) == 10 and chunks[-1].stats.seconds == 1.5
    back, got = decode_probabilities(iter(chunks), 1000)
    np.testing.assert_array_equal(back, probs)
    assert got.peak_rss_bytes == 10
    with pytest.raises(BundleError, match="covers"):
        decode_probabilities(iter(chunks[:-1]), 1000)


@pytest.mark.parametrize(
    "chunk",
    [
        pb.PredictChunk(row_offset=0, num_rows=4, num_classes=3, probabilities=b"\0" * 3),  # not a multiple of 4
        pb.PredictChunk(row_offset=0, num_rows=4, num_classes=3, probabilities=b"\0" * 49),  # N*C*4 + 1
        pb.PredictChunk(row_offset=0, num_rows=-1, num_classes=3, probabilities=b""),
        pb.PredictChunk(row_offset=0, num_rows=4, num_classes=-3, probabilities=b""),
        pb.PredictChunk(row_offset=0, num_rows=1, num_classes=2**31 - 1, probabilities=b"\0" * 16),
        pb.PredictChunk(row_offset=0, num_rows=4, num_classes=3, probabilities=b"\0" * 48),  # no stats anywhere
    ],
)
def test_every_malformed_prediction_chunk_is_a_bundle_error(chunk):
    """Checked before it is interpreted: never numpy's own ValueError, never an allocation the reply chose."""
    with pytest.raises(BundleError):
        decode_probabilities(iter([chunk]), 4)


def _header_chunk(b, **changes):
    first = next(encode(b))
    header = pb.GraphHeader()
    header.CopyFrom(first.header)
    for key, value in changes.items():
        setattr(header, key, value)
    return header


def test_admit_sees_the_header_before_any_buffer_is_allocated():
    from contract.wire import held_bytes

    b = bundle()
    seen = []

    def refuse(header):
        seen.append(held_bytes(header))
        raise BundleTooLarge("too big")

    def stream():
        yield pb.GraphChunk(header=_header_chunk(b))
        raise AssertionError("the payload was read although the header was refused")

    with pytest.raises(BundleTooLarge):
        decode(stream(), admit=refuse)
    assert seen == [b.nbytes + b.num_nodes * b.num_classes * 4]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"num_classes": 2 * 10**7}, "num_classes must lie in"),
        ({"num_classes": 1}, "num_classes must lie in"),
        ({"num_nodes": 7}, "num_nodes 7 disagrees"),
    ],
)
def test_header_counts_are_bounded_by_the_graph(changes, message):
    b = bundle()
    chunks = list(encode(b))
    header = _header_chunk(b, **changes)
    chunks[0] = pb.GraphChunk(header=header, data=chunks[0].data)
    with pytest.raises(BundleError, match=message):
        decode(iter(chunks))


def test_shapes_whose_product_overflows_int64_are_refused():
    b = bundle()
    header = _header_chunk(b)
    header.tensors[0].shape[:] = [2**32, 2**32]  # np.prod would wrap to 0
    header.tensors[0].nbytes = 0
    with pytest.raises(BundleError, match="disagree with its shape"):
        decode(iter([pb.GraphChunk(header=header)]))
