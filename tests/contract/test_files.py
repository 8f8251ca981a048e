"""Reading a file a user names: a regular file only, never more of it than its cap, refusals in one line."""

from __future__ import annotations

import os

import pytest

from contract.files import FileRefused, check_regular, json_field, read_bounded, read_json


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_a_fifo_a_device_or_a_directory_is_refused_before_a_byte_is_read(fifo, tmp_path):
    """A FIFO once hung a read for ever (no writer), /dev/zero took the machine's memory."""
    with pytest.raises(FileRefused, match=r"is a FIFO, not a regular file"):
        read_bounded(fifo, 100, "the token file")
    with pytest.raises(FileRefused, match=r"/dev/zero is a character device, not a regular file"):
        read_bounded("/dev/zero", 100, "the token file")
    with pytest.raises(FileRefused, match=r"is a directory, not a regular file"):
        check_regular(tmp_path, "the store")
    with pytest.raises(FileRefused, match=r"No such file or directory"):
        check_regular(tmp_path / "absent", "the store")


def test_a_file_larger_than_its_cap_is_refused_from_its_size(tmp_path):
    sparse = tmp_path / "sparse.json"
    with open(sparse, "wb") as f:
        f.truncate(300 << 30)  # 300 GiB, holding nothing: a submission.json once hung a read of it
    with pytest.raises(FileRefused, match=r"holds 300.0 GiB, more than the 1.0 MiB it may hold"):
        read_json(sparse, "the submission", limit=1 << 20)
    small = tmp_path / "small"
    small.write_bytes(b"x" * 10)
    assert read_bounded(small, 10, "a file") == b"x" * 10
    with pytest.raises(FileRefused, match="more than the 9 bytes"):
        read_bounded(small, 9, "a file")


def test_json_is_checked_into_one_line(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{nope")
    with pytest.raises(FileRefused, match=r"the registry .*x.json is not valid JSON"):
        read_json(path, "the registry")
    document = {"name": 3, "flag": True, "items": []}
    assert json_field(document, "items", list, path, "the registry") == []
    assert json_field(document, "other", str, path, "the registry", default="") == ""
    with pytest.raises(FileRefused, match=r"'name' is a number, not a string"):
        json_field(document, "name", str, path, "the registry")
    with pytest.raises(FileRefused, match=r"'flag' is true or false, not a number"):
        json_field(document, "flag", int, path, "the registry")
    with pytest.raises(FileRefused, match=r"lacks the field 'other'"):
        json_field(document, "other", str, path, "the registry")
