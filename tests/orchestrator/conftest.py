"""What the orchestrator's tests share: a trial record to write into a store."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from orchestrator.records import TrialRecord

#: One ok default trial of gcn on split 0 of a 3-class dataset "d".
RECORD = TrialRecord(
    trial_key="",
    method="gcn",
    method_version="v",
    family="gnn",
    kind="supervised",
    dataset="d",
    dataset_hash="h",
    task_type="multiclass",
    num_classes=3,
    regime="10/10/80",
    split=0,
    trial_index=0,
    is_default=True,
    config_json="{}",
    config_hash="c",
    seed=0,
    status="ok",
    val_loss=0.5,
)


def trial_record(key: str, **fields: Any) -> TrialRecord:
    """``RECORD`` under ``key``, with ``fields`` changed."""
    return dataclasses.replace(RECORD, trial_key=key, **fields)


def sealed_bundle(path: Path, rows: Iterable[dict[str, Any]], submission: dict[str, Any]) -> Path:
    """A submission bundle at ``path`` as `orchestrator submit` seals it: ``rows`` (trial rows, plain column dicts)
    in its store, ``submission`` as its submission.json."""
    from orchestrator.store import Store
    from orchestrator.submission.bundle import SUBMISSION, TRIALS, finalize_store, seal

    path.mkdir()
    with Store(path / TRIALS) as store:
        store.write_rows(rows)
    finalize_store(path / TRIALS)
    (path / SUBMISSION).write_text(json.dumps(submission))
    seal(path)
    return path
