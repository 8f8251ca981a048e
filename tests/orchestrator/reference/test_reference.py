"""The shipped reference: a table its manifest checks, a build that resumes from it, cells chosen by their price."""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3

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
    read_manifest,
    store_rows,
    write_reference,
)
from orchestrator.reference.build import BuildJournal, reference_methods, table_rows
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


@pytest.mark.slow  # a real sweep of 20 trials (about 30 s on two idle cores)
def test_a_first_build_from_nothing_ships_a_table_and_the_next_resumes_from_it(mirror, tmp_path, monkeypatch):
    """`make reference` on a fresh clone: no shipped table and no working store yet (the first build failed on
    'no run store'); the second build finds the table's rows and runs nothing new. One method on one graph, no probe."""
    from typer.testing import CliRunner

    from orchestrator.cli import reference as command

    monkeypatch.setenv("NODEGROUND_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(command, "reference_methods", lambda families: (["mlp"], {"graphpfn": "no weights here"}))
    monkeypatch.setattr(command, "protocol_datasets", lambda protocol: "texas")

    probes = []

    def probe(methods, store, *args):  # the cost probe's records, without its minutes: texas-sized mlp trials
        probes.append(store)  # in the build's own store, on this machine's hardware line
        here = json.dumps({"hardware": command._this_machine(0, 1, store)})
        with Store(store) as target:
            target.write_rows(rows(["mlp"], ["texas"], host=here).to_dict("records"))

    monkeypatch.setattr(command, "run_probe", probe)
    out, store = tmp_path / "shipped", tmp_path / "work" / "lite.sqlite"
    build = ["build", "--hours", "1", "--store", str(store), "--out", str(out)]
    first = CliRunner().invoke(command.app, build)
    assert first.exit_code == 0, first.output
    assert probes == [tmp_path / "work" / "calibration.sqlite"]
    table, manifest = load_reference("lite", out)
    assert (
        manifest.datasets == ["texas"]
        and manifest.methods == ["mlp"]
        and manifest.missing == {"graphpfn": "no weights here"}
    )
    assert len(table) == manifest.rows == 2 * LITE.budget and set(table["protocol"]) == {"lite"}
    shipped_bytes = paths("lite", out)[0].read_bytes()
    assert not BuildJournal(store, {}).path.exists()  # its line is in the manifest now
    store.unlink()  # a fresh clone's second build: only the shipped table
    BuildJournal(store, {"started": "2026-12-07T09:00:00", "commit": "abc"}).beat(wall_s=5400.0, cpu_s=9.0)
    second = CliRunner().invoke(command.app, build)  # ... and a build before it was killed outright (its journal)
    assert second.exit_code == 0, second.output
    said = " ".join(second.output.split())  # the console wraps long lines at the runner's 80 columns
    assert f"{2 * LITE.budget} rows from the shipped table" in said and "runs nothing new" in said
    assert "1 earlier build(s) on this store ended without a manifest line (killed); their 1.50 h" in said
    builds = read_manifest("lite", out).builds
    assert paths("lite", out)[0].read_bytes() == shipped_bytes and len(builds) == 3
    assert builds[1]["killed"] and builds[1]["wall_s"] == 5400.0 and builds[1]["commit"] == "abc"
    assert not BuildJournal(store, {}).path.exists()

    def interrupt(sweep, stores=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "protocol_datasets", lambda protocol: "texas,cornell")
    monkeypatch.setattr(command, "sweep_with_progress", interrupt)  # Ctrl-C during cornell
    third = CliRunner().invoke(command.app, build)
    assert third.exit_code == 130, third.output
    after = read_manifest("lite", out)  # what was complete still ships, and the interrupted build is counted
    assert after.datasets == ["texas"] and "cornell" in after.pending and after.builds[-1]["interrupted"] is True

    # A method joins (as one whose version moved): texas lacks its rows, but mlp's shipped rows are still current, so
    # the builds that measured them stay in the manifest (they were dropped when no dataset was complete).
    monkeypatch.setattr(command, "reference_methods", lambda families: (["mlp", "gcn"], {}))
    monkeypatch.setattr(command, "protocol_datasets", lambda protocol: "texas")
    fourth = CliRunner().invoke(command.app, build)
    assert fourth.exit_code == 130, fourth.output
    grown = read_manifest("lite", out)
    assert grown.datasets == [] and grown.builds[:-1] == after.builds and len(grown.builds) == len(after.builds) + 1


def test_a_build_runs_the_cheapest_datasets_whose_wall_hours_fit(monkeypatch):
    """Hours are the build's own: each dataset's service hours over the services running side by side, cheapest
    first (nodes break ties); the first dataset that does not fit and every dearer one wait (pending, at their whole
    price), a dataset already complete costs nothing and one partly held costs what it lacks."""
    from types import SimpleNamespace

    from orchestrator.reference import build

    service_hours = {"texas": 1.0, "cornell": 2.0, "cora": 3.0, "citeseer": 1.0}  # each dataset one cell here
    cells = [SimpleNamespace(dataset=d, trials=20) for d in service_hours]
    keys = {d: [f"{d}|{i}" for i in range(20)] for d in service_hours}
    plan = SimpleNamespace(
        cells=cells,
        sweep=SimpleNamespace(datasets=tuple(service_hours)),
        trials=lambda chosen: (SimpleNamespace(key=k) for c in chosen for k in keys[c.dataset]),
    )
    monkeypatch.setattr(
        build,
        "estimate_cells",
        lambda plan, model: [SimpleNamespace(seconds=service_hours[c.dataset] * 3600) for c in cells],
    )
    nodes = {"texas": 183, "cornell": 183, "cora": 2708, "citeseer": 3327}
    monkeypatch.setattr(build, "sizes_of", lambda names: {d: SimpleNamespace(nodes=nodes[d]) for d in names})
    sizing = build.size_up(plan, None, hours=1.5, held=set(), parallel=2)  # type: ignore[arg-type]
    assert sizing.run == ["texas", "citeseer"] and sizing.pending == {"cornell": 1.0, "cora": 1.5}
    resumed = build.size_up(plan, None, hours=2.0, held=set(keys["cornell"]), parallel=2)  # type: ignore[arg-type]
    assert resumed.run == ["cornell", "texas", "citeseer"] and list(resumed.pending) == ["cora"]
    assert build.size_up(plan, None, hours=1.5, held=set(), parallel=1).run == ["texas"]  # type: ignore[arg-type]
    # cora three quarters held (a stopped build): a quarter of its 1.5 wall hours is left, cheaper than texas's 0.5
    partly = build.size_up(plan, None, hours=0.5, held=set(keys["cora"][:15]), parallel=2)  # type: ignore[arg-type]
    assert partly.remaining["cora"] == pytest.approx(0.375) and partly.run == ["cora"]
    assert partly.pending == {"texas": 0.5, "citeseer": 0.5, "cornell": 1.0}


@pytest.mark.parametrize(
    "text, message",
    [
        ("[]", "holds an array, not an object"),
        ('{"protocol": 3}', "'protocol' is a number, not a string"),
        ('{"protocol": "lite", "surprise": 1}', "unknown field\\(s\\) surprise"),
        ("{oops", "is not valid JSON"),
    ],
)
def test_a_malformed_manifest_is_one_line(tmp_path, monkeypatch, text, message):
    """Finding 16: a malformed lite.json ended in `error: unexpected ...`."""
    from typer.testing import CliRunner

    import orchestrator.reference as reference
    from orchestrator.cli.main import app

    shipped(tmp_path)
    paths("lite", tmp_path)[1].write_text(text)
    monkeypatch.setattr(reference, "REFERENCE_DIR", tmp_path)
    with pytest.raises(ReferenceError, match=message):
        read_manifest("lite")
    with Store(tmp_path / "mine.sqlite") as store:
        store.write_rows(rows(["mine"], ["texas"]).to_dict("records"))
    show = ["reference", "show", "--out", str(tmp_path)]
    report = ["report", "--store", str(tmp_path / "mine.sqlite"), "--reference", "lite", "--out", str(tmp_path / "s")]
    for args in (show, report):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and result.output.startswith("error: the reference manifest"), result.output
        assert re.search(message, result.output) and result.output.count("\n") == 1, result.output


def test_a_build_runs_again_what_was_measured_on_other_hardware(tmp_path):
    """A reference's costs are one machine's: a working store's rows of another hardware line (the shipped rows of a
    method whose version did not change, measured elsewhere or with other kernels) are superseded, kept, and rerun."""
    from orchestrator.cli.reference import _measure_here

    store = tmp_path / "work.sqlite"
    here, there = "AMD EPYC, 1 thread, native kernels", "Intel(R) Xeon(R) Processor, 1 thread"
    frame = rows(["gcn", "mlp"], ["texas"])
    frame["host_json"] = [json.dumps({"hardware": here if m == "gcn" else there}) for m in frame["method"]]
    with Store(store) as target:
        target.write_rows(frame.to_dict("records"))
    _measure_here(store, here)
    kept = read_trials(store)
    assert set(kept["method"]) == {"gcn"} and len(kept) == (frame["method"] == "gcn").sum()
    db = sqlite3.connect(store)
    assert (
        db.execute("SELECT COUNT(*) FROM superseded_trials WHERE method = 'mlp'").fetchone()[0]
        == (frame["method"] == "mlp").sum()
    )
    _measure_here(store, here)  # nothing left to move
    assert len(read_trials(store)) == len(kept)


def test_a_killed_builds_last_line_is_found_by_the_next_build_and_nothing_else_is(tmp_path):
    store = tmp_path / "lite.sqlite"
    killed = BuildJournal(store, {"started": "2026-12-07T09:00:00", "commit": "abc", "services": 2})
    killed.beat(wall_s=60.0, cpu_s=3.0, load_mean=1.5, cores=2)
    killed.beat(wall_s=120.0, cpu_s=4.0, load_mean=1.7, cores=2)  # its last line is what counts
    assert killed.orphans() == []  # a build is never its own orphan
    next_build = BuildJournal(store, {"started": "2026-12-07T12:00:00"})
    (found,) = next_build.orphans()
    assert found["killed"] and found["wall_s"] == 120.0 and found["cpu_s"] == 4.0 and found["load_mean"] == 1.7
    assert found["datasets_added"] == [] and found["commit"] == "abc" and found["services"] == 2
    next_build.beat(wall_s=1.0)
    assert len(json.loads(next_build.path.read_text())) == 2  # the orphan stays until the manifest holds it
    next_build.close()
    assert not next_build.path.exists() and BuildJournal(store, {}).orphans() == []


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"a": {"wall_s": "lots"}}', '{"a": 3}'])
def test_a_journal_that_does_not_read_as_one_adds_no_build(tmp_path, text):
    journal = BuildJournal(tmp_path / "lite.sqlite", {"started": "now"})
    journal.path.write_text(text)
    assert journal.orphans() == []
    journal.beat(wall_s=1.0)  # and the build writes its own line beside (or over) it
    assert journal.orphans() == [] and journal.key in json.loads(journal.path.read_text())


def test_show_says_which_builds_were_interrupted_killed_or_reconstructed():
    from orchestrator.cli.reference import build_lines

    manifest = read_manifest("lite")
    builds = [
        {"finished": "2026-12-07T10:00", "wall_s": 3600.0, "datasets_added": ["texas"], "interrupted": False},
        {"finished": "2026-12-07T11:00", "wall_s": 60.0, "interrupted": True},
        {"finished": "2026-12-07T12:00", "wall_s": 60.0, "interrupted": True, "killed": True},
        {"finished": "2026-12-07T13:00", "wall_s": 60.0, "interrupted": True, "reconstructed": "from its log"},
    ]
    lines = build_lines(dataclasses.replace(manifest, builds=builds)).splitlines()
    assert lines[1].startswith("  2026-12-07T10:00: texas; 1.00 h")
    assert "nothing new (interrupted);" in lines[2] and "(killed; its time to its last record);" in lines[3]
    assert "nothing new (interrupted) (reconstructed from the line it printed);" in lines[4]
