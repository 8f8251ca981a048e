"""Pretraining-overlap audit (paper App. C.3).

A GFM whose pretraining used a benchmark graph has not been evaluated held-out on it. Each GFM
family's manifest declares its pretraining graphs (``methods/<family>/manifest.toml``,
``pretraining_graphs``, catalog names). In common-universe analyses (the imputed ``all`` cohort:
leaderboards, Pareto fronts, per-dataset tables) such a result is omitted and, like any missing
built-in result, replaced by the matched GCN-Default result; the replacement is marked
``overlap`` and listed in the report.

Graphs are matched by canonical identity, not by spelling: a name or alias resolves to its
catalog task, and a task that shares another's topology (``same_topology_as``, e.g. a
text-attributed variant) counts as that graph.
"""

from __future__ import annotations

from functools import lru_cache

import pandas as pd

from contract.families import load_families

_KEYS = ["view", "dataset", "regime", "split"]


@lru_cache(maxsize=1)
def declared_pretraining() -> dict[str, tuple[str, ...]]:
    """Method name -> pretraining graphs its family's manifest declares (GFM families only)."""
    return {
        m: f.pretraining_graphs for f in load_families().values() if f.pretraining_graphs is not None for m in f.methods
    }


def graph_identity(name: str) -> str:
    """The canonical graph a dataset name stands for: catalog name, then the topology it shares."""
    from orchestrator.data.registry import catalog

    entry = catalog().get(str(name).strip().lower())
    if entry is None:
        return str(name).strip().lower()
    return str(entry.get("same_topology_as", entry["name"])).lower()


def overlapping(results: pd.DataFrame, declared: dict[str, tuple[str, ...]] | None = None) -> pd.Series:
    """Boolean mask: built-in GFM results on a graph the method's pretraining used."""
    declared = declared_pretraining() if declared is None else declared
    graphs = {m: {graph_identity(g) for g in gs} for m, gs in declared.items()}
    ident = {d: graph_identity(d) for d in results["dataset"].astype(str).unique()}
    names = results["method_name"].astype(str)
    ds = results["dataset"].astype(str).map(ident)
    hit = [ds_i in graphs.get(m, ()) for m, ds_i in zip(names, ds, strict=True)]
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
