"""Bring your own dataset: good files register and run like catalog tasks; bad ones are refused clearly."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.data.registry import DatasetError, add_user_dataset, load_dataset, resolve_name
from orchestrator.data.splits import graph_split
from orchestrator.data.user import UserDatasetError, user_registry
from tests.conftest import HANG_S, REPO, wait_for


def good_arrays(n: int = 30):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    src = np.arange(n)
    edges = np.stack([src, (src + 1) % n])
    y = np.arange(n) % 3
    return x, edges, y


def write_npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def test_npz_registers_and_loads_like_a_catalog_task(cache, tmp_path):
    x, edges, y = good_arrays()
    path = write_npz(tmp_path / "mine.npz", x=x, edge_index=edges.T, y=y)  # E x 2 is accepted too
    graph = add_user_dataset(path, "my-graph")
    assert resolve_name("MY-GRAPH") == "my-graph"
    loaded = load_dataset("my-graph")
    assert loaded.content_hash == graph.content_hash and loaded.num_classes == 3
    assert graph_split(loaded, "50/25/25", 0).train.size > 0


def test_saved_pyg_data_with_masks(cache, tmp_path):
    from torch_geometric.data import Data

    x, edges, y = good_arrays()
    train = np.zeros(30, bool)
    train[:10] = True
    val = np.zeros(30, bool)
    val[10:20] = True
    data = Data(
        x=torch.tensor(x),
        edge_index=torch.tensor(edges),
        y=torch.tensor(y),
        train_mask=torch.tensor(train),
        val_mask=torch.tensor(val),
        test_mask=torch.tensor(~(train | val)),
    )
    torch.save(data, tmp_path / "g.pt")
    add_user_dataset(tmp_path / "g.pt", "pyg-graph")
    assert graph_split(load_dataset("pyg-graph"), "public", 0).val.tolist() == list(range(10, 20))


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda x, e, y: (x, np.concatenate([e, [[0], [99]]], axis=1), y),
            r"edge endpoints range over \[0, 99\] but node ids are \[0, 30\)",
        ),
        (lambda x, e, y: (x[:, :0], e, y), r"at least one node and one feature column\), got shape \(30, 0\)"),
        (
            lambda x, e, y: (np.where(np.arange(30)[:, None] == 4, np.nan, x), e, y),
            r"features contain NaN or infinite values in 1 rows",
        ),
        (lambda x, e, y: (x, e, np.zeros(30, int)), r"needs at least two classes among labeled nodes, found 1"),
        (lambda x, e, y: (x, e, y[:29]), r"30 feature rows but 29 labels"),
        (
            lambda x, e, y: (x, e, np.where(np.arange(30) < 28, y % 2, 2)),
            r"class 2 .* has 2 labeled node\(s\); every class needs at least 3",
        ),
    ],
    ids=[
        "edge-out-of-range",
        "zero-feature-columns",
        "nan-features",
        "one-class",
        "mismatched-lengths",
        "class-too-small",
    ],
)
def test_bad_datasets_are_refused_with_a_clear_message(cache, tmp_path, mutate, message):
    x, edges, y = mutate(*good_arrays())
    path = write_npz(tmp_path / "bad.npz", x=x, edge_index=edges, y=y)
    with pytest.raises(UserDatasetError, match=message):
        add_user_dataset(path, "bad")
    with pytest.raises(LookupError):
        resolve_name("bad")  # nothing was registered


def test_missing_arrays_and_reserved_names(cache, tmp_path):
    x, edges, _ = good_arrays()
    with pytest.raises(UserDatasetError, match="no y array"):
        add_user_dataset(write_npz(tmp_path / "nolabels.npz", x=x, edge_index=edges), "nolabels")
    x, edges, y = good_arrays()
    with pytest.raises(UserDatasetError, match="already a built-in dataset name"):
        add_user_dataset(write_npz(tmp_path / "c.npz", x=x, edge_index=edges, y=y), "cora")


def test_cli_add_reports_one_line_and_nonzero_exit(cache, tmp_path):
    x, edges, y = good_arrays()
    ok = CliRunner().invoke(
        app, ["datasets", "add", str(write_npz(tmp_path / "ok.npz", x=x, edge_index=edges, y=y)), "--name", "okgraph"]
    )
    assert ok.exit_code == 0 and "registered okgraph: 30 nodes" in ok.output
    bad = CliRunner().invoke(
        app,
        [
            "datasets",
            "add",
            str(write_npz(tmp_path / "b.npz", x=x, edge_index=edges, y=np.zeros(30, int))),
            "--name",
            "b",
        ],
    )
    assert bad.exit_code == 2
    assert bad.output.strip().count("\n") == 0 and bad.output.startswith("error: b: needs at least two classes")


def _masks(train, val, test, n=30):
    out = []
    for ids in (train, val, test):
        mask = np.zeros(n, bool)
        mask[list(ids)] = True
        out.append(mask)
    return dict(zip(("train_mask", "val_mask", "test_mask"), out, strict=True))


@pytest.mark.parametrize(
    "parts, message",
    [
        ((range(10), range(10), range(10)), r"supplied split 0: train and val masks share 10 node\(s\)"),
        ((range(10), range(9, 20), range(20, 30)), r"train and val masks share 1 node"),
        ((range(10), range(10, 20), range(5, 30)), r"train and test masks share 5 node"),
        ((range(10), (), range(10, 30)), r"supplied split 0: the val mask holds no labeled node"),
    ],
    ids=["identical", "one-shared", "train-test", "empty-val"],
)
def test_supplied_masks_must_be_disjoint_and_non_empty(cache, tmp_path, parts, message):
    x, edges, y = good_arrays()
    path = write_npz(tmp_path / "m.npz", x=x, edge_index=edges, y=y, **_masks(*parts))
    with pytest.raises(UserDatasetError, match=message):
        add_user_dataset(path, "masked")


def test_an_existing_name_is_refused_unless_replace(cache, tmp_path):
    x, edges, y = good_arrays()
    first = add_user_dataset(write_npz(tmp_path / "a.npz", x=x, edge_index=edges, y=y), "mine")
    other = write_npz(tmp_path / "b.npz", x=x + 1, edge_index=edges, y=y)
    with pytest.raises(UserDatasetError, match="already registered .*pass --replace"):
        add_user_dataset(other, "mine")
    assert load_dataset("mine").content_hash == first.content_hash
    refused = CliRunner().invoke(app, ["datasets", "add", str(other), "--name", "mine"])
    assert refused.exit_code == 2 and "--replace" in refused.output
    replaced = CliRunner().invoke(app, ["datasets", "add", str(other), "--name", "mine", "--replace"])
    assert replaced.exit_code == 0, replaced.output
    assert load_dataset("mine").content_hash != first.content_hash


def test_a_user_dataset_is_its_content_and_catalog_splits_keep_their_name_seeds(cache, tmp_path):
    """Two names, one file: the same splits, each registration told the other holds the same content.
    A catalog task's split stays keyed by its name (test_splits.py pins digests of those)."""
    from orchestrator.data.splits import make_split, split_identity
    from orchestrator.data.user import user_registry

    x, edges, y = good_arrays()
    path = write_npz(tmp_path / "g.npz", x=x, edge_index=edges, y=y)
    first, second = add_user_dataset(path, "mine"), add_user_dataset(path, "theirs")
    assert first.content_hash == second.content_hash
    assert (
        split_identity(load_dataset("mine"))
        == split_identity(load_dataset("theirs"))
        == f"content:{first.content_hash}"
    )
    for regime in ("10/10/80", "50/25/25"):
        assert (
            graph_split(load_dataset("mine"), regime, 1).digest == graph_split(load_dataset("theirs"), regime, 1).digest
        )
    assert user_registry()["theirs"]["same_content_as"] == ["mine"] and "same_content_as" not in user_registry()["mine"]
    texas_like = load_dataset("synthetic-homophilous")
    assert split_identity(texas_like) == "synthetic-homophilous"
    assert (
        graph_split(texas_like, "10/10/80", 0).digest == make_split(texas_like.name, texas_like.y, "10/10/80", 0).digest
    )


def test_user_datasets_are_listed_counted_and_removable(cache, tmp_path):
    x, edges, y = good_arrays()
    y = y.copy()
    y[:4] = -1  # unlabeled nodes: kept in the graph, never in a split
    source = write_npz(tmp_path / "mine.npz", features=x, edges=edges, labels=y)  # the other spellings
    added = CliRunner().invoke(app, ["datasets", "add", str(source), "--name", "mine"])
    assert added.exit_code == 0, added.output
    assert "registered mine: 30 nodes (4 unlabeled, never in a split)" in added.output
    listed = CliRunner().invoke(app, ["datasets", "list"])
    assert listed.exit_code == 0 and "1 user dataset(s)" in listed.output
    row = next(line for line in listed.output.splitlines() if "│ mine " in line)
    assert "multiclass" in row and "30" in row and str(source) in row
    refused = CliRunner().invoke(app, ["datasets", "remove", "texas"])
    assert refused.exit_code == 2 and "built-in dataset" in refused.output
    removed = CliRunner().invoke(app, ["datasets", "remove", "mine"])
    assert removed.exit_code == 0 and "removed mine" in removed.output and source.is_file()
    assert "mine" not in CliRunner().invoke(app, ["datasets", "list"]).output.split("no user datasets")[0][-200:]
    with pytest.raises(DatasetError, match="unknown dataset 'mine'"):
        resolve_name("mine")
    again = CliRunner().invoke(app, ["datasets", "remove", "mine"])
    assert again.exit_code == 2 and "'mine' is not a registered user dataset (registered: none)" in again.output


def test_add_help_names_every_accepted_array_name():
    from orchestrator.data.user import _KEYS

    text = CliRunner().invoke(app, ["datasets", "add", "--help"], terminal_width=400).output
    shown = " ".join(w for w in text.split() if w != "│")  # the help box's borders split wrapped lines
    for names in _KEYS.values():
        assert " | ".join(names) in shown, names


def test_a_path_that_is_no_regular_file_is_refused_before_a_byte_is_read(cache, tmp_path):
    """Finding 12: `datasets add /dev/zero` reached 22.7 GB in 9.6 s; a FIFO hung; a sparse file of hundreds of GiB
    would be read whole."""
    fifo = tmp_path / "graph.npz"
    os.mkfifo(fifo)
    sparse = tmp_path / "sparse.pt"
    with open(sparse, "wb") as f:
        f.truncate(300 << 30)
    cases = [
        ("/dev/zero", "dataset file /dev/zero is a character device, not a regular file"),
        ("/dev/urandom", "dataset file /dev/urandom is a character device, not a regular file"),
        (str(fifo), f"dataset file {fifo} is a FIFO, not a regular file"),
        (str(sparse), "sparse.pt: the file holds 300.0 GiB, over the memory budget"),
    ]
    for path, message in cases:
        result = CliRunner().invoke(app, ["datasets", "add", path, "--name", "z"])
        assert result.exit_code == 2 and result.output == f"error: {message}" + result.output.split(message, 1)[1]
        assert result.output.count("\n") == 1, result.output
    assert not (cache / "user" / "registry.json").exists()


#: A child that imports, says it is ready, waits for the go, then adds: the six adds start within milliseconds.
_ADD = (
    "import pathlib, sys, time; from orchestrator.data.registry import add_user_dataset; "
    "go = pathlib.Path(sys.argv[3]); pathlib.Path(sys.argv[4]).touch(); "
    "[time.sleep(0.001) for _ in iter(lambda: go.exists(), True)]; add_user_dataset(sys.argv[1], sys.argv[2])"
)


def test_six_concurrent_adds_keep_six_registrations(cache, tmp_path):
    """Finding 13: concurrent `datasets add` lost registrations while each printed "registered" (6 started, 4 kept:
    an unlocked read-modify-write of registry.json through one fixed temporary name)."""
    x, edges, y = good_arrays()
    env = {**os.environ, "NODEGROUND_CACHE": str(cache), "PYTHONPATH": str(REPO)}
    go, procs = tmp_path / "go", []
    for i in range(6):
        path = write_npz(tmp_path / f"g{i}.npz", x=x + i, edge_index=edges, y=y)
        ready = tmp_path / f"ready-{i}"
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", _ADD, str(path), f"graph-{i}", str(go), str(ready)], cwd=REPO, env=env
            )
        )
    wait_for(lambda: all((tmp_path / f"ready-{i}").exists() for i in range(6)), "six adds ready")
    go.touch()
    assert [p.wait(HANG_S) for p in procs] == [0] * 6
    assert sorted(user_registry()) == [f"graph-{i}" for i in range(6)]
    assert sorted(p.name for p in (cache / "user").iterdir() if p.suffix == ".part") == []  # no temporary left


@pytest.mark.parametrize("file", ["../victim.txt", "/tmp/victim.txt", ".", "..", "sub/x.npz", ""])
def test_remove_never_deletes_outside_the_cache(cache, tmp_path, file):
    """Finding 14: `datasets remove` followed a registry entry's `../` path and deleted a file outside the cache."""
    x, edges, y = good_arrays()
    add_user_dataset(write_npz(tmp_path / "mine.npz", x=x, edge_index=edges, y=y), "mine")
    victim = cache / "victim.txt"
    victim.write_text("keep me")
    registry = cache / "user" / "registry.json"
    entries = json.loads(registry.read_text())
    entries["mine"]["file"] = file.replace("/tmp/", f"{cache}/")
    registry.write_text(json.dumps(entries))
    result = CliRunner().invoke(app, ["datasets", "remove", "mine"])
    assert result.exit_code == 2 and "which is not a file name inside" in result.output, result.output
    assert result.output.count("\n") == 1 and victim.read_text() == "keep me"


@pytest.mark.parametrize(
    "text, message",
    [
        ("[]", "holds an array, not an object"),
        ('{"mine": 3}', "entry 'mine' in .* holds a number, not an object"),
        ('{"mine": {"content_hash": "h"}}', "lacks the field 'file'"),
        ('{"mine": {"file": 3, "content_hash": "h"}}', "'file' is a number, not a string"),
        ("{not json", "is not valid JSON"),
    ],
)
def test_a_malformed_registry_is_one_line(cache, tmp_path, text, message):
    """Finding 16: a malformed registry.json ended in `error: unexpected ...`."""
    (cache / "user").mkdir(parents=True)
    (cache / "user" / "registry.json").write_text(text)
    x, edges, y = good_arrays()
    graph = str(write_npz(tmp_path / "g.npz", x=x, edge_index=edges, y=y))
    for args in (["datasets", "remove", "mine"], ["datasets", "add", graph, "--name", "other"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and result.output.startswith("error: the user dataset registry"), result.output
        assert re.search(message, result.output) and "unexpected" not in result.output
        assert result.output.count("\n") == 1
