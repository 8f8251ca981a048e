"""Pretraining-overlap audit: a GFM result on its own pretraining graph never enters a common-universe view."""

from __future__ import annotations

import json

import pandas as pd

from contract.families import load_families
from orchestrator.analysis import overlap as ov
from orchestrator.analysis.tables import compute_analysis
from orchestrator.trial_table import pretraining as pr
from tests.synthetic_trials import trial_rows

DATASETS = ("ogbn-arxiv", "texas", "cora-tag", "wisconsin")


def store() -> pd.DataFrame:
    """gcn (default + one sampled trial) and graphany on four graphs, two splits; graphany 0.99 everywhere."""
    rows = []
    for d_i, dataset in enumerate(DATASETS):
        for split in (0, 1):
            base = 0.6 + 0.05 * d_i + 0.01 * split
            rows += [
                dict(method="gcn", dataset=dataset, split=split, trial_index=0, val_loss=0.5, test_primary=base),
                dict(method="gcn", dataset=dataset, split=split, trial_index=1, val_loss=0.4, test_primary=base + 0.02),
                dict(
                    method="graphany",
                    kind="gfm",
                    dataset=dataset,
                    split=split,
                    trial_index=0,
                    val_loss=0.1,
                    test_primary=0.99,
                ),
            ]
    return trial_rows(rows)


def test_graphany_on_ogbn_arxiv_is_replaced_by_gcn_default_in_every_common_universe_view():
    an = compute_analysis(store(), rounds=5, compute_stats=False)
    main = an.tables["results"]
    ga = main[main["view"] == "graphany"].set_index(["dataset", "split"])
    ref = main[main["view"] == "gcn-Default"].set_index(["dataset", "split"])["score"]
    for dataset in ("ogbn-arxiv", "cora-tag", "wisconsin"):  # arxiv; cora's topology; a checkpoint's graph
        cell = ga.loc[dataset]
        assert cell["overlap"].all() and cell["imputed"].all(), dataset
        assert (cell["score"] == ref.loc[dataset]).all() and not (cell["score"] == 0.99).any()
    assert not ga.loc["texas", "overlap"].any() and (ga.loc["texas", "score"] == 0.99).all()
    per_ds = an.tables["per_dataset"].set_index(["dataset", "view"])
    assert (
        per_ds.loc[("ogbn-arxiv", "graphany"), "score_mean"].tolist()
        == per_ds.loc[("ogbn-arxiv", "gcn-Default"), "score_mean"].tolist()
    )
    # The cohorts without imputation: complete cases keep texas alone, near-complete drops graphany.
    ce = an.tables["cohort_elo"]
    assert set(ce.loc[ce["cohort"] == "complete", "cohort_datasets"]) == {1}
    assert "graphany" not in set(ce.loc[ce["cohort"] == "near_complete", "view"])
    audit = an.tables["pretraining_overlap"]
    assert set(audit["dataset"]) == {"ogbn-arxiv", "cora-tag", "wisconsin"} and audit["replaced"].all()
    assert (audit["omitted_score"] == 0.99).all()
    assert any("pretraining overlap" in s for s in an.tables["findings"]["sentence"])


def test_graph_identity_resolves_aliases_and_shared_topologies():
    assert pr.graph_identity("arxiv") == pr.graph_identity("ogbn-arxiv") == "ogbn-arxiv"
    assert pr.graph_identity("cora-tag") == pr.graph_identity("Cora") == "cora"
    assert pr.graph_identity("my-own-graph") == "my-own-graph"
    res = pd.DataFrame(
        {
            "method_name": ["gvt", "gvt", "gcn", "gvt"],
            "dataset": ["arxiv", "texas", "arxiv", "arxiv"],
            "origin": ["builtin", "builtin", "builtin", "user:x"],
        }
    )
    assert ov.overlapping(res).tolist() == [True, False, False, False]


def test_every_gfm_family_declares_its_pretraining_graphs():
    from methods.families import method_classes

    for family in load_families().values():
        kinds = {cls.kind for cls in method_classes(family)}
        assert (family.pretraining_graphs is not None) == (kinds == {"gfm"}), family.name
    declared = pr.declared_pretraining()
    assert "ogbn-arxiv" in declared["graphany"] and declared["gvt"] == ("ogbn-arxiv",)
    assert {m for m, graphs in declared.items() if not graphs} == {"node4all", "graphpfn", "nodepfn", "g2tfm", "ephris"}
    # every GFM says what its declaration rests on; Ephris's "none" is the vendor's claim, not a paper's
    assert all(f.pretraining_basis for f in load_families().values() if f.pretraining_graphs is not None)
    ephris = ov.declarations(["ephris", "gcn"]).set_index("method")
    assert list(ephris.index) == ["ephris"] and ephris.loc["ephris", "basis"].startswith("vendor claim: synthetic")


def test_the_site_of_a_store_without_validation_metrics_is_written(tmp_path):
    """No val_accuracy recorded: the validation–test gap is unknown and its figure is drawn empty, not a crash."""
    from orchestrator.analysis.site import build_report

    an = build_report(store(), tmp_path / "site", rounds=5, compute_stats=False)
    assert an.tables["validation_test_gap"]["val_gain"].isna().all()
    assert (tmp_path / "site" / "figures" / "validation_test_gap_10-10-80.png").is_file()


def _gfm_results(method: str, dataset: str, config: dict, dataset_hash: str = "h") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "method_name": [method],
            "dataset": [dataset],
            "origin": ["builtin"],
            "config_json": [json.dumps(config)],
            "dataset_hash": [dataset_hash],
        }
    )


def test_overlap_is_judged_per_checkpoint_and_gvt_keeps_the_papers_omission():
    """GraphAny on cora with the arxiv checkpoint selected stays in the common universe, with the cora
    checkpoint it does not; RGVT on ogbn-arxiv (its one pretraining graph) is replaced by gcn-Default."""
    assert not ov.overlapping(_gfm_results("graphany", "cora", {"checkpoint": "arxiv"})).any()
    assert ov.overlapping(_gfm_results("graphany", "cora-tag", {"checkpoint": "cora"})).all()
    assert ov.overlapping(_gfm_results("gvt", "ogbn-arxiv", {"hops": 3})).all()
    rows = store()
    rows["config_json"] = json.dumps({"checkpoint": "arxiv", "weights_file": ""})
    main = compute_analysis(rows, rounds=5, compute_stats=False).tables["results"]
    ga = main[main["view"] == "graphany"].set_index(["dataset", "split"])
    assert not ga.loc["cora-tag", "overlap"].any() and (ga.loc["cora-tag", "score"] == 0.99).all()
    assert ga.loc["ogbn-arxiv", "overlap"].all()  # the arxiv checkpoint on arxiv: replaced


def test_a_copy_of_wisconsin_under_another_name_is_wisconsin(mirror, tmp_path, monkeypatch):
    """Content recognised: no sweep runs the wisconsin checkpoint on the copy; the audit takes it for wisconsin."""
    monkeypatch.setenv("NODEGROUND_CACHE", str(tmp_path / "cache"))  # a private cache: the registration is this test's
    monkeypatch.delenv("NODEGROUND_LOCK", raising=False)
    import numpy as np
    from typer.testing import CliRunner

    from orchestrator.data.registry import dataset_hash, load_dataset
    from orchestrator.data.user import user_registry

    monkeypatch.setenv("NODEGROUND_MIRROR", str(mirror))
    wisconsin = load_dataset("wisconsin")  # cached: its content hash is known offline
    path = tmp_path / "w.npz"
    np.savez(path, x=wisconsin.x, edge_index=wisconsin.edge_index, y=wisconsin.y)
    from orchestrator.cli.main import app

    added = CliRunner().invoke(app, ["datasets", "add", str(path), "--name", "my-webpages"])
    assert added.exit_code == 0 and "same content as wisconsin" in " ".join(added.output.split()), added.output
    assert user_registry()["my-webpages"]["same_content_as"] == ["wisconsin"]
    assert load_dataset("my-webpages").content_hash == wisconsin.content_hash == dataset_hash("my-webpages")
    assert pr.excluded_by_pretraining("graphany", {"checkpoint": "wisconsin"}, "my-webpages")
    assert pr.excluded_by_pretraining("graphany", {"checkpoint": "wisconsin"}, "wisconsin")
    assert not pr.excluded_by_pretraining("graphany", {"checkpoint": "cora"}, "my-webpages")
    assert not pr.excluded_by_pretraining("gvt", {}, "ogbn-arxiv")  # one set of graphs: run, then replaced
    assert ov.overlapping(_gfm_results("graphany", "my-webpages", {"checkpoint": "wisconsin"})).all()
    # Another store's unregistered name with wisconsin's content hash is wisconsin too.
    both = pd.concat(
        [
            _gfm_results("graphany", "wisconsin", {"checkpoint": "arxiv"}, wisconsin.content_hash),
            _gfm_results("graphany", "their-copy", {"checkpoint": "wisconsin"}, wisconsin.content_hash),
        ],
        ignore_index=True,
    )
    assert ov.overlapping(both).tolist() == [False, True]
