"""The selection rule, per tuning budget, and the workflow costs it implies: the one definition.

A *budget* of k means "the first k trials" (trial_index < k) of a search: k = 1 is the default
configuration alone, and ``FULL`` is every executed trial. For each budget:

- training-and-tuning time = sum of each fit's time over every executed trial within the
  budget (failed trials count with whatever time they recorded; a missing time counts 0); a call's
  time is ``records.call_seconds``: the service's CPU seconds on a CPU, its wall seconds on a GPU;
- the selected trial = the lowest validation loss among "ok" trials with a finite validation
  loss within the budget (ties go to the earlier trial); nothing else takes part in selection;
- prediction time = the selected trial's predict time, by the same rule;
- workflow time = training-and-tuning time + prediction time;
- workflow peak memory = max(fit peak over every executed trial within the budget, predict peak
  of the selected trial), in GPU bytes when any GPU peak of that method is > 0 in the table and
  in CPU RSS bytes otherwise (``memory_kind`` says which).

Budgets are *measured* here. The Pareto trajectories interpolate cost linearly between the
measured default and full-search endpoints instead (``orchestrator.analysis.views``).

What a selection is shown as is defined here too, so that `show` names and keeps the views as the
report does: ``default_view`` and ``single_trial_searches_dropped``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from orchestrator.records import STATUS_OK, call_seconds

#: Intermediate tuning budgets (numbers of first trials) reported for supervised methods.
BUDGETS: tuple[int, ...] = (1, 2, 5, 10, 25, 50, 100, 200)
#: The label of the full-search budget in the ``budget`` column.
FULL = "full"

_KEYS = ("method", "dataset", "regime", "split")

#: What a budget's workflow costs: its training and tuning, prediction and total time and peak memory.
COST_COLUMNS = (
    "training_tuning_s",
    "prediction_s",
    "workflow_s",
    "fit_peak_bytes",
    "predict_peak_bytes",
    "workflow_peak_bytes",
    "memory_kind",  # "gpu" or "cpu"
)
OUTPUT_COLUMNS = (
    "budget",  # "1", "2", ..., or FULL
    "k",  # trial slots considered: the budget number, or (max trial_index + 1) for FULL
    "n_trials",  # executed trials within the budget (any status)
    "n_ok",  # trials within the budget that could be selected
    "selected_trial_index",  # <NA> when no trial within the budget could be selected
    *COST_COLUMNS,
)


def selectable(status: np.ndarray, val_loss: np.ndarray) -> np.ndarray:
    """The selection rule's candidates: "ok" trials with a finite validation loss; nothing else takes part."""
    return (status == STATUS_OK) & np.isfinite(val_loss)


def running_selection(
    candidate: np.ndarray, val_loss: np.ndarray, group_of_row: np.ndarray, starts: np.ndarray
) -> np.ndarray:
    """The selection rule, for every prefix of every group at once.

    Rows are sorted by group, then trial index; ``starts`` are the groups' first rows. For each row,
    the position of the trial selected among its group's rows up to it (the lowest validation loss
    among candidates; ties go to the earlier trial), NaN while no candidate has been seen.
    """
    vl = np.where(candidate, val_loss, np.inf)
    running_min = pd.Series(vl).groupby(group_of_row).cummin().to_numpy()
    prev_min = np.r_[np.inf, running_min[:-1]] if len(vl) else running_min
    prev_min[starts] = np.inf
    new_best = candidate & (vl < prev_min)
    return pd.Series(np.where(new_best, np.arange(len(vl)), np.nan)).groupby(group_of_row).ffill().to_numpy()


def _call_seconds(trials: pd.DataFrame, call: str) -> np.ndarray:
    """Each row's ``call`` ("fit" or "predict") time by the one rule (``records.call_seconds``)."""
    return call_seconds(
        _num(trials, f"{call}_service_s"), _num(trials, f"{call}_cpu_s"), _num(trials, f"{call}_peak_gpu_bytes")
    )


def _num(trials: pd.DataFrame, col: str) -> np.ndarray:
    if col not in trials.columns:
        return np.full(len(trials), np.nan)
    return pd.to_numeric(trials[col], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


@dataclass(frozen=True)
class _Running:
    """The trials sorted by group, then trial index, and each row's figures over its group's rows up to it."""

    trials: pd.DataFrame
    groups: pd.DataFrame  # each group's keys
    starts: np.ndarray  # each group's first row
    sizes: np.ndarray
    group_of_row: np.ndarray
    row_in_group: np.ndarray
    trial_index: np.ndarray
    use_gpu: np.ndarray  # the row's method reports GPU bytes
    predict_peak: np.ndarray
    fit_s: np.ndarray  # training and tuning time so far
    fit_peak: np.ndarray  # the largest fit peak so far; -1 for none
    n_ok: np.ndarray
    selected: np.ndarray  # the selected row so far (``running_selection``)


def _sorted_groups(trials: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """(the trials sorted by group, then trial index; each group's first row; each group's size)."""
    order = np.lexsort(
        [trials["trial_index"].to_numpy()] + [pd.factorize(trials[k], sort=True)[0] for k in reversed(keys)]
    )
    df = trials.iloc[order]
    gid = df.groupby(keys, sort=False, observed=True, dropna=False).ngroup().to_numpy()
    # gid is contiguous after the sort; group boundaries follow from its changes.
    starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
    return df, starts, np.diff(np.r_[starts, len(df)])


def _memory_peaks(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(uses GPU, fit peak, predict peak) per row: GPU bytes when the method ever reported any, CPU RSS otherwise."""
    fit_gpu, pred_gpu = _num(df, "fit_peak_gpu_bytes"), _num(df, "predict_peak_gpu_bytes")
    uses_gpu_row = (np.nan_to_num(fit_gpu) > 0) | (np.nan_to_num(pred_gpu) > 0)
    method_codes = pd.factorize(df["method"])[0]
    gpu_methods = np.zeros(method_codes.max() + 1, dtype=bool)
    np.logical_or.at(gpu_methods, method_codes, uses_gpu_row)
    use_gpu = gpu_methods[method_codes]
    fit_peak = np.where(use_gpu, fit_gpu, _num(df, "fit_peak_rss_bytes"))
    pred_peak = np.where(use_gpu, pred_gpu, _num(df, "predict_peak_rss_bytes"))
    return use_gpu, fit_peak, pred_peak


def _running(trials: pd.DataFrame, keys: list[str]) -> _Running:
    """Running sums, maxima and selections within each group, vectorised with group offsets (``trials`` not empty)."""
    df, starts, sizes = _sorted_groups(trials, keys)
    group_of_row = np.repeat(np.arange(len(starts)), sizes)
    use_gpu, fit_peak, pred_peak = _memory_peaks(df)
    fit_s = np.nan_to_num(_call_seconds(df, "fit"), nan=0.0)
    cum_fit = np.cumsum(fit_s)
    cum_fit -= np.repeat(np.r_[0.0, cum_fit[starts[1:] - 1]], sizes)
    fp = np.where(np.isnan(fit_peak), -1.0, fit_peak)
    status = df["status"].astype("string").to_numpy(dtype=object, na_value="")
    val_loss = _num(df, "val_loss")
    candidate = selectable(status, val_loss)
    ok_count = np.cumsum(candidate)
    ok_count -= np.repeat(np.r_[0, ok_count[starts[1:] - 1]], sizes).astype(ok_count.dtype)
    return _Running(
        trials=df,
        groups=df.iloc[starts][keys].reset_index(drop=True),
        starts=starts,
        sizes=sizes,
        group_of_row=group_of_row,
        row_in_group=np.arange(len(df)) - np.repeat(starts, sizes),
        trial_index=df["trial_index"].to_numpy(dtype="int64"),
        use_gpu=use_gpu,
        predict_peak=pred_peak,
        fit_s=cum_fit,
        fit_peak=pd.Series(fp).groupby(group_of_row).cummax().to_numpy(),
        n_ok=ok_count,
        selected=running_selection(candidate, val_loss, group_of_row, starts),
    )


def _at_rows(run: _Running, cut: np.ndarray, label: str, k: np.ndarray) -> pd.DataFrame:
    """The budget ``label``'s figures of each group, read at its last row within the budget (``cut``)."""
    groups = run.group_of_row[cut]
    sel = run.selected[cut]
    has = ~np.isnan(sel)
    sel_i = np.where(has, sel, 0).astype(np.int64)
    pred_s = np.where(has, _call_seconds(run.trials, "predict")[sel_i], np.nan)
    pp = np.where(has, run.predict_peak[sel_i], np.nan)
    fpk = np.where(run.fit_peak[cut] < 0, np.nan, run.fit_peak[cut])
    out = run.groups.iloc[groups].reset_index(drop=True)
    out["budget"] = label
    out["k"] = k[groups] if label == FULL else k
    out["n_trials"] = run.row_in_group[cut] + 1
    out["n_ok"] = run.n_ok[cut]
    out["selected_trial_index"] = pd.array(np.where(has, run.trial_index[sel_i], 0), dtype="Int64")
    out.loc[~has, "selected_trial_index"] = pd.NA
    out["training_tuning_s"] = run.fit_s[cut]
    out["prediction_s"] = pred_s
    out["workflow_s"] = run.fit_s[cut] + np.nan_to_num(pred_s)
    out["fit_peak_bytes"] = fpk
    out["predict_peak_bytes"] = pp
    with np.errstate(invalid="ignore"):
        out["workflow_peak_bytes"] = np.fmax(fpk, pp)
    out["memory_kind"] = np.where(run.use_gpu[cut], "gpu", "cpu")
    return out


def workflow_costs(
    trials: pd.DataFrame,
    budgets: Iterable[int] = BUDGETS,
    include_full: bool = True,
) -> pd.DataFrame:
    """Workflow time and peak memory per (method[, method_version], dataset, regime, split, budget).

    ``trials`` is the trial record table (``orchestrator.records.COLUMNS``; only the identity,
    status, validation-loss and cost columns are used). ``method_version`` joins the keys when the
    column is present. A budget larger than a group's search yields that group's full-search
    figures under the budget's own label. Returns one row per group and budget, in group order.
    """
    keys = list(_KEYS)
    if "method_version" in trials.columns:
        keys.insert(1, "method_version")
    missing = [c for c in (*keys, "trial_index", "status") if c not in trials.columns]
    if missing:
        raise KeyError(f"workflow_costs: missing column(s) {missing}")
    budgets = sorted({int(b) for b in budgets})
    if any(b < 1 for b in budgets):
        raise ValueError("budgets count trials and must be >= 1")
    if trials.empty or not (budgets or include_full):
        return pd.DataFrame(columns=[*keys, *OUTPUT_COLUMNS])

    run = _running(trials, keys)
    frames = []
    for b in budgets:
        within = run.trial_index < b
        counts = np.bincount(run.group_of_row[within], minlength=len(run.starts))
        present = counts > 0
        cut = (run.starts + counts - 1)[present]
        frames.append(_at_rows(run, cut, str(b), np.full(len(cut), b)))
    if include_full:
        last_slot = np.maximum.reduceat(run.trial_index, run.starts) + 1
        frames.append(_at_rows(run, run.starts + run.sizes - 1, FULL, last_slot))
    out = pd.concat(frames, ignore_index=True)
    for col in ("budget", "memory_kind"):
        out[col] = out[col].astype("category")
    return out


#: How an ok trial that the rule cannot select (no finite validation loss) is named in a reason.
OK_WITHOUT_LOSS = "ok without a finite validation loss"


def trial_outcomes(trials: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(outcome, selectable) per trial: its status, ``OK_WITHOUT_LOSS`` for an ok trial the rule cannot pick."""
    status = trials["status"].astype("string").fillna("").to_numpy(dtype=object)
    can = selectable(status, _num(trials, "val_loss"))
    return np.where((status == STATUS_OK) & ~can, OK_WITHOUT_LOSS, status), can


def count_words(counts: pd.Series) -> str:
    """Counts by outcome in words, most frequent first: "3 timeout, 1 oom"."""
    counts = counts[counts > 0]
    order = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))
    return ", ".join(f"{int(n)} {name}" for name, n in order)


def unselectable_reasons(trials: pd.DataFrame, keys: Iterable[str] = _KEYS) -> pd.DataFrame:
    """Per group of ``keys`` that holds trials but none the selection rule can pick: why, in words.

    Returns the keys and ``reason``, the group's trials counted by outcome (``count_words``).
    Groups with a selectable trial are absent.
    """
    keys = list(keys)
    outcome, selectable = trial_outcomes(trials)
    frame = trials[keys].assign(_outcome=outcome, _sel=selectable)
    has = frame.groupby(keys, observed=True, sort=False)["_sel"].transform("any").to_numpy(dtype=bool)
    counts = frame[~has].groupby([*keys, "_outcome"], observed=True).size()
    if counts.empty:
        return pd.DataFrame(columns=[*keys, "reason"])
    reasons = counts.groupby(level=list(range(len(keys))), observed=True).agg(
        lambda g: count_words(g.droplevel(list(range(len(keys)))))
    )
    return reasons.rename("reason").reset_index()


def default_view(method: str) -> str:
    """The view of ``method``'s default configuration (trial 0 alone)."""
    return f"{method}-Default"


def single_trial_searches_dropped(tuned: pd.DataFrame) -> pd.DataFrame:
    """The tuned rows without those of a (method, regime) whose every search ran one trial slot.

    A one-trial search selects the default configuration at the default's cost, so its tuned view
    would duplicate ``<METHOD>-Default`` (a budget-1 sweep) and battle it to a tie on every
    partition; the method is compared once, as its default. A regime where any of its searches ran
    more than one trial keeps the tuned view everywhere.
    """
    one_slot = (tuned["k"] == 1).groupby([tuned["method"], tuned["regime"]], observed=True).transform("all")
    return tuned[~one_slot.to_numpy(dtype=bool)]
