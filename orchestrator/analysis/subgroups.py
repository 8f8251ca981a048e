"""The 22 dataset subgroups: 7 properties, fixed boundaries, mutually exclusive within a property.

Boundaries are data, below, and do not change between label regimes. Each bin is the half-open
interval [low, high): 4 + 3 + 4 + 3 + 2 + 3 + 3 = 22 subgroups. The source paper's Table 12 is
not reproduced in its summary; the boundaries are defined once, in ``orchestrator.data.stats``.

``class_imbalance`` is the ratio of the largest to the smallest class size (>= 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from orchestrator.data.stats import SUBGROUP_PROPERTIES as PROPERTY_COLUMNS
from orchestrator.data.stats import SUBGROUPS as STATS_SUBGROUPS

STATS_COLUMNS = ("dataset", *PROPERTY_COLUMNS)


@dataclass(frozen=True)
class Subgroup:
    property: str
    name: str
    low: float  # inclusive
    high: float  # exclusive

    def contains(self, value: float) -> bool:
        return self.low <= value < self.high


# One definition of the boundaries: the dataset statistics label datasets with the same bins.
SUBGROUPS: tuple[Subgroup, ...] = tuple(
    Subgroup(prop, name, low, high) for prop, bins in STATS_SUBGROUPS.items() for name, low, high in bins
)
assert len(SUBGROUPS) == 22 and len({s.property for s in SUBGROUPS}) == 7


def subgroup_table() -> pd.DataFrame:
    """The boundaries as a table (for the report and the docs)."""
    return pd.DataFrame([s.__dict__ for s in SUBGROUPS])


def assign_subgroups(stats: pd.DataFrame) -> pd.DataFrame:
    """Long table (dataset, property, subgroup): one subgroup per property per dataset.

    A dataset whose value for a property is missing gets no subgroup for that property.
    """
    missing = [c for c in STATS_COLUMNS if c not in stats.columns]
    if missing:
        raise KeyError(f"dataset statistics lack column(s): {', '.join(missing)}")
    rows = []
    for rec in stats[list(STATS_COLUMNS)].itertuples(index=False):
        d = rec._asdict()
        for s in SUBGROUPS:
            v = d[s.property]
            if v is not None and not pd.isna(v) and s.contains(float(v)):
                rows.append({"dataset": str(d["dataset"]), "property": s.property, "subgroup": s.name})
    return pd.DataFrame(rows, columns=["dataset", "property", "subgroup"])


def subgroup_ranks(results: pd.DataFrame, stats: pd.DataFrame, metric: str = "score") -> pd.DataFrame:
    """Mean rank of each view within each subgroup (ranks recomputed among the subgroup's datasets).

    Returns long rows: property, subgroup, datasets, view, mean_rank, mean_score.
    """
    from orchestrator.analysis.ranking import dataset_scores

    wide = dataset_scores(results, metric)
    memb = assign_subgroups(stats)
    rows = []
    for s in SUBGROUPS:
        ds = memb.loc[memb["subgroup"] == s.name, "dataset"]
        sub = wide.loc[wide.index.isin(ds)]
        if sub.empty:
            continue
        ranks = sub.rank(axis=1, ascending=False, method="average")
        for view in sub.columns:
            rows.append(
                {
                    "property": s.property,
                    "subgroup": s.name,
                    "datasets": int(sub[view].notna().sum()),
                    "view": view,
                    "mean_rank": ranks[view].mean(),
                    "mean_score": sub[view].mean(),
                }
            )
    return pd.DataFrame(rows, columns=["property", "subgroup", "datasets", "view", "mean_rank", "mean_score"])


def store_dataset_stats(
    datasets: list[str], given: pd.DataFrame | None = None
) -> tuple[pd.DataFrame | None, list[str]]:
    """Statistics of the store's datasets: ``given`` rows (a user's CSV) first, the rest computed.

    A dataset is computed when it loads offline: a built-in synthetic task, a registered user
    dataset, or a catalog task already in the cache or mirror (a report never downloads). Returns
    the table (None when no dataset has statistics) and the names left without statistics.
    """
    from orchestrator.data.registry import DatasetError, catalog, is_available, load_dataset, resolve_name
    from orchestrator.data.stats import dataset_stats

    rows = [] if given is None else [given[list(STATS_COLUMNS)].assign(dataset=given["dataset"].astype(str))]
    have = set() if given is None else set(rows[0]["dataset"])
    skipped = []
    for name in sorted(set(datasets) - have):
        try:
            canonical = resolve_name(name)
        except DatasetError:
            skipped.append(name)
            continue
        entry = catalog().get(canonical.lower())
        if entry is not None and not is_available(entry):
            skipped.append(name)
            continue
        stats = dataset_stats(load_dataset(canonical))
        rows.append(pd.DataFrame([{**{c: stats[c] for c in PROPERTY_COLUMNS}, "dataset": name}]))
    if not rows:
        return None, skipped
    return pd.concat(rows, ignore_index=True)[list(STATS_COLUMNS)], skipped
