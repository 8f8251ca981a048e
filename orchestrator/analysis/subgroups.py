"""The 22 dataset subgroups: 7 properties, fixed boundaries, mutually exclusive within a property.

Boundaries are data, below, and do not change between label regimes. Each bin is the half-open
interval [low, high). The source paper's Table 12 lists its own boundaries, which its summary does
not reproduce; these were chosen to split the property ranges of SPEC §5 (183 to 568,795 nodes,
12 to 8,710 features, 2 to 70 classes, adjusted homophily about -0.3 to 0.94) at conventional,
round thresholds, and to keep the paper's named conditions (more than ten classes,
high-dimensional features, heterophily) as their own subgroups.

``class_imbalance`` is read as the ratio of the largest to the smallest class size (>= 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

INF = math.inf

PROPERTY_COLUMNS = (
    "num_nodes",
    "avg_degree",
    "adjusted_homophily",
    "feature_dim",
    "feature_nonzero_fraction",
    "num_classes",
    "class_imbalance",
)
STATS_COLUMNS = ("dataset", *PROPERTY_COLUMNS)


@dataclass(frozen=True)
class Subgroup:
    property: str
    name: str
    low: float  # inclusive
    high: float  # exclusive

    def contains(self, value: float) -> bool:
        return self.low <= value < self.high


SUBGROUPS: tuple[Subgroup, ...] = (
    # node count (4)
    Subgroup("num_nodes", "nodes < 3k", -INF, 3_000),
    Subgroup("num_nodes", "nodes 3k-20k", 3_000, 20_000),
    Subgroup("num_nodes", "nodes 20k-100k", 20_000, 100_000),
    Subgroup("num_nodes", "nodes >= 100k", 100_000, INF),
    # average degree (3)
    Subgroup("avg_degree", "avg degree < 5", -INF, 5),
    Subgroup("avg_degree", "avg degree 5-15", 5, 15),
    Subgroup("avg_degree", "avg degree >= 15", 15, INF),
    # adjusted homophily (3)
    Subgroup("adjusted_homophily", "heterophilous (h_adj < 0.2)", -INF, 0.2),
    Subgroup("adjusted_homophily", "mid homophily (0.2-0.6)", 0.2, 0.6),
    Subgroup("adjusted_homophily", "homophilous (h_adj >= 0.6)", 0.6, INF),
    # feature dimension (3)
    Subgroup("feature_dim", "features < 128", -INF, 128),
    Subgroup("feature_dim", "features 128-999", 128, 1_000),
    Subgroup("feature_dim", "features >= 1000", 1_000, INF),
    # feature nonzero fraction (3)
    Subgroup("feature_nonzero_fraction", "sparse features (nnz < 5%)", -INF, 0.05),
    Subgroup("feature_nonzero_fraction", "mid density (5-50%)", 0.05, 0.5),
    Subgroup("feature_nonzero_fraction", "dense features (nnz >= 50%)", 0.5, INF),
    # class count (3)
    Subgroup("num_classes", "binary", -INF, 3),
    Subgroup("num_classes", "3-10 classes", 3, 11),
    Subgroup("num_classes", "> 10 classes", 11, INF),
    # class imbalance, largest / smallest class (3)
    Subgroup("class_imbalance", "balanced (ratio < 2)", -INF, 2),
    Subgroup("class_imbalance", "moderate imbalance (2-10)", 2, 10),
    Subgroup("class_imbalance", "imbalanced (ratio >= 10)", 10, INF),
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
            rows.append({"property": s.property, "subgroup": s.name, "datasets": int(sub[view].notna().sum()),
                         "view": view, "mean_rank": ranks[view].mean(), "mean_score": sub[view].mean()})
    return pd.DataFrame(rows, columns=["property", "subgroup", "datasets", "view", "mean_rank", "mean_score"])
