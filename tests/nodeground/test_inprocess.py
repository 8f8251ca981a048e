"""An SDK method run in this process makes the trials a sweep through its service makes, and says it ran in-process.

Each run happens in a process of its own, as a researcher's script: a run tunes glibc malloc as a service does, for
the rest of its process (``nodeground.inprocess``), which the test process should not inherit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contract.hardware import KERNELS_ENV, PINNED, PINNED_KERNELS, KernelPolicyError
from methods.gnn import GCN, MLP
from methods.sdk import TorchNodeClassifier
from nodeground.inprocess import IN_PROCESS, MethodError, check_kernels, compute_threads, family_name, method_class
from orchestrator.plan import SweepPlan, described_specs, make_plan
from orchestrator.services.directory import resolve_methods
from orchestrator.store import read_services, read_trials
from orchestrator.submission.verify import COMPARED, TOLERANCE
from tests.conftest import HANG_S

REPO = Path(__file__).resolve().parents[2]
REGIMES = ("10/10/80", "50/25/25")


def run_script(code: str, tmp_path: Path, **env: str) -> str:
    """Run ``code`` as a researcher's script (its own process, in another directory); its stdout."""
    script = tmp_path / "script.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=4 * HANG_S,
        env={**os.environ, **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.timeout(4 * HANG_S)
def test_a_run_stores_the_plans_trials_marked_in_process_and_resumes(tmp_path):
    store = tmp_path / "mine.sqlite"
    out = run_script(
        f"""
import json, torch
import nodeground
from methods.gnn import MLP
torch.set_num_threads(2)
args = dict(store={str(store)!r}, regimes={list(REGIMES)!r}, budget=2, verbose=False)
first = nodeground.run(MLP, "synthetic-tiny", **args)
again = nodeground.run(MLP(), "synthetic-tiny", **args)
print(json.dumps({{"keys": first.trial_keys, "ran": len(first.records), "again": len(again.records),
                  "threads": torch.get_num_threads(), "selected": len(first.selected())}}))
""",
        tmp_path,
        NODEGROUND_THREADS="1",
    )
    result = json.loads(out)
    sweep = SweepPlan(("mlp",), ("synthetic-tiny",), REGIMES, (0,), 2, protocol="lite")
    planned = [t.key for t in make_plan(sweep, described_specs(["mlp"], resolve_methods(["mlp"]))).trials()]
    assert result["keys"] == planned and result["ran"] == len(planned) == 4  # orchestrator run's plan, all run
    assert result["again"] == 0 and result["selected"] == 2  # resumed: nothing run twice; a selection per cell
    assert result["threads"] == 2  # the thread rule held for the run only
    trials = read_trials(store)
    assert sorted(trials["trial_key"]) == sorted(planned)
    assert set(trials["endpoint"]) == {IN_PROCESS} and set(trials["status"]) == {"ok"}
    assert set(trials["protocol"]) == {"lite"} and set(trials["family"]) == {"gnn"}
    host = json.loads(trials["host_json"].iloc[0])
    assert (host["compute_threads"], host["kernels"]) == (1, "native")
    services = read_services(store)
    assert len(services) == 1  # warmed up once; the resumed run had nothing to run and started nothing
    assert services.iloc[0][["source", "warmup_methods"]].tolist() == [IN_PROCESS, "mlp"]
    assert services.iloc[0]["warmup_error"] is None


BROKEN = """
import sys, traceback
import nodeground
from methods.gnn import MLP


class Broken(MLP):
    name = "broken"

    def fit(self, graph, train, val, config, ctx):
        raise ZeroDivisionError("inside my fit")


run = nodeground.run(Broken, "synthetic-tiny", store=sys.argv[0] + ".sqlite", budget=1, verbose=False)
print(run.records[0].status, run.records[0].error)
try:
    nodeground.run(Broken, "synthetic-tiny", store=sys.argv[0] + "-debug.sqlite", budget=1, debug=True)
except ZeroDivisionError:
    print(traceback.format_exc().splitlines()[-2].strip())
"""


@pytest.mark.timeout(4 * HANG_S)
def test_a_methods_exception_is_a_failed_trial_or_with_debug_its_own_traceback(tmp_path):
    recorded, raised = run_script(BROKEN, tmp_path).strip().splitlines()
    assert recorded == "failed INTERNAL: broken failed: ZeroDivisionError: inside my fit"
    assert raised == 'raise ZeroDivisionError("inside my fit")'  # the method's own line, not the service's


def test_an_instance_runs_as_fresh_copies_of_itself_described_as_it_sets():
    template = GCN()
    template.version = "2099-01-01"
    template.note = ["mine"]
    cls = method_class(template)
    made = cls()
    assert issubclass(cls, GCN) and cls.version == "2099-01-01" and cls.name == "gcn"
    assert made.note == ["mine"] and made.note is not template.note  # a copy per fit, as a service makes
    assert family_name(cls) == "gnn" and family_name(MLP) == "gnn"


def test_what_is_not_a_runnable_method_is_refused_in_one_line():
    class Half(TorchNodeClassifier):
        name, version, default_config = "half", "2026-12-07", {}

    class Mine(GCN):  # another class under a shipped method's name: its trials would carry that method's keys
        pass

    for given, says in (
        (len, "a methods.sdk.Method subclass"),
        (TorchNodeClassifier, "sets no name, version, default_config"),
        (Half, "leaves build_model"),
    ):
        with pytest.raises(MethodError, match=says):
            method_class(given)
    with pytest.raises(MethodError, match="'gcn' is a shipped method's name"):
        family_name(Mine)


def test_the_thread_rule_and_the_kernels_are_a_services(monkeypatch):
    monkeypatch.delenv("NODEGROUND_THREADS", raising=False)
    monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
    assert compute_threads() == 1
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "4")
    assert compute_threads() == 4
    monkeypatch.setenv("NODEGROUND_THREADS", "3")
    assert compute_threads() == 3
    for name in PINNED_KERNELS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(KERNELS_ENV, PINNED)
    with pytest.raises(KernelPolicyError, match="started without the pinned kernels"):
        check_kernels()
    for name, value in PINNED_KERNELS.items():
        monkeypatch.setenv(name, value)
    check_kernels()


@pytest.mark.slow
@pytest.mark.timeout(8 * HANG_S)  # a hang only: about two minutes each way on two loaded cores
def test_gcn_lite_on_texas_in_process_gives_the_service_paths_trials(mirror, tmp_path):
    """The same configurations in the same order, the same selected trial per cell, every metric within the golden
    tolerance (on one machine they agree exactly: the same code computes on the same kernels)."""
    env = {"NODEGROUND_THREADS": "1", "NODEGROUND_MIRROR": str(mirror)}
    service, in_process = tmp_path / "service.sqlite", tmp_path / "in-process.sqlite"
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "--methods", "gcn", "--datasets", "texas", "--protocol", "lite",
         "--parallel", "1", "--services", "embedded", "--store", str(service)],
        cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=4 * HANG_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    run_script(
        f"import nodeground\nfrom methods.gnn import GCN\nnodeground.run(GCN, 'texas', store={str(in_process)!r})\n",
        tmp_path,
        **env,
    )
    order = ["regime", "trial_index"]
    a = read_trials(service).sort_values(order).set_index(order)
    b = read_trials(in_process).sort_values(order).set_index(order)
    assert len(a) == 20 and list(a["trial_key"]) == list(b["trial_key"])  # same configurations, same keys
    assert set(b["endpoint"]) == {IN_PROCESS} and set(a["endpoint"]) != {IN_PROCESS}
    assert (a["status"] == b["status"]).all()
    for regime in REGIMES:
        assert a.loc[regime, "val_loss"].idxmin() == b.loc[regime, "val_loss"].idxmin()  # the same selected trial
    for column in COMPARED:
        difference = (a[column] - b[column]).abs().max()
        assert not difference > TOLERANCE, (column, difference)
