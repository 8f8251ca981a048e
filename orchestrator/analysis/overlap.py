"""Pretraining-overlap audit (paper App. C.3).

A GFM whose pretraining used a benchmark graph has not been evaluated held-out on it (what each
configuration was pretrained on, and how graphs are matched: ``orchestrator.trial_table.pretraining``).
In common-universe analyses (the imputed ``all`` cohort: leaderboards, Pareto fronts, per-dataset
tables) such a result is omitted and, like any missing built-in result, replaced by the matched
GCN-Default result; the replacement is marked ``overlap`` and listed in the report. Besides the
matching of the rule, datasets of the store with one content hash are one graph.

Per checkpoint: a result is judged by the checkpoint its selected configuration used (GraphAny on
cora with the arxiv checkpoint is held out). The sweep never runs a checkpoint on its own
pretraining graph (``excluded_by_pretraining``); both go beyond the paper (App. C.3), which omits
GraphAny and RGVT on ogbn-arxiv only. A family with one set of graphs (RGVT: ogbn-arxiv) is judged
on all of them, as the paper.
"""

from __future__ import annotations

import json

import pandas as pd

from orchestrator.trial_table.pretraining import families_by_method, graph_identities, graph_identity, pretrained_on

_KEYS = ["view", "dataset", "regime", "split"]


DECLARATION_COLUMNS = ["method", "pretraining_graphs", "basis"]


def declarations(methods: list[str]) -> pd.DataFrame:
    """What each GFM among ``methods`` declares it was pretrained on, and on what authority (its manifest)."""
    families = families_by_method()
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


def overlapping(results: pd.DataFrame, declared: dict[str, tuple[str, ...]] | None = None) -> pd.Series:
    """Boolean mask: built-in GFM results on a graph the selected configuration's pretraining used.

    ``declared`` (method -> graphs) replaces the manifests, judging every configuration alike.
    """
    families = families_by_method()
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
        return pretrained_on(family, parsed[key])

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
