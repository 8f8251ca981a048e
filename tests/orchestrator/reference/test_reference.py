"""The shipped reference: a table its manifest checks, a build that resumes from it, cells chosen by their price."""

from __future__ import annotations

import pandas as pd
import pytest

from contract.families import load_families
from orchestrator.protocols import LITE
from orchestrator.reference import (
    TABLE_COLUMNS,
    Manifest,
    ReferenceError,
    load_reference,
    paths,
    store_rows,
    write_reference,
)
from orchestrator.reference.build import reference_methods, table_rows
from orchestrator.store import Store, read_trials
from tests.orchestrator.reference.conftest import rows


def manifest(**fields) -> Manifest:
    base = dict(protocol="lite", budget=3, regimes=["10/10/80", "50/25/25"], splits=[0], methods=["gcn", "mlp"],
                missing={}, datasets=["texas"], pending={"cora": 1.5}, hardware="Ref CPU, 2 threads")  # fmt: skip
    return Manifest(**{**base, **fields})


def shipped(tmp_path, methods=("gcn", "mlp"), datasets=("texas",)) -> pd.DataFrame:
    trials = rows(methods, datasets)
    frame = table_rows(trials, set(trials["trial_key"]), LITE)
    write_reference(frame, manifest(methods=list(methods), datasets=list(datasets)), tmp_path)
    return frame


def test_the_table_is_checked_against_its_manifest(tmp_path):
    frame = shipped(tmp_path)
    loaded, read = load_reference("lite", tmp_path)
    assert len(loaded) == read.rows == len(frame) == 12 and list(loaded.columns) == list(TABLE_COLUMNS)
    assert set(loaded["protocol"]) == {"lite"} and set(loaded["hardware"]) == {"Ref CPU, 2 threads"}
    table, _ = paths("lite", tmp_path)
    table.write_text(table.read_text().replace("0.", "0.9", 1))
    with pytest.raises(ReferenceError, match="does not match its manifest's sha256"):
        load_reference("lite", tmp_path)
    with pytest.raises(ReferenceError, match="unknown reference 'paper'"):
        load_reference("paper", tmp_path)
    with pytest.raises(ReferenceError, match="make reference"):
        load_reference("lite", tmp_path / "none")


def test_a_build_resumes_from_the_shipped_table_and_writes_the_same_bytes(tmp_path):
    """The next build starts from the table: its rows back into a store give the same table again."""
    shipped(tmp_path)
    first, _ = paths("lite", tmp_path)
    before = first.read_bytes()
    loaded, read = load_reference("lite", tmp_path)
    with Store(tmp_path / "work.sqlite") as store:
        store.write_rows(store_rows(loaded))
    again = read_trials(tmp_path / "work.sqlite")
    write_reference(table_rows(again, set(again["trial_key"]), LITE), read, tmp_path)
    assert first.read_bytes() == before


def test_methods_on_random_weights_are_missing_never_shipped(monkeypatch, tmp_path):
    monkeypatch.setenv("NODEGROUND_WEIGHTS", str(tmp_path / "none"))
    monkeypatch.delenv("NODEGROUND_MIRROR", raising=False)
    shipped_methods, missing = reference_methods(load_families())
    assert {"gcn", "mlp", "polynormer"} <= set(shipped_methods)
    assert not {"graphany", "gvt", "node4all", "graphpfn", "nodepfn", "g2tfm", "ephris"} & set(shipped_methods)
    assert "no published digest" in missing["graphpfn"] and "random parameters" in missing["nodepfn"]


def test_with_the_mirror_the_official_weights_make_graphany_gvt_and_node4all_reference_methods(
    mirror, monkeypatch, tmp_path
):
    monkeypatch.setenv("NODEGROUND_WEIGHTS", str(tmp_path / "none"))
    shipped_methods, missing = reference_methods(load_families())
    assert {"graphany", "gvt", "node4all"} <= set(shipped_methods)
    assert {"graphpfn", "nodepfn", "g2tfm", "ephris"} <= set(missing)
