"""Who may open a run store how: readers open read-only stores read-only (a read-only mount or
directory, WAL and all); a second orchestrator on a store being written is refused in one line,
and the claim dies with its holder, even under kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.store import Store, StoreBusy, drop_claim
from orchestrator.trial_table.load import load_trials
from tests.conftest import TINY_SWEEP
from tests.orchestrator.cli.test_cli import _fake_store

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def read_only_store(tmp_path):
    """A valid WAL store in a place SQLite cannot write: a read-only bind mount (root) or a chmod a-w directory."""
    source = tmp_path / "rw"
    source.mkdir()
    _fake_store(source / "runs.sqlite")
    assert not (source / "runs.sqlite-shm").exists()  # a cleanly closed WAL store: readers must create -shm
    if os.geteuid() != 0:
        source.chmod(0o555)
        yield source / "runs.sqlite"
        source.chmod(0o755)
        return
    view = tmp_path / "ro"
    view.mkdir()
    if subprocess.run(["mount", "--bind", "-o", "ro", str(source), str(view)], capture_output=True).returncode != 0:
        pytest.skip("running as root without the right to mount: a read-only place cannot be made here")
    try:
        yield view / "runs.sqlite"
    finally:
        subprocess.run(["umount", str(view)], check=False)


def test_show_export_and_report_read_a_read_only_store(read_only_store, tmp_path):
    with pytest.raises(OSError):
        (read_only_store.parent / "probe").touch()  # the place really is read-only
    shown = runner.invoke(app, ["show", "--store", str(read_only_store)])
    assert shown.exit_code == 0, shown.output
    assert "gcn" in shown.output
    exported = runner.invoke(
        app, ["export", "--store", str(read_only_store), "--format", "csv", "--out", str(tmp_path / "out")]
    )
    assert exported.exit_code == 0, exported.output
    assert (tmp_path / "out" / "trials.csv").is_file()
    assert len(load_trials(read_only_store)) == 8  # what `report` reads


def _holder(path: Path) -> subprocess.Popen:
    code = (
        "import sys; from orchestrator.store import Store; s = Store(sys.argv[1]); s.claim(); print('held', "
        "flush=True); sys.stdin.read()"
    )  # holds the claim until killed, however long the test takes (it was 120 s)
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{REPO}:{REPO / 'proto'}"},
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_orchestrator_is_refused_and_the_claim_dies_with_its_holder(tmp_path):
    path = tmp_path / "runs.sqlite"
    holder = _holder(path)
    try:
        with (
            Store(path) as store,
            pytest.raises(StoreBusy, match=rf"being written by another orchestrator \(pid {holder.pid} on "),
        ):
            store.claim()
        result = runner.invoke(app, ["run", *TINY_SWEEP, "--budget", "1", "--store", str(path)])
        assert (
            result.exit_code == 2 and result.output.startswith("error: ") and result.output.strip().count("\n") == 0
        ), result.output
        assert "another orchestrator" in result.output and "--store" in result.output
        assert runner.invoke(app, ["show", "--store", str(path)]).exit_code in (
            0,
            2,
        )  # readers never wait for the writer
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with Store(path) as store:
        store.claim()  # kill -9 released it
        store.claim()  # and claiming twice is a no-op for the holder


def test_the_claim_is_the_files_whatever_name_reaches_it(tmp_path):
    """Finding 10: a symlink or a hard link to a store being written bypassed the one-writer rule (the lock was the
    given name's, not the file's)."""
    path = tmp_path / "runs.sqlite"
    holder = _holder(path)
    (tmp_path / "elsewhere").mkdir()
    symlink, hardlink = tmp_path / "elsewhere" / "link.sqlite", tmp_path / "elsewhere" / "same.sqlite"
    symlink.symlink_to(path)
    os.link(path, hardlink)
    try:
        for name in (symlink, hardlink):
            with Store(name) as store, pytest.raises(StoreBusy, match="being written by another orchestrator"):
                store.claim()
            result = runner.invoke(app, ["run", *TINY_SWEEP, "--budget", "1", "--store", str(name)])
            assert result.exit_code == 2 and "being written by another orchestrator" in result.output, result.output
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with Store(hardlink) as store:
        store.claim()  # the holder is gone: the file is free under any name


def test_a_finished_stores_claim_file_is_dropped_only_when_no_one_holds_it(tmp_path):
    """A submission bundle holds its sealed files alone, and the sweep's claim file is none of them (a contributor's
    `submit` made a bundle its own report refused): it goes once the writer is done, never under a writer."""
    path = tmp_path / "trials.sqlite"
    lock = tmp_path / "trials.sqlite.lock"
    holder = _holder(path)
    try:
        with pytest.raises(StoreBusy, match="being written by another orchestrator"):
            drop_claim(path)
        assert lock.exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    drop_claim(path)
    assert not lock.exists() and path.exists()
    with Store(path) as store:
        store.claim()  # and the store is claimable again


@pytest.mark.parametrize(
    "command",
    [
        ["plan", *TINY_SWEEP, "--store", "{fifo}"],
        ["run", *TINY_SWEEP, "--store", "{fifo}"],
        ["show", "--store", "{fifo}"],
        ["report", "--store", "{fifo}", "--out", "{site}"],
        ["export", "--store", "{fifo}", "--out", "{site}"],
        ["merge", "--into", "{site}/all.sqlite", "{fifo}"],
    ],
)
def test_a_store_path_that_is_no_regular_file_is_refused_not_waited_on(tmp_path, command):
    """A FIFO given as a store would hang SQLite's first read (as a FIFO given as a graph or token file did)."""
    fifo = tmp_path / "runs.sqlite"
    os.mkfifo(fifo)
    args = [part.format(fifo=fifo, site=tmp_path / "site") for part in command]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "not a regular file" in result.output
