"""`orchestrator show --summary`: mean ± std over splits, the selected trial per split, and why a split has none."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from orchestrator import store as store_module
from orchestrator.cli.main import app
from orchestrator.results import summarize
from orchestrator.store import Store
from tests.synthetic_trials import mixed_status_trials, write_store


def _row(summary: pd.DataFrame, view: str, dataset: str) -> pd.Series:
    hit = summary[(summary["view"] == view) & (summary["dataset"] == dataset)]
    assert len(hit) == 1, (view, dataset, summary[["view", "dataset"]])
    return hit.iloc[0]


def test_the_summary_gives_mean_and_std_over_splits_and_the_selections():
    s = summarize(mixed_status_trials())
    assert set(s["view"]) == {"gcn-Default", "gcn", "mlp-Default", "mlp", "graphany"}
    tuned = _row(s, "gcn", "d3")  # trial 1 has the lower validation loss on both splits: 0.72, 0.73
    assert tuned["selected_splits"] == tuned["splits"] == 2 and tuned["selected"] == "s0:1 s1:1"
    assert tuned["mean"] == pytest.approx(0.725) and tuned["std"] == pytest.approx(np.std([0.72, 0.73], ddof=1))
    default = _row(s, "gcn-Default", "d3")
    assert default["selected"] == "s0:0 s1:0" and default["mean"] == pytest.approx(0.705)
    assert default["primary_metric"] == "accuracy" and default["reason"] == ""


def test_the_summary_names_what_each_unselectable_split_ended_as():
    s = summarize(mixed_status_trials())
    gcn = _row(s, "gcn", "d0")
    assert gcn["selected_splits"] == 0 and gcn["reason"] == "s0: 2 timeout; s1: 2 oom"
    assert _row(s, "gcn-Default", "d0")["reason"] == "s0: 1 timeout; s1: 1 oom"  # the default is trial 0 alone
    mlp = _row(s, "mlp", "d0")
    assert mlp["reason"] == "s0: 2 failed; s1: 2 nonfinite" and np.isnan(mlp["mean"])
    half = _row(s, "gcn", "d1")  # split 0 unavailable, split 1 fine
    assert half["selected_splits"] == 1 and half["selected"] == "s1:1" and half["reason"] == "s0: 2 unavailable"
    assert np.isnan(half["std"])


def test_one_trial_searches_show_each_method_once():
    t = mixed_status_trials()
    s = summarize(t[t["trial_index"] == 0])
    assert set(s["view"]) == {"gcn-Default", "mlp-Default", "graphany"}


def test_show_summary_prints_it_and_filters(tmp_path):
    store = tmp_path / "runs.sqlite"
    write_store(mixed_status_trials(), store)
    out = CliRunner().invoke(app, ["show", "--store", str(store), "--summary", "--datasets", "d0,d3"])
    assert out.exit_code == 0, out.output
    assert "0.7250 ± 0.0071" in out.output and "s0:1 s1:1" in out.output
    assert "none selectable" in out.output and "s0: 2 timeout; s1: 2 oom" in out.output
    assert "d1" not in out.output
    bad = CliRunner().invoke(app, ["show", "--store", str(store), "--summary", "--methods", "gat"])
    assert bad.exit_code == 2 and "the store holds no trial of gat (it holds: gcn, graphany, mlp)" in bad.output
    both = CliRunner().invoke(app, ["show", "--store", str(store), "--summary", "--workflow"])
    assert both.exit_code == 2 and "not both" in both.output


def test_show_explains_what_its_tables_abbreviate(tmp_path):
    """Each table says under it what it abbreviates: the summary its "gcn-Default" and "s0:1", the others the bare
    trial index under "selected"."""
    from orchestrator.results import DEFAULT_LEGEND, SELECTED_LEGEND, SPLITS_LEGEND

    store = tmp_path / "runs.sqlite"
    write_store(mixed_status_trials(), store)
    wide = {"terminal_width": 400}
    summary = " ".join(CliRunner().invoke(app, ["show", "--store", str(store), "--summary"], **wide).output.split())
    assert "gcn-Default" in summary and DEFAULT_LEGEND in summary and SPLITS_LEGEND in summary
    for flags in ([], ["--workflow"]):
        shown = " ".join(CliRunner().invoke(app, ["show", "--store", str(store), *flags], **wide).output.split())
        assert SELECTED_LEGEND in shown and DEFAULT_LEGEND not in shown, flags


def _before(store, summary: bool = False, workflow: bool = False) -> str:
    """`show` as it printed before it read only the columns it prints: from every row read whole (``read_trials``)."""
    from rich.console import Console

    from orchestrator.cli.run import print_results
    from orchestrator.results import selected_with_workflow, services_table, summary_table, workflow_table
    from orchestrator.store import read_services, read_trials

    frame = read_trials(store)
    out = Console(width=200, record=True, file=io.StringIO())
    if summary:
        out.print(summary_table(summarize(frame)))
    elif workflow:
        out.print(workflow_table(selected_with_workflow(frame)))
        services = read_services(store)
        if not services.empty:
            out.print(services_table(services))
    else:
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            print_results(frame)
        return printed.getvalue()
    return out.export_text()


KEY = ["method", "method_version", "dataset", "regime", "split", "trial_index"]


def test_show_reading_only_what_it_prints_prints_what_it_printed_from_whole_rows(tmp_path, monkeypatch):
    """Every mode of `show` on a store with failures, NULL metrics, a GFM and two versions of one method."""
    trials = mixed_status_trials()
    again = trials[trials["method"] == "mlp"].assign(method_version="v2", val_loss=0.3, test_primary=0.9)
    frame = pd.concat([trials, again], ignore_index=True).astype(object)
    frame = frame.where(frame.notna(), None).assign(family=frame["method"], dataset_hash="h", num_classes=3)
    frame["config_json"] = [f'{{"lr": {0.01 * i}}}' for i in range(len(frame))]
    frame["trial_key"] = [f"{m}@{v}|{d}|{r}|{s}|{i}" for m, v, d, r, s, i in frame[KEY].itertuples(index=False)]
    store = tmp_path / "runs.sqlite"
    with Store(store) as written:  # the schema a sweep writes, every column of the record
        written.write_rows(frame.to_dict("records"))
    monkeypatch.setenv("COLUMNS", "200")
    expected = [
        (["--summary"], _before(store, summary=True)),
        (["--workflow"], _before(store, workflow=True)),
        ([], _before(store)),
    ]
    statements: list[str] = []
    connect = store_module.connect_read_only

    def traced(path, *args):
        db = connect(path, *args)
        db.set_trace_callback(statements.append)
        return db

    monkeypatch.setattr(store_module, "connect_read_only", traced)
    for flags, before in expected:
        statements.clear()
        shown = CliRunner().invoke(app, ["show", "--store", str(store), *flags])
        assert shown.exit_code == 0, shown.output
        whole = [q for q in statements if "FROM trials" in q and ("*" in q or "config_json" in q)]
        assert statements and not whole, (flags, whole)  # the rows' keys, configurations and JSON stay in the store
        assert shown.stdout == before, flags
        assert "mlp" in before and ("mlp@v2" in before) == (flags != ["--workflow"])  # the workflow names no version
