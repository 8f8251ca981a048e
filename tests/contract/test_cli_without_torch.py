"""The CLI runs where torch cannot be imported: `--help`, `show`, `report`, `export`, `methods list`.

Each command runs in a fresh interpreter whose import system refuses ``torch``,
``torch_geometric`` and ``methods`` (and says so on stderr), as on a machine that has
only the orchestrator's own dependencies.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HANG_S

REPO = Path(__file__).resolve().parents[2]
BLOCKED = ("torch", "torch_geometric", "methods")
PRELUDE = f"""
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {BLOCKED!r}:
            print("refused import " + name, file=sys.stderr)
            raise ImportError("refused import " + name)
sys.meta_path.insert(0, Refuse())
sys.argv[0] = "orchestrator"
from orchestrator.cli.main import app
app()
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.synthetic_trials import synthetic_trials, write_store

    path = tmp_path_factory.mktemp("store") / "runs.sqlite"
    trials = synthetic_trials(
        supervised=("mlp", "gcn"), gfms=("graphany",), n_datasets=3, n_trials=3, gfm_trials=1, seed=0
    )
    write_store(trials, path)
    return path


def orchestrator(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", PRELUDE, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    "command",
    [
        ["--help"],
        ["show", "--store", "{store}"],
        ["show", "--workflow", "--store", "{store}"],
        ["export", "--store", "{store}", "--format", "csv", "--out", "{out}/export"],
        ["report", "--store", "{store}", "--out", "{out}/report", "--bootstrap-rounds", "5"],
        ["methods", "list"],
    ],
    ids=lambda c: " ".join(a for a in c if not a.startswith("{")),
)
def test_commands_run_without_torch(command, store, tmp_path):
    proc = orchestrator(*(a.format(store=store, out=tmp_path) for a in command))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "refused import" not in proc.stderr and "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-2000:]
    assert proc.stdout.strip()


def test_the_blocker_refuses_torch():
    """The prelude really makes torch unimportable (else the test above proves nothing)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = PRELUDE.replace("from orchestrator.cli.main import app\napp()", "import torch")
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=HANG_S
    )
    assert proc.returncode != 0 and "refused import torch" in proc.stderr
