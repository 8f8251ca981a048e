"""Pretraining-overlap audit (paper App. C.3).

A GFM whose pretraining used a benchmark graph has not been evaluated held-out on it. Each GFM
family's manifest declares its pretraining graphs (``methods/<family>/manifest.toml``,
``pretraining_graphs``, catalog names). In common-universe analyses (the imputed ``all`` cohort:
leaderboards, Pareto fronts, per-dataset tables) such a result is omitted and, like any missing
built-in result, replaced by the matched GCN-Default result; the replacement is marked
``overlap`` and listed in the report.

Graphs are matched by canonical identity, not by spelling: a name or alias resolves to its
catalog task, a task that shares another's topology (``same_topology_as``, e.g. a
text-attributed variant) counts as that graph, a registered dataset whose content equals a
known one's counts as that one (``registry.graph_identities``), and datasets of the store with
one content hash are one graph.

Per checkpoint: a family whose search chooses among checkpoints declares each one's graphs
(``[pretraining_by.<key>]``), and a result is judged by the checkpoint its selected configuration
used (GraphAny on cora with the arxiv checkpoint is held out). The sweep never runs a checkpoint on
its own pretraining graph (``excluded_by_pretraining``); both go beyond the paper (App. C.3), which
omits GraphAny and RGVT on ogbn-arxiv only. A family with one set of graphs (RGVT: ogbn-arxiv) is
judged on all of them, as the paper.
"""

from __future__ import annotations

import json
from functools import lru_cache

import pandas as pd

from contract.families import Family, load_families

_KEYS = ["view", "dataset", "regime", "split"]


@lru_cache(maxsize=1)
def declared_pretraining() -> dict[str, tuple[str, ...]]:
    """Method name -> pretraining graphs its family's manifest declares (GFM families only; all checkpoints')."""
    return {
        m: f.pretraining_graphs for f in load_families().values() if f.pretraining_graphs is not None for m in f.methods
    }


@lru_cache(maxsize=1)
def _families_by_method() -> dict[str, Family]:
    return {m: f for f in load_families().values() if f.pretraining_graphs is not None for m in f.methods}


def graph_identities(name: str) -> set[str]:
    """``registry.graph_identities``, imported when needed (the dataset loaders stay out of the report's imports)."""
    from orchestrator.data.registry import graph_identities as identities

    return identities(name)


def graph_identity(name: str) -> str:
    """The canonical graph a catalog name stands for: catalog name, then the topology it shares."""
    return min(graph_identities(name))


DECLARATION_COLUMNS = ["method", "pretraining_graphs", "basis"]


def declarations(methods: list[str]) -> pd.DataFrame:
    """What each GFM among ``methods`` declares it was pretrained on, and on what authority (its manifest)."""
    families = _families_by_method()
    rows = [
        {
            "method": m,
            "pretraining_graphs": ", ".join(families[m].pretraining_graphs or ()) or "none (synthetic data only)",
            "basis": families[m].pretraining_basis or "undeclared",
        }
        for m in sorted(set(methods))
        if m in families
    ]
    return pd.DataFrame(rows, columns=DECLARATION_COLUMNS)


def excluded_by_pretraining(method: str, config: dict, dataset: str) -> bool:
    """Whether a sweep skips this configuration on ``dataset``: the checkpoint it selects was pretrained on it.

    Only for a family whose checkpoints' graphs differ (``pretraining_by``); a family pretrained on
    the graph whatever it selects runs, and the audit replaces its result.
    """
    family = _families_by_method().get(method)
    if family is None or not family.pretraining_by:
        return False
    graphs = {graph_identity(g) for g in family.pretrained_on(config)}
    return bool(graphs & graph_identities(dataset))


def may_exclude(method: str, dataset: str) -> bool:
    """Whether ``excluded_by_pretraining`` can hold for some configuration of ``method`` on ``dataset``.

    A plan counts a cell's trials without spelling out its configurations; only such a cell is spelled out.
    """
    family = _families_by_method().get(method)
    if family is None or not family.pretraining_by:
        return False
    return bool({graph_identity(g) for g in family.pretraining_graphs or ()} & graph_identities(dataset))


def overlapping(results: pd.DataFrame, declared: dict[str, tuple[str, ...]] | None = None) -> pd.Series:
    """Boolean mask: built-in GFM results on a graph the selected configuration's pretraining used.

    ``declared`` (method -> graphs) replaces the manifests, judging every configuration alike.
    """
    families = _families_by_method()
    identities = {d: graph_identities(d) for d in results["dataset"].astype(str).unique()}
    if "dataset_hash" in results.columns:  # one content in the store: one graph, whatever its names
        by_hash: dict[str, set[str]] = {}
        for d, h in results[["dataset", "dataset_hash"]].drop_duplicates().astype(str).itertuples(index=False):
            by_hash.setdefault(h, set()).update(identities[d])
        for d, h in results[["dataset", "dataset_hash"]].drop_duplicates().astype(str).itertuples(index=False):
            if h not in ("", "nan"):
                identities[d] = identities[d] | by_hash[h]
    configs = results["config_json"] if "config_json" in results.columns else pd.Series(None, index=results.index)
    parsed: dict[str, dict | None] = {}

    def graphs_of(method: str, config_json) -> set[str]:
        if declared is not None:
            return {graph_identity(g) for g in declared.get(method, ())}
        family = families.get(method)
        if family is None:
            return set()
        key = str(config_json)
        if key not in parsed:
            try:
                parsed[key] = json.loads(key) if isinstance(config_json, str) else None
            except ValueError:
                parsed[key] = None
        return {graph_identity(g) for g in family.pretrained_on(parsed[key])}

    names = results["method_name"].astype(str)
    hit = [
        bool(graphs_of(m, c) & identities[d])
        for m, c, d in zip(names, configs, results["dataset"].astype(str), strict=True)
    ]
    return pd.Series(hit, index=results.index, dtype=bool) & (results["origin"].astype(str) == "builtin")


def audit(
    results: pd.DataFrame, declared: dict[str, tuple[str, ...]] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(held-out results, omitted results): the results without pretraining overlaps, and those removed."""
    mask = overlapping(results, declared)
    return results[~mask].reset_index(drop=True), results[mask].reset_index(drop=True)


def mark_replacements(main: pd.DataFrame, omitted: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Flag the imputed rows of ``main`` that stand in for an omitted result; and the audit table.

    The table lists each omitted result with its own score and the score that replaced it.
    """
    main = main.assign(overlap=False)
    cols = ["regime", "view", "dataset", "split", "omitted_score", "replacement_score", "replaced"]
    if omitted.empty:
        return main, pd.DataFrame(columns=cols)
    keys = omitted[_KEYS].assign(_omitted=True)
    m = main.merge(keys, on=_KEYS, how="left")
    main["overlap"] = m["_omitted"].fillna(False).astype(bool).to_numpy() & main["imputed"].astype(bool).to_numpy()
    table = (
        omitted[[*_KEYS, "score"]]
        .rename(columns={"score": "omitted_score"})
        .merge(
            main.loc[main["overlap"], [*_KEYS, "score"]].rename(columns={"score": "replacement_score"}),
            on=_KEYS,
            how="left",
        )
    )
    table["replaced"] = table["replacement_score"].notna()
    return main, table[cols].sort_values(["regime", "view", "dataset", "split"]).reset_index(drop=True)
