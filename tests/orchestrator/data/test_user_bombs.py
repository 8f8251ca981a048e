"""`datasets add` refuses what it cannot safely decompress or interpret, from headers and tensor kinds, in one line.

A decompression bomb is refused before any array byte is read (its members' declared shapes against the
compressed sizes and the memory budget), so refusing a 1 GiB-declared bomb costs milliseconds and no memory.
"""

from __future__ import annotations

import io
import resource
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.data.registry import add_user_dataset
from orchestrator.data.user import MEMORY_ENV, UserDatasetError, check_archive_sizes
from tests.orchestrator.data.test_user_datasets import good_arrays

BOMB_SHAPE = (262_144, 1_024)  # float32 zeros: 1 GiB declared
BLOCK = 1 << 24


def npz_bomb(path: Path, shape: tuple[int, int] = BOMB_SHAPE, name: str = "x") -> Path:
    """An .npz whose one member inflates to ``shape`` float32 zeros (about 1 MiB on disk for 1 GiB)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return zip_bomb(path, f"{name}.npy", header.getvalue(), int(np.prod(shape)) * 4)


def zip_bomb(path: Path, member_name: str, head: bytes, total: int) -> Path:
    """A zip archive of one member, ``head`` then ``total`` zero bytes, written without compressing them all: one
    fully flushed deflate block of 16 MiB of zeros is repeated."""
    assert total % BLOCK == 0
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = deflate.compress(head) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(bytes(BLOCK)) + deflate.flush(zlib.Z_FULL_FLUSH)  # the same after every full flush
    last = deflate.flush(zlib.Z_FINISH)
    data = first + block * (total // BLOCK) + last
    crc = zlib.crc32(head)
    zeros = bytes(BLOCK)
    for _ in range(total // BLOCK):
        crc = zlib.crc32(zeros, crc)
    member = member_name.encode()
    size = len(head) + total
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0x21, crc, len(data), size, len(member), 0)
    central = struct.pack(
        "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0x21, crc, len(data), size, len(member), 0, 0, 0, 0, 0, 0
    )
    offset = len(local) + len(member) + len(data)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(central) + len(member), offset, 0)
    path.write_bytes(local + member + data + central + member + end)
    return path


def test_the_bomb_is_what_it_claims(tmp_path):
    """The fixture itself: a real archive whose member inflates to the declared gigabyte (checked on a slice)."""
    import zipfile

    bomb = npz_bomb(tmp_path / "bomb.npz")
    assert bomb.stat().st_size < 2 << 20
    with zipfile.ZipFile(bomb) as archive:
        info = archive.getinfo("x.npy")
        assert info.file_size == 128 + (1 << 30)
        with archive.open(info) as member:
            member.read(128)
            assert member.read(1 << 20) == bytes(1 << 20)


def test_a_1_gib_declared_bomb_is_refused_before_reading_with_the_cli_and_the_api(cache, tmp_path):
    bomb = npz_bomb(tmp_path / "bomb.npz")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.process_time()
    result = CliRunner().invoke(app, ["datasets", "add", str(bomb), "--name", "bomb"])
    cpu = time.process_time() - started
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    print(result.output.strip(), f"[{cpu:.3f} s CPU, peak RSS grew {grown / 2**20:.1f} MiB]")
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert result.output.startswith("error: bomb.npz: array 'x' declares 1.00 GiB (262144x1024 float32)")
    assert "decompression bomb" in result.output
    assert grown < 64 << 20  # nothing was inflated: the process's peak grew by far less than the gigabyte
    with pytest.raises(UserDatasetError, match="decompression bomb"):
        add_user_dataset(bomb, "bomb")


def test_declared_arrays_beyond_the_memory_budget_are_refused(cache, tmp_path, monkeypatch):
    x, edges, y = good_arrays()
    path = tmp_path / "g.npz"
    np.savez(path, x=x, edge_index=edges, y=y)
    check_archive_sizes(path, budget=1 << 20)
    with pytest.raises(UserDatasetError, match=r"over the memory budget of 0\.00 GiB"):
        check_archive_sizes(path, budget=100)
    monkeypatch.setenv(MEMORY_ENV, "100")
    with pytest.raises(UserDatasetError, match="over the memory budget"):
        add_user_dataset(path, "small-budget")
    monkeypatch.setenv(MEMORY_ENV, "lots")
    with pytest.raises(UserDatasetError, match=f"{MEMORY_ENV}=.lots.: must be an integer in"):
        add_user_dataset(path, "bad-budget")


def test_a_pt_archive_that_inflates_like_a_bomb_is_refused_before_torch_reads_it(cache, tmp_path):
    """torch.load inflates deflated members (a 66 KB .pt gave a 64 MiB tensor): the same header check applies."""
    bomb = zip_bomb(tmp_path / "bomb.pt", "archive/data/0", b"", 1 << 30)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = CliRunner().invoke(app, ["datasets", "add", str(bomb), "--name", "bomb"])
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith("error: bomb.pt: member 'archive/data/0' declares 1.00 GiB from "), result.output
    assert "decompression bomb" in result.output and grown < 64 << 20


def test_a_pt_beyond_the_memory_budget_is_refused_and_one_within_it_registers(cache, tmp_path, monkeypatch):
    x, _, _ = good_arrays()
    path = _pt(tmp_path, "plain", torch.tensor(x))
    monkeypatch.setenv(MEMORY_ENV, "100")
    with pytest.raises(UserDatasetError, match="plain.pt: the file holds .* over the memory budget of 100 bytes"):
        add_user_dataset(path, "plain")
    monkeypatch.delenv(MEMORY_ENV)
    assert add_user_dataset(path, "plain").num_nodes == 30


def _pt(tmp_path, name, x):
    _, edges, y = good_arrays()
    path = tmp_path / f"{name}.pt"
    torch.save({"x": x, "edge_index": torch.tensor(edges), "y": torch.tensor(y)}, path)
    return path


@pytest.mark.parametrize(
    "name, make, message",
    [
        ("sparse", lambda x: torch.tensor(x).to_sparse(), "x is a sparse tensor (torch.sparse_coo)"),
        ("meta", lambda x: torch.empty(x.shape, device="meta"), "x is on the meta device"),
        ("complex", lambda x: torch.tensor(x).to(torch.complex64), "x is complex"),
    ],
)
def test_tensor_kinds_that_hold_no_plain_numbers_are_refused_in_one_line(cache, tmp_path, name, make, message):
    x, _, _ = good_arrays()
    path = _pt(tmp_path, name, make(x))
    result = CliRunner().invoke(app, ["datasets", "add", str(path), "--name", name])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"error: {name}.pt: {message}"), result.output


def test_bfloat16_features_are_widened_and_registered(cache, tmp_path):
    x, _, _ = good_arrays()
    graph = add_user_dataset(_pt(tmp_path, "half", torch.tensor(x).to(torch.bfloat16)), "half")
    assert graph.x.dtype == np.float32 and graph.num_nodes == 30


def test_complex_and_non_numeric_npz_arrays_are_refused(cache, tmp_path):
    x, edges, y = good_arrays()
    np.savez(tmp_path / "c.npz", x=x.astype(np.complex64), edge_index=edges, y=y)
    with pytest.raises(UserDatasetError, match="array 'x' is complex"):
        add_user_dataset(tmp_path / "c.npz", "c")
    np.savez(tmp_path / "s.npz", x=x.astype("U3"), edge_index=edges, y=y)
    with pytest.raises(UserDatasetError, match="array 'x' is not numeric"):
        add_user_dataset(tmp_path / "s.npz", "s")


def test_a_raw_pickle_is_refused_without_torch_s_warning(cache, tmp_path, capfd):
    import pickle

    (tmp_path / "raw.pt").write_bytes(pickle.dumps({"x": [1.0]}))
    result = CliRunner().invoke(app, ["datasets", "add", str(tmp_path / "raw.pt"), "--name", "raw"])
    assert result.exit_code == 2 and result.output.count("\n") == 1 and result.output.startswith("error: "), (
        result.output
    )
    assert "Warning" not in capfd.readouterr().err
