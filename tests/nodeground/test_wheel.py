"""NodeGround installs as a library: its wheel, in a fresh virtual environment outside the checkout, runs
docs/library.md's example on Texas from another directory, offline, and the evaluator's metrics there are the
harness's own for the same predictions.

The fresh environment reuses this one's installed dependencies (torch among them) through a ``.pth`` line, so
nothing is downloaded; it sees the wheel's packages, never the checkout's source tree.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from orchestrator.data.registry import load_dataset
from orchestrator.data.splits import graph_split
from orchestrator.records import TrialRecord
from orchestrator.run_trial import TrialRunner
from tests.conftest import HANG_S
from tests.nodeground.test_evaluation import RECORDED
from tests.orchestrator.conftest import RECORD

REPO = Path(__file__).resolve().parents[2]
#: What the wheel is built from: the project's metadata and its packages (with the catalog the link names).
SOURCES = ("pyproject.toml", "README.md", "contract", "orchestrator", "methods", "nodeground", "datasets")
FENCE = re.compile(r"```python\n(.*?)```", re.S)

#: Runs the docs' example in the fresh environment, then says what the evaluator scored and where the code came from.
RUNNER = """
import json, runpy, sys
import numpy as np
example = runpy.run_path("example.py")
np.savez("predictions.npz", *example["predictions"])
import nodeground, orchestrator
print(json.dumps({"scores": example["scores"], "files": [nodeground.__file__, orchestrator.__file__],
                  "endpoints": sorted(set(example["run"].trials()["endpoint"])),
                  "entrants": sorted(set(example["board"].entries["method"]))}))
"""


def example() -> str:
    """Every Python block of docs/library.md, in order: the example a reader runs."""
    return "\n".join(FENCE.findall((REPO / "docs" / "library.md").read_text()))


def build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(REPO / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), "."],
        cwd=source, check=True, capture_output=True, timeout=HANG_S,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("nodeground-*.whl")
    return wheel


def fresh_venv(tmp_path: Path, wheel: Path) -> Path:
    """A virtual environment holding the wheel, whose dependencies are this environment's installed ones."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=HANG_S)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())  # fmt: skip
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # appended to sys.path, after site
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)],
        check=True, capture_output=True, timeout=HANG_S,
    )  # fmt: skip
    return python


@pytest.mark.slow
@pytest.mark.timeout(8 * HANG_S)  # a hang only: the example trains twenty small GCNs
def test_the_wheel_runs_the_docs_example_outside_the_checkout(mirror, tmp_path):
    python = fresh_venv(tmp_path, build_wheel(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "example.py").write_text(example())
    (elsewhere / "runner.py").write_text(RUNNER)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # one thread for the example's own loop too (OMP_NUM_THREADS): on two shared cores, two threads spin far longer than
    # they compute
    env.update(
        NODEGROUND_MIRROR=str(mirror),
        NODEGROUND_CACHE=str(tmp_path / "cache"),
        NODEGROUND_THREADS="1",
        OMP_NUM_THREADS="1",
    )
    done = subprocess.run(
        [python, "runner.py"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=6 * HANG_S
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(Path(f).is_relative_to(python.parent.parent) for f in out["files"]), out["files"]  # the wheel's code
    assert out["endpoints"] == ["in-process"] and "twolayergcn" in out["entrants"]
    graph = load_dataset("texas")
    with np.load(elsewhere / "predictions.npz") as saved:
        predictions = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    assert len(predictions) == len(out["scores"]) == 5
    for index, (probs, scores) in enumerate(zip(predictions, out["scores"], strict=True)):
        record = TrialRecord(**{**RECORD.__dict__})
        TrialRunner._score(probs, graph, graph_split(graph, "10/10/80", index), record)  # the harness's computation
        assert record.status == "ok"
        assert scores == {name: getattr(record, RECORDED[name]) for name in scores}
        assert set(scores) == {"accuracy", "macro_f1", "cross_entropy"}
