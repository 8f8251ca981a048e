"""A GFM trial's record names the weights it used and whether they are the official file."""

from __future__ import annotations

import json

from orchestrator.services.directory import ServiceDirectory, resolve_methods
from orchestrator.store import Store
from orchestrator.sweep import Sweep, SweepPlan


def test_sweep_records_carry_weights_provenance(pfn_service, tmp_path):
    servicer, client = pfn_service
    plan = SweepPlan(methods=("nodepfn",), datasets=("synthetic-tiny",), regimes=("10/10/80",), splits=(0,), budget=1)
    directory = ServiceDirectory(resolve_methods(["nodepfn"]), endpoints={"nodepfn": client.endpoint})
    with Store(tmp_path / "runs.sqlite") as store:
        (record,) = Sweep(plan, store, directory).run()
    directory.close()
    assert record.status == "ok", record.error
    assert record.kind == "gfm"
    provenance = json.loads(record.extra_json)
    assert provenance["weights_id"] == "random-init" and provenance["weights_official"] is False
    assert len(provenance["weights_sha256"]) == 64
