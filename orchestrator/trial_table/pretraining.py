"""What a foundation model's configuration was pretrained on, and the sweep's exclusion rule (paper App. C.3).

A GFM whose pretraining used a benchmark graph has not been evaluated held-out on it. Each GFM
family's manifest declares its pretraining graphs (``methods/<family>/manifest.toml``,
``pretraining_graphs``, catalog names); a family whose search chooses among checkpoints declares
each one's graphs (``[pretraining_by.<key>]``), so a configuration is judged by the checkpoint it uses.

Graphs are matched by canonical identity, not by spelling: a name or alias resolves to its
catalog task, a task that shares another's topology (``same_topology_as``, e.g. a
text-attributed variant) counts as that graph, and a registered dataset whose content equals a
known one's counts as that one (``registry.graph_identities``).

The sweep never runs a checkpoint on its own pretraining graph (``excluded_by_pretraining``); the
report's audit (``orchestrator.analysis.overlap``) omits any result that overlaps all the same.
"""

from __future__ import annotations

from functools import lru_cache

from contract.families import Family, load_families


@lru_cache(maxsize=1)
def declared_pretraining() -> dict[str, tuple[str, ...]]:
    """Method name -> pretraining graphs its family's manifest declares (GFM families only; all checkpoints')."""
    return {
        m: f.pretraining_graphs for f in load_families().values() if f.pretraining_graphs is not None for m in f.methods
    }


@lru_cache(maxsize=1)
def families_by_method() -> dict[str, Family]:
    """Method name -> its family, for the GFM families (those that declare pretraining graphs)."""
    return {m: f for f in load_families().values() if f.pretraining_graphs is not None for m in f.methods}


def graph_identities(name: str) -> set[str]:
    """``registry.graph_identities``, imported when needed (the report need not import the dataset loaders)."""
    from orchestrator.data.registry import graph_identities as identities

    return identities(name)


def graph_identity(name: str) -> str:
    """The canonical graph a catalog name stands for: catalog name, then the topology it shares."""
    return min(graph_identities(name))


def pretrained_on(family: Family, config: dict | None) -> set[str]:
    """The canonical graphs the checkpoint ``config`` selects was pretrained on (all of them without a config)."""
    return {graph_identity(g) for g in family.pretrained_on(config)}


def excluded_by_pretraining(method: str, config: dict, dataset: str) -> bool:
    """Whether a sweep skips this configuration on ``dataset``: the checkpoint it selects was pretrained on it.

    Only for a family whose checkpoints' graphs differ (``pretraining_by``); a family pretrained on
    the graph whatever it selects runs, and the audit replaces its result.
    """
    family = families_by_method().get(method)
    if family is None or not family.pretraining_by:
        return False
    return bool(pretrained_on(family, config) & graph_identities(dataset))


def may_exclude(method: str, dataset: str) -> bool:
    """Whether ``excluded_by_pretraining`` can hold for some configuration of ``method`` on ``dataset``.

    A plan counts a cell's trials without spelling out its configurations; only such a cell is spelled out.
    """
    family = families_by_method().get(method)
    if family is None or not family.pretraining_by:
        return False
    return bool(pretrained_on(family, None) & graph_identities(dataset))
