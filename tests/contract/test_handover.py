"""The same-host handover: a sealed memfd passed over the service's socket, checked as a stream is, and no one able
to change what was checked."""

from __future__ import annotations

import fcntl
import os
import socket
import time

import numpy as np
import pytest

from contract import handover
from contract.handover import SEALS, HandoverDesk, attach, hand_over, sealed
from contract.wire import BundleError, BundleTooLarge, decode, encode, graph_header, make_bundle, payload
from tests.conftest import HANG_S, tiny_graph


def bundle(n: int = 60):
    x, e, y = tiny_graph(n)
    return make_bundle(x, e, y, 3)


def test_a_sealed_payload_can_be_neither_written_nor_resized_through_any_descriptor_of_it():
    b = bundle()
    fd = sealed(payload(b))
    try:
        assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS == SEALS
        reopened = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)  # what another process of this user could do
        try:
            for target in (fd, reopened):
                with pytest.raises(PermissionError):
                    os.pwrite(target, b"\0", 0)
                for size in (0, b.nbytes + 1):
                    with pytest.raises(PermissionError):
                        os.ftruncate(target, size)
        finally:
            os.close(reopened)
        assert os.pread(fd, b.nbytes + 1, 0) == b"".join(payload(b))
    finally:
        os.close(fd)


def test_an_attached_graph_is_the_streamed_one_and_writing_to_it_leaves_the_memfd_alone():
    b = bundle()
    fd = sealed(payload(b))
    try:
        got = attach(fd, graph_header(b))
        streamed = decode(encode(b))
        assert got.graph_hash == streamed.graph_hash == b.graph_hash
        for mine, theirs in zip(got.tensors(), streamed.tensors(), strict=True):
            np.testing.assert_array_equal(mine, theirs)
        got.features[0, 0] += 1.0  # a method may write to its arrays: the mapping is private
        assert os.pread(fd, b.nbytes, 0) == b"".join(payload(b))
    finally:
        os.close(fd)


def _memfd(data: bytes, seals: int) -> int:
    fd = os.memfd_create("test", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, data)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda data, tmp: _memfd(data, 0), "not a memfd sealed"),
        (lambda data, tmp: _memfd(data, fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK), "not a memfd sealed"),  # grows
        (lambda data, tmp: _memfd(data, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW), "not a memfd sealed"),  # writable
        (lambda data, tmp: os.open(tmp, os.O_RDONLY | os.O_DIRECTORY), "not a memfd sealed"),
        (lambda data, tmp: os.pipe()[0], "not a memfd sealed"),
        (lambda data, tmp: _memfd(data[:-1], SEALS), "the header announces"),
        (lambda data, tmp: _memfd(data + b"\0", SEALS), "the header announces"),
        (lambda data, tmp: _memfd(b"\x01" + data[1:], SEALS), "hash mismatch"),
    ],
)
def test_a_descriptor_that_could_change_is_not_of_its_size_or_not_its_content_is_refused(tmp_path, make, message):
    b = bundle()
    fd = make(b"".join(payload(b)), tmp_path)
    try:
        with pytest.raises(BundleError, match=message):
            attach(fd, graph_header(b))
    finally:
        os.close(fd)


def test_a_handed_over_graph_is_admitted_from_its_header_like_an_upload():
    b = bundle()
    fd = sealed(payload(b))
    seen = []

    def refuse(header):
        seen.append(header.graph_hash)
        raise BundleTooLarge("too big")

    try:
        with pytest.raises(BundleTooLarge):
            attach(fd, graph_header(b), admit=refuse)
        assert seen == [b.graph_hash]
        header = graph_header(b)
        header.total_bytes += 8  # the same header check as the stream's, before the descriptor is looked at
        with pytest.raises(BundleError, match="total_bytes"):
            attach(fd, header)
    finally:
        os.close(fd)


def test_the_desk_hands_each_descriptor_to_one_taker_once_and_removes_its_socket(tmp_path):
    desk = HandoverDesk(str(tmp_path))
    fd = sealed([memoryview(b"abc")])
    try:
        token = hand_over(str(tmp_path), fd, HANG_S)
        assert desk.take("nonsense") is None
        taken = desk.take(token)
        assert taken is not None and taken != fd and os.pread(taken, 8, 0) == b"abc"
        os.close(taken)
        assert desk.take(token) is None
    finally:
        desk.close()
        os.close(fd)
    assert not list(tmp_path.iterdir())
    with pytest.raises(OSError):  # no one listens any more: the client streams
        hand_over(str(tmp_path), fd, HANG_S)


def test_the_desk_holds_a_bounded_number_of_descriptors_and_closes_what_waits_too_long(tmp_path, monkeypatch):
    desk = HandoverDesk(str(tmp_path))
    fd = sealed([memoryview(b"abc")])
    try:
        tokens = [hand_over(str(tmp_path), fd, HANG_S) for _ in range(handover.MAX_PENDING)]
        with pytest.raises(OSError, match="waiting for AttachGraph; stream this one"):
            hand_over(str(tmp_path), fd, HANG_S)
        monkeypatch.setattr(handover, "HANDOVER_TTL_S", 0.0)
        time.sleep(0.01)
        assert all(desk.take(token) is None for token in tokens)  # expired: closed, not handed out
        with socket.socket(socket.AF_UNIX) as sock:  # a connection that passes two descriptors gets neither kept
            sock.connect(handover.socket_path(str(tmp_path)))
            socket.send_fds(sock, [b"graph"], [fd, fd])
            assert sock.recv(256).startswith(b"error pass exactly one descriptor")
    finally:
        desk.close()
        os.close(fd)
