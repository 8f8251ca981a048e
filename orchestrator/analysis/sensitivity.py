"""Task-type leaderboards (paper §5.1) and metric sensitivity (paper App. A.1).

- Task-type leaderboards: Elo and mean rank on binary tasks alone (AUROC) and on multiclass tasks
  alone (accuracy), per regime: the same rules as the main leaderboard on a subset of datasets.
- Metric sensitivity: the same leaderboard recomputed on each secondary metric of a task type
  (multiclass: accuracy, macro-F1, cross-entropy; binary: accuracy, positive-class precision,
  binary cross-entropy), with its ordering compared to the primary metric's on the same datasets
  (Spearman and Kendall correlation of the Elo orderings, and each method's change of position).
  Cross-entropy is lower-is-better, so it enters the battles negated.

Selection is untouched: every metric is read off the trial that validation loss selected.
"""

from __future__ import annotations

import pandas as pd
from scipy import stats

from orchestrator.analysis import elo as elo_mod
from orchestrator.analysis import ranking as rk
from orchestrator.records import TASK_BINARY, TASK_MULTICLASS

#: Per task type: metric label -> (result column, higher is better). The first is the primary
#: (orchestrator.records.primary_metric_name; tests/orchestrator/analysis checks they agree).
METRICS: dict[str, dict[str, tuple[str, bool]]] = {
    TASK_MULTICLASS: {
        "accuracy": ("test_accuracy", True),
        "macro_f1": ("test_macro_f1", True),
        "cross_entropy": ("test_cross_entropy", False),
    },
    TASK_BINARY: {
        "auroc": ("test_auroc", True),
        "accuracy": ("test_accuracy", True),
        "precision": ("test_precision", True),
        "cross_entropy": ("test_cross_entropy", False),
    },
}
BOARD_COLUMNS = ["view", "elo", "lower", "upper", "mean_rank", "rank_iqr", "datasets", "position"]


def board(
    results: pd.DataFrame,
    column: str = "score",
    higher_is_better: bool = True,
    anchor: str | None = None,
    rounds: int = elo_mod.BOOTSTRAP_ROUNDS,
) -> pd.DataFrame:
    """Elo (with interval) and mean rank of each view on one metric column; position 1 = best Elo."""
    r = results.assign(_metric=results[column] if higher_is_better else -results[column]).dropna(subset=["_metric"])
    if r["view"].nunique() < 2:
        return pd.DataFrame(columns=BOARD_COLUMNS)
    e = elo_mod.elo_ratings(r, anchor=anchor, rounds=rounds, metric="_metric")
    mr = rk.mean_rank(r, "_metric")[["view", "mean_rank", "rank_iqr"]]
    out = e[["view", "elo", "lower", "upper", "datasets"]].merge(mr, on="view", how="left")
    out["position"] = out["elo"].rank(ascending=False, method="min").astype(int)
    return out[BOARD_COLUMNS].sort_values("position").reset_index(drop=True)


def _agreement(a: pd.Series, b: pd.Series) -> tuple[float, float]:
    """Spearman and Kendall correlation of two orderings; NaN when either is constant or too short."""
    if len(a) < 3 or a.nunique() < 2 or b.nunique() < 2:
        return float("nan"), float("nan")
    return float(stats.spearmanr(a, b).statistic), float(stats.kendalltau(a, b).statistic)


TASK_TYPE_COLUMNS = ["regime", "task_type", "metric", *BOARD_COLUMNS]


def primary_boards(boards: pd.DataFrame) -> pd.DataFrame:
    """The task-type leaderboards out of ``metric_sensitivity``'s boards (their primary metric), computed once."""
    return boards[boards["primary"].astype(bool)][TASK_TYPE_COLUMNS].reset_index(drop=True)


def metric_sensitivity(
    results: pd.DataFrame, anchor: str | None = None, rounds: int = elo_mod.BOOTSTRAP_ROUNDS
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(boards, summary): every metric's leaderboard per regime and task type, and its agreement with the primary.

    ``boards`` holds one row per (regime, task_type, metric, view) with ``primary_position`` and
    ``position_change`` (positive: the view ranks better on this metric). ``summary`` holds one row
    per (regime, task_type, metric): Spearman and Kendall correlation with the primary ordering,
    the number of views whose position changed, and the view that moved most.
    """
    boards, summary = [], []
    for (regime, task), r in results.groupby(["regime", "task_type"], observed=True, sort=True):
        metrics = METRICS.get(str(task))
        if not metrics:
            continue
        primary = None
        for i, (name, (column, higher)) in enumerate(metrics.items()):
            if column not in r.columns or r[column].notna().sum() == 0:
                continue
            b = board(r, column, higher, anchor, rounds)
            if b.empty:
                continue
            if i == 0:
                primary = b.set_index("view")["position"]
            if primary is None:
                continue
            b["primary_position"] = b["view"].map(primary)
            b["position_change"] = b["primary_position"] - b["position"]
            boards.append(b.assign(regime=regime, task_type=task, metric=name, primary=i == 0))
            if i == 0:
                continue
            both = b.dropna(subset=["primary_position"])
            rho, tau = _agreement(both["primary_position"], both["position"])
            mover = both.loc[both["position_change"].abs().idxmax()] if len(both) else None
            summary.append(
                {
                    "regime": regime,
                    "task_type": task,
                    "metric": name,
                    "views": len(both),
                    "datasets": int(r.dropna(subset=[column])["dataset"].nunique()),
                    "spearman": rho,
                    "kendall": tau,
                    "changed_positions": int((both["position_change"] != 0).sum()),
                    "largest_move_view": None if mover is None else mover["view"],
                    "largest_move": 0 if mover is None else int(mover["position_change"]),
                }
            )
    cols = ["regime", "task_type", "metric", "primary", *BOARD_COLUMNS, "primary_position", "position_change"]
    boards_df = pd.concat(boards, ignore_index=True)[cols] if boards else pd.DataFrame(columns=cols)
    scols = [
        "regime",
        "task_type",
        "metric",
        "views",
        "datasets",
        "spearman",
        "kendall",
        "changed_positions",
        "largest_move_view",
        "largest_move",
    ]
    return boards_df, pd.DataFrame(summary, columns=scols)
