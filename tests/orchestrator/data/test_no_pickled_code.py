"""No file we did not write runs code when loaded: an exploit pickle planted in every data
loader path (user files of each accepted form, catalog files, hashed or ``unverified``)
is refused with one line, and the marker file its ``__reduce__`` would create never appears."""

from __future__ import annotations

import io
import os
import pathlib
import pickle
import warnings
import zipfile

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.data.fetch import sha256_of
from orchestrator.data.loaders import LoaderError, run_loader
from orchestrator.data.registry import add_user_dataset
from orchestrator.data.safe_pickle import RestrictedUnpickler, no_pickled_code
from orchestrator.data.user import UserDatasetError

PLANETOID = "github.com/kimiyoung/planetoid/raw/master/data"


class Exploit:
    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class TouchExploit(Exploit):
    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "pwned"
    yield path
    assert not path.exists(), "pickled code ran"


def _torch_file(path, payload):
    torch.save(payload, path)
    return path


def _npz_with_object_array(path, marker):
    array = np.empty(1, dtype=object)
    array[0] = Exploit(marker)
    np.savez(
        path,
        x=array,
        features=array,
        edges=np.zeros((1, 2), np.int64),
        y=np.zeros(3, np.int64),
        target=np.zeros(3, np.int64),
    )
    return path


USER_FILES = {
    "pt": lambda d, m: _torch_file(
        d / "evil.pt", {"x": Exploit(m), "edge_index": torch.zeros(2, 1), "y": torch.zeros(3)}
    ),
    "renamed-txt": lambda d, m: _torch_file(d / "evil.txt", Exploit(m)),
    "plain-pickle": lambda d, m: (d / "evil.pkl").write_bytes(pickle.dumps(Exploit(m))) and d / "evil.pkl",
    "npz-object-array": lambda d, m: _npz_with_object_array(d / "evil.npz", m),
}


@pytest.mark.parametrize("kind", sorted(USER_FILES))
def test_datasets_add_never_runs_pickled_code(cache, tmp_path, marker, kind):
    path = USER_FILES[kind](tmp_path, marker)
    with pytest.raises(UserDatasetError) as info:
        add_user_dataset(path, "evil")
    assert "\n" not in str(info.value)
    result = CliRunner().invoke(app, ["datasets", "add", str(path), "--name", "evil"])
    assert result.exit_code == 2 and result.output.startswith("error: ") and result.output.strip().count("\n") == 0
    assert "Traceback" not in result.output


def test_a_saved_pyg_data_still_registers_without_running_code(cache, tmp_path):
    from torch_geometric.data import Data

    n = 12
    data = Data(
        x=torch.randn(n, 3), edge_index=torch.stack([torch.arange(n), (torch.arange(n) + 1) % n]), y=torch.arange(n) % 3
    )
    torch.save(data, tmp_path / "ok.pt")
    assert add_user_dataset(tmp_path / "ok.pt", "fine").num_nodes == n


def _mirror_with(tmp_path, monkeypatch, files: dict[str, bytes]):
    root = tmp_path / "mirror"
    for rel, blob in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(blob)
    monkeypatch.setenv("NODEGROUND_MIRROR", str(root))
    return root


@pytest.mark.parametrize("verified", [False, True], ids=["unverified", "sha256-pinned"])
def test_planetoid_raw_pickles_cannot_run_code(cache, tmp_path, monkeypatch, marker, verified):
    names = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
    blobs = {
        f"{PLANETOID}/ind.evil.{n}": (b"0\n" if n == "test.index" else pickle.dumps(Exploit(marker), protocol=2))
        for n in names
    }
    root = _mirror_with(tmp_path, monkeypatch, blobs)
    files = [{"url": f"https://{rel}", "sha256": sha256_of(root / rel) if verified else "unverified"} for rel in blobs]
    entry = {"name": "evil", "loader": "planetoid", "args": {"name": "Evil"}, "files": files}
    with pytest.raises(
        LoaderError, match=r"refusing to unpickle posix\.system|refusing to unpickle os\.system"
    ) as info:
        run_loader(entry)
    assert "\n" not in str(info.value)


def test_hf_tag_tensor_files_cannot_run_code(cache, tmp_path, monkeypatch, marker):
    evil = io.BytesIO()
    torch.save({"edge_index": Exploit(marker), "y": torch.zeros(3)}, evil)
    rel = "huggingface.co/datasets/evil/resolve/main/evil"
    _mirror_with(tmp_path, monkeypatch, {f"{rel}/Evil.pt": evil.getvalue(), f"{rel}/sbert_x.pt": evil.getvalue()})
    entry = {
        "name": "evil-tag",
        "loader": "hf_tag",
        "args": {"graph": "Evil.pt", "features": "sbert_x.pt"},
        "files": [
            {"url": f"https://{rel}/Evil.pt", "sha256": "unverified"},
            {"url": f"https://{rel}/sbert_x.pt", "sha256": "unverified"},
        ],
    }
    with pytest.raises(LoaderError, match="cannot be read as data without running code") as info:
        run_loader(entry)
    assert "\n" not in str(info.value)


def test_pyg_numpy_object_arrays_cannot_run_code(cache, tmp_path, monkeypatch, marker):
    """FacebookPagePage (and Twitch, GitHub, DeezerEurope) read their .npz with allow_pickle=True."""
    buffer = io.BytesIO()
    _npz_with_object_array(buffer, marker)
    rel = "graphmining.ai/datasets/ptg/facebook.npz"
    _mirror_with(tmp_path, monkeypatch, {rel: buffer.getvalue()})
    entry = {
        "name": "evil-fb",
        "loader": "pyg",
        "args": {"cls": "FacebookPagePage", "kwargs": {}},
        "files": [{"url": f"https://{rel}", "sha256": "unverified", "path": "raw/facebook.npz"}],
    }
    with pytest.raises(LoaderError, match="refusing to unpickle"):
        run_loader(entry)


def test_a_planted_processed_file_cannot_run_code_through_pygs_fallback(cache, tmp_path, monkeypatch, marker):
    """PyG's torch_load retries with weights_only=False when the safe load fails: restricted too."""
    from torch_geometric.io import fs

    path = tmp_path / "data.pt"
    torch.save({"x": TouchExploit(marker)}, path)  # a global torch does not block by module, so PyG retries
    with no_pickled_code(), pytest.raises(pickle.UnpicklingError, match="refusing to unpickle"):
        with pytest.warns(UserWarning):
            fs.torch_load(str(path))
    assert pickle.Unpickler is not RestrictedUnpickler, "the swap was not undone"


def test_real_planetoid_pickles_load_under_the_restriction(mirror):
    """The restriction accepts what the real Planetoid files hold (numpy, scipy.sparse, defaultdict)."""
    from orchestrator.data.registry import load_dataset

    graph = load_dataset("cora")
    assert graph.num_nodes == 2708 and graph.num_classes == 7


def test_pyg_s_processed_file_loads_restricted_even_after_another_tensor_file_was_read(mirror, tmp_path):
    """PyG reloads the processed file it just wrote with weights_only=True; where that fails it warns and unpickles
    in full. Reading a tensor file of our own once used to unregister PyG's ``Data`` (the allowlist's scope removed
    every class it was given), so the next PyG read fell back: with the warning as an error, none may happen."""
    from torch_geometric.data import Data

    from orchestrator.data.registry import load_dataset
    from orchestrator.data.safe_pickle import load_tensor_file

    torch.save(Data(x=torch.zeros(2, 1)), tmp_path / "graph.pt")
    load_tensor_file(tmp_path / "graph.pt")
    assert Data in torch.serialization.get_safe_globals(), "PyG's registration was undone"
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Weights only load failed")
        graph = load_dataset("cora")
    assert graph.num_nodes == 2708


def test_archive_members_are_data_too(cache, tmp_path, marker):
    """A zip of pickles (what torch.save writes) is read by the same rules."""
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("a/data.pkl", pickle.dumps(Exploit(marker)))
    with pytest.raises(UserDatasetError, match="without running code"):
        add_user_dataset(path, "zipped")
