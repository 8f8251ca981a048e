"""A shipped reference cell reruns to itself: the same configurations, the same selection, the same metrics.

The reference is recorded with native kernels (``contract.hardware``), and so is the rerun, with nothing set. On the
reference's own hardware line (the CPU model, one thread, native kernels) every trial's metrics agree. On another CPU
the kernels differ in their last bits, so a trial's training can take another turn (early stopping at another
epoch); the configurations, the selection and the selected trial's metrics must still agree."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.data.registry import dataset_size
from orchestrator.host import hardware_of
from orchestrator.reference import load_reference
from orchestrator.store import read_trials
from orchestrator.submission.verify import COMPARED, TOLERANCE
from tests.conftest import HANG_S

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
@pytest.mark.timeout(4 * HANG_S)  # a hang only: one cell of mlp on the smallest graph takes seconds
def test_one_shipped_cell_reruns_to_the_same_selection_and_metrics(mirror, tmp_path):
    frame, manifest = load_reference("lite")
    dataset = min(manifest.datasets, key=lambda d: dataset_size(d).nodes)
    cell = frame[(frame["method"] == "mlp") & (frame["dataset"] == dataset) & (frame["regime"] == "10/10/80")]
    assert len(cell) == manifest.budget
    env = {k: v for k, v in os.environ.items() if not k.startswith("NODEGROUND_")}
    env.update(NODEGROUND_MIRROR=str(mirror), NODEGROUND_CACHE=str(tmp_path / "cache"))
    store = tmp_path / "rerun.sqlite"
    args = ["run", "--methods", "mlp", "--datasets", dataset, "--protocol", "lite", "--regimes", "10/10/80"]
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args, "--store", str(store)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=4 * HANG_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rerun = read_trials(store).set_index("trial_index").sort_index()
    shipped = cell.set_index("trial_index").sort_index()
    assert list(rerun["config_hash"]) == list(shipped["config_hash"])  # the same configurations, in order
    assert set(rerun["protocol"]) == {"lite"} and rerun["val_loss"].idxmin() == shipped["val_loss"].idxmin()
    same_hardware = {hardware_of(h) for h in rerun["host_json"]} == {manifest.hardware}
    rows = shipped.index if same_hardware else [shipped["val_loss"].idxmin()]
    for column in COMPARED:
        both = shipped.loc[rows, column].notna() & rerun.loc[rows, column].notna()
        assert (shipped.loc[rows, column].isna() == rerun.loc[rows, column].isna()).all(), column
        difference = (shipped.loc[rows, column] - rerun.loc[rows, column])[both].abs()
        assert (difference <= TOLERANCE).all(), (column, same_hardware, difference.max())
