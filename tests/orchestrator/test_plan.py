"""A plan from data alone: cells counted from the descriptions, keys from the catalog, shards by one rule; no service,
no dataset, no download; a store's done trials counted without its datasets."""

from __future__ import annotations

import copy
import dataclasses
import sqlite3

import pytest

from contract.families import load_families
from orchestrator.data import registry
from orchestrator.data.cache import catalog_identity, entry_key
from orchestrator.plan import SweepPlan, described_specs, make_plan, stored_done
from orchestrator.records import TrialRecord
from orchestrator.services.directory import resolve_methods
from orchestrator.store import Store, legacy_plan_id
from tests.orchestrator.whole_plan import shard_of, whole_plan_record

CATALOG = tuple(t["name"] for t in registry.tasks())


def _specs(methods: tuple[str, ...]) -> dict:
    return described_specs(methods, resolve_methods(list(methods), load_families()))


@pytest.fixture
def no_data(monkeypatch, tmp_path):
    """Any dataset load, file fetch or cache write fails the test; the cache directory must stay absent."""
    cache = tmp_path / "empty-cache"
    monkeypatch.setenv("NODEGROUND_CACHE", str(cache))
    monkeypatch.delenv("NODEGROUND_MIRROR", raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError(f"planning touched data: {args}")

    for target in ("orchestrator.data.registry.load_dataset", "orchestrator.data.registry.run_loader"):
        monkeypatch.setattr(target, refuse)
    monkeypatch.setattr("orchestrator.data.fetch.fetch", refuse)
    yield cache
    assert not cache.exists(), "planning wrote into the cache"


def test_every_catalog_dataset_plans_without_its_data(no_data):
    methods = ("gcn", "graphany", "nodepfn")
    plan = make_plan(SweepPlan(methods, CATALOG, ("10/10/80", "50/25/25"), (0, 1), budget=201), _specs(methods))
    assert len(plan.cells) == len(methods) * len(CATALOG) * 2 * 2
    assert (
        plan.total == sum(c.trials for c in plan.cells) and plan.cells[-1].start + plan.cells[-1].trials == plan.total
    )
    assert {c.trials for c in plan.cells if c.method == "gcn"} == {201}  # a float space never runs out
    assert max(c.trials for c in plan.cells if c.method == "graphany") < 201  # a small space does
    assert set(plan.identities.values()) == {catalog_identity(registry.catalog()[d]) for d in CATALOG}


def test_spelled_out_trials_agree_with_the_cells_and_the_shard_rule(no_data):
    methods = ("mlp", "graphpfn")
    plan = make_plan(SweepPlan(methods, ("cora", "texas"), ("10/10/80",), (0, 1, 2), budget=30), _specs(methods))
    trials = list(plan.trials())
    assert len(trials) == plan.total and len({t.key for t in trials}) == plan.total
    for count in (1, 3, 7):
        per_cell = plan.shards(count)
        per_trial = shard_of(trials, count)
        expanded = [shard for cell, shard in zip(plan.cells, per_cell, strict=True) for _ in range(cell.trials)]
        assert per_trial == expanded
        assert sum(len(list(plan.trials(plan.shard_cells(i, count)))) for i in range(count)) == plan.total


def _small(methods=("mlp", "graphany"), datasets=("cora", "texas"), regimes=("10/10/80",), splits=(0, 1), budget=12):
    return SweepPlan(methods, datasets, regimes, splits, budget)


def _keys(plan) -> list[str]:
    return [t.key for t in plan.trials()]


def _changed_spec(method: str, **fields) -> dict:
    specs = _specs(("mlp", "graphany"))
    return {**specs, method: dataclasses.replace(specs[method], **fields)}


def test_the_plan_id_is_one_per_plan_and_differs_when_any_planned_trial_would(no_data):
    """Any change that alters a trial or the plan's order changes the id; what alters neither does not."""
    specs = _specs(("mlp", "graphany"))
    base = make_plan(_small(), specs)
    mlp = specs["mlp"]
    wider = (dataclasses.replace(mlp.search_space[0], high=mlp.search_space[0].high * 2), *mlp.search_space[1:])
    first = mlp.search_space[0].name
    variants = {
        "budget": make_plan(_small(budget=13), specs),
        "dataset identity": make_plan(_small(), specs, {**base.identities, "texas": "catalog:another"}),
        "method version": make_plan(_small(), _changed_spec("mlp", version="other")),
        "search space": make_plan(_small(), _changed_spec("mlp", search_space=wider)),
        "default": make_plan(_small(), _changed_spec("mlp", default_config={**mlp.default_config, first: 0.5})),
        "dataset order": make_plan(_small(datasets=("texas", "cora")), specs),
        "method order": make_plan(_small(methods=("graphany", "mlp")), specs),
        "regimes": make_plan(_small(regimes=("10/10/80", "50/25/25")), specs),
        "splits": make_plan(_small(splits=(0, 2)), specs),
    }
    for name, variant in variants.items():
        assert _keys(variant) != _keys(base), name  # the variant does alter the planned trials (or their order)
        assert variant.plan_id() != base.plan_id(), name
    same = [make_plan(dataclasses.replace(_small(), shard=(index, 4)), specs) for index in range(4)] + [
        make_plan(dataclasses.replace(_small(), time_limit=60.0), specs)
    ]
    assert {p.plan_id() for p in same} == {base.plan_id()}  # every shard, any time limit: one plan


def test_the_plan_id_tells_which_configurations_a_checkpoints_pretraining_leaves_out(no_data, monkeypatch):
    """Two rules that leave out as many configurations, but not the same ones, give the cells equal counts and
    different keys: the id still tells them apart (a manifest whose checkpoints swapped pretraining graphs)."""
    specs = _specs(("graphany",))
    sweep = _small(methods=("graphany",), datasets=("cora",), splits=(0,))
    configs = [t.config for t in make_plan(sweep, specs).trials()]
    seen = []
    for left_out in configs[1], configs[2]:  # the rule is read whenever trials are spelled out: each one's plan now
        monkeypatch.setattr("orchestrator.plan.excluded_by_pretraining", lambda m, c, d, x=left_out: c == x)
        plan = make_plan(sweep, specs)
        seen.append((plan.cells, _keys(plan), plan.plan_id()))
    (cells, keys, plan_id), (other_cells, other_keys, other_id) = seen
    assert cells == other_cells and keys != other_keys and plan_id != other_id


def test_a_shards_record_is_the_whole_plans_spelled_out_trial_by_trial(no_data):
    """Counts and keys from the cells equal those of every trial enumerated (the record before plan ids digested
    the definition); only the plan id's kind differs."""
    plan = make_plan(_small(), _specs(("mlp", "graphany")))
    for count in (1, 3, 7):
        for index in range(count):
            keys = (t.key for t in plan.trials(plan.shard_cells(index, count)))
            record, whole = plan.shard_record(index, count, keys), whole_plan_record(plan, index, count)
            assert (record.shards, record.shard, record.counts, record.keys) == (
                whole.shards, whole.shard, whole.counts, whole.keys
            )  # fmt: skip
            assert record.plan_id == plan.plan_id() and not legacy_plan_id(record.plan_id)
            assert legacy_plan_id(whole.plan_id)


def test_a_catalog_identity_is_what_the_catalog_pins(monkeypatch):
    entry = copy.deepcopy(registry.catalog()["cora"])
    assert all(f["sha256"] != "unverified" for f in entry["files"])
    assert catalog_identity(entry) == "catalog:" + entry_key(entry)  # pinned files: the identity is the cache key
    changed = copy.deepcopy(entry)
    changed["files"][0]["sha256"] = "0" * 64
    assert catalog_identity(changed) != catalog_identity(entry)
    loader = copy.deepcopy(entry)
    loader["args"] = {**loader["args"], "extra": 1}
    assert catalog_identity(loader) != catalog_identity(entry)
    today = registry.dataset_identity("cora")
    assert today == catalog_identity(entry)
    monkeypatch.setattr("orchestrator.data.cache.CANONICAL_VERSION", "nodeground-canonical-v2")
    assert registry.dataset_identity("cora") != today  # a loaders' version bump renews every identity
    unverified = copy.deepcopy(entry)
    unverified["files"][0]["sha256"] = "unverified"
    assert entry_key(unverified) is None and catalog_identity(unverified).startswith("catalog:")


def _row(key: str, dataset: str, content: str, index: int) -> TrialRecord:
    method, _, regime, split, *_ = key.split("|")
    return TrialRecord(
        trial_key=key, method=method.split("@")[0], method_version=method.split("@")[1], family="gnn",
        kind="supervised", dataset=dataset, dataset_hash=content, task_type="multiclass", num_classes=5,
        regime=regime, split=int(split), trial_index=index, is_default=index == 0, config_json="{}", config_hash="x",
        seed=int(split), status="ok",
    )  # fmt: skip


def test_a_store_counts_done_by_key_and_upgrades_old_keys_only_when_the_content_is_known(tmp_path, monkeypatch):
    monkeypatch.setenv("NODEGROUND_CACHE", str(tmp_path / "cache"))
    plan = make_plan(SweepPlan(("mlp",), ("texas", "cora"), ("10/10/80",), (0,), budget=4), _specs(("mlp",)))
    trials = list(plan.trials())
    texas = [t for t in trials if t.dataset == "texas"]
    cora = [t for t in trials if t.dataset == "cora"]
    identity = plan.identities["cora"]
    with Store(tmp_path / "r.sqlite") as store:
        store.write_many(_row(t.key, "texas", "a" * 64, t.index) for t in texas[:3])  # today's keys
        # a store written before catalog identities: cora's keys end in its content hash
        store.write_many(_row(t.key.replace(identity, "c" * 64), "cora", "c" * 64, t.index) for t in cora[:2])
    held = stored_done(tmp_path / "r.sqlite", plan)
    assert held.per_cell == [3, 0] and held.unmatched_legacy == 2  # cora's content is not known here: not counted
    monkeypatch.setattr("orchestrator.plan.known_content_hash", lambda name: "c" * 64 if name == "cora" else None)
    assert stored_done(tmp_path / "r.sqlite", plan).per_cell == [3, 2]
    monkeypatch.setattr("orchestrator.plan.known_content_hash", lambda name: "d" * 64)  # cora changed since
    held = stored_done(tmp_path / "r.sqlite", plan)
    assert held.per_cell == [3, 0] and held.unmatched_legacy == 0


def test_rekeying_moves_only_the_named_content_and_keeps_a_key_already_there(tmp_path):
    with Store(tmp_path / "r.sqlite") as store:
        store.write(_row("m@v|cora|10/10/80|0|h1|" + "c" * 64, "cora", "c" * 64, 0))
        store.write(_row("m@v|cora|10/10/80|0|h2|" + "c" * 64, "cora", "c" * 64, 1))
        assert store.contents_keyed_otherwise("cora", "catalog:x") == {"c" * 64}
        assert store.rekey_content("cora", "c" * 64, "catalog:x") == 2
        assert store.contents_keyed_otherwise("cora", "catalog:x") == set()
        assert store.rekey_content("cora", "c" * 64, "catalog:x") == 0
    with sqlite3.connect(tmp_path / "r.sqlite") as db:
        keys = sorted(k for (k,) in db.execute("SELECT trial_key FROM trials"))
    assert keys == ["m@v|cora|10/10/80|0|h1|catalog:x", "m@v|cora|10/10/80|0|h2|catalog:x"]
