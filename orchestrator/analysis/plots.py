"""Matplotlib figures for the report (Agg backend, PNG files; no display, no network)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from orchestrator.analysis.workflow import FULL

KIND_COLORS = {"default": "#9aa5b1", "tuned": "#1f6feb", "gfm": "#d1495b", "budget": "#8fb5ef"}
DPI = 90


def _save(fig, path: Path, left_labels=(), bottom_labels=()) -> None:
    """Save with margins sized from the tick labels (much cheaper than tight_layout)."""
    w, h = fig.get_size_inches()
    left = min(0.45, (0.6 + 0.055 * max((len(str(x)) for x in left_labels), default=6)) / w)
    bottom = min(0.45, (0.55 + 0.05 * max((len(str(x)) for x in bottom_labels), default=0)) / h)
    top = 1 - min(0.2, 0.4 / h)
    fig.subplots_adjust(
        left=left, bottom=bottom, top=top, right=0.97 if not fig.axes[-1].get_label() == "<colorbar>" else 0.9
    )
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _elo_axis(ax, board: pd.DataFrame, title: str, fontsize: int) -> pd.Series:
    """Elo bars coloured by variant with their intervals, lowest first; returns the views drawn."""
    d = board.sort_values("elo")
    y = np.arange(len(d))
    colors = [KIND_COLORS.get(v, "#555") for v in d.get("variant", pd.Series("tuned", index=d.index))]
    ax.barh(y, d["elo"] - d["elo"].min() + 20, left=d["elo"].min() - 20, color=colors, alpha=0.8)
    xerr = [(d["elo"] - d["lower"]).clip(lower=0), (d["upper"] - d["elo"]).clip(lower=0)]
    ax.errorbar(d["elo"], y, xerr=xerr, fmt="none", ecolor="k", lw=0.8)
    ax.set_yticks(y, d["view"], fontsize=7)
    ax.set_xlabel("Elo (95% dataset-bootstrap interval)")
    ax.set_title(title, fontsize=fontsize)
    return d["view"]


def elo_bars(lb: pd.DataFrame, path: Path, title: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 0.22 * len(lb) + 1.2))
    _save(fig, path, _elo_axis(ax, lb, title, 9))


def rank_iqr(mr: pd.DataFrame, path: Path, title: str) -> None:
    d = mr.sort_values("mean_rank", ascending=False)
    fig, ax = plt.subplots(figsize=(7, 0.22 * len(d) + 1.2))
    y = np.arange(len(d))
    ax.hlines(y, d["rank_q25"], d["rank_q75"], color="#999", lw=3)
    ax.plot(d["mean_rank"], y, "o", color="#1f6feb", ms=4)
    ax.set_yticks(y, d["view"], fontsize=7)
    ax.set_xlabel("mean rank (bar: interquartile range of per-dataset ranks)")
    ax.set_title(title, fontsize=9)
    _save(fig, path, d["view"])


def cohort_elo(df: pd.DataFrame, path: Path, title: str) -> None:
    piv = df.pivot_table(index="view", columns="cohort", values="elo")
    piv = piv.sort_values(piv.columns[0]) if "all" not in piv.columns else piv.sort_values("all")
    fig, ax = plt.subplots(figsize=(7, 0.22 * len(piv) + 1.2))
    y = np.arange(len(piv))
    # more markers than there are cohorts (three): the extra ones go unused
    for col, marker in zip(piv.columns, "osD^", strict=False):
        ax.plot(piv[col], y, marker, label=col, ms=4, alpha=0.85)
    ax.set_yticks(y, piv.index, fontsize=7)
    ax.set_xlabel("Elo")
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=9)
    _save(fig, path, piv.index)


def pareto(df: pd.DataFrame, path: Path, title: str, xlabel: str, budgets: bool = False) -> None:
    """The views' tradeoffs, the frontier as a step line; ``budgets``: each method's path through its budgets."""
    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    trajectories = None
    if budgets:
        trajectories = df[df["variant"].isin(["budget", "default", "tuned"])].copy()
        trajectories["k"] = trajectories["k"].fillna(trajectories["variant"].map({"default": 1, "tuned": 10**6}))
    if trajectories is not None and not trajectories.empty:
        for _method, g in trajectories.groupby("method"):
            g = g.sort_values("k")
            ax.plot(g["mean_overhead"], g["mean_improvability"], "-", color="#1f6feb", alpha=0.25, lw=1)
            ax.plot(g["mean_overhead"], g["mean_improvability"], ".", color="#1f6feb", alpha=0.35, ms=3)
    for variant, g in df.groupby("variant"):
        ax.scatter(
            g["mean_overhead"],
            g["mean_improvability"],
            s=22,
            color=KIND_COLORS.get(variant, "#555"),
            label=variant,
            zorder=3,
            edgecolor="k",
            linewidth=0.3,
        )
    front = df[df["on_front"]].sort_values("mean_overhead")
    ax.step(front["mean_overhead"], front["mean_improvability"], where="post", color="k", lw=1, zorder=2)
    for _, r in df.iterrows():
        if r["on_front"] or r["variant"] == "gfm":
            ax.annotate(
                r["view"],
                (r["mean_overhead"], r["mean_improvability"]),
                fontsize=6,
                xytext=(3, 3),
                textcoords="offset points",
            )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("Mean Improvability (lower is better)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    _save(fig, path)


def budget_curves(traj: pd.DataFrame, path: Path, title: str) -> None:
    """Improvability and overhead against budget k; the full search sits just right of its own k."""
    traj = traj.assign(k=traj["k"].where(traj["budget"] != FULL, traj["k"] * 1.3))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for method, g in traj.groupby("method"):
        g = g.sort_values("k")
        axes[0].plot(g["k"], g["mean_improvability"], marker=".", label=method, lw=1)
        axes[1].plot(g["k"], g["mean_overhead"], marker=".", lw=1)
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("tuning budget k (first k trials; last point: full search)")
    axes[0].set_ylabel("Mean Improvability")
    axes[1].set_ylabel("Mean Overhead, workflow time (interpolated)")
    axes[0].legend(fontsize=6, ncol=2)
    fig.suptitle(title, fontsize=9)
    fig.subplots_adjust(wspace=0.3)
    _save(fig, path, bottom_labels=["x" * 4])


def heatmap(
    mat: pd.DataFrame,
    path: Path,
    title: str,
    cbar: str,
    fmt: str = "{:.2f}",
    cmap: str = "viridis",
    reverse: bool = False,
) -> None:
    h = 0.2 * mat.shape[0] + 2
    w = max(6.0, 0.32 * mat.shape[1] + 3)
    fig, ax = plt.subplots(figsize=(w, h))
    im = ax.imshow(mat.to_numpy(dtype=float), aspect="auto", cmap=cmap + ("_r" if reverse else ""))
    ax.set_yticks(np.arange(mat.shape[0]), mat.index, fontsize=6)
    ax.set_xticks(np.arange(mat.shape[1]), mat.columns, fontsize=6, rotation=70, ha="right")
    if mat.size <= 300:
        for (i, j), v in np.ndenumerate(mat.to_numpy(dtype=float)):
            if np.isfinite(v):
                ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=4.5, color="w")
    fig.colorbar(im, ax=ax, label=cbar, fraction=0.04, pad=0.02)
    ax.set_title(title, fontsize=9)
    _save(fig, path, mat.index, mat.columns)


def elo_panels(df: pd.DataFrame, path: Path, title: str, panel: str) -> None:
    """Elo bars with intervals, one panel per value of ``panel`` (e.g. task type)."""
    groups = list(df.groupby(panel, sort=True))
    n = max(len(groups), 1)
    rows = max((len(g) for _, g in groups), default=1)
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 0.22 * rows + 1.4), squeeze=False)
    labels = []
    for ax, (name, g) in zip(axes[0], groups, strict=True):
        labels += list(_elo_axis(ax, g, str(name), 8))
    fig.suptitle(title, fontsize=9)
    fig.subplots_adjust(wspace=0.45)
    _save(fig, path, labels)


def lines(
    df: pd.DataFrame,
    path: Path,
    title: str,
    x: str,
    y: str,
    group: str,
    xlabel: str,
    ylabel: str,
    log_x: bool = True,
    hline: float | None = None,
) -> None:
    """One line per ``group`` of ``y`` against ``x`` (budget curves of the tuning views)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name, g in df.groupby(group, sort=True):
        g = g.sort_values(x)
        ax.plot(g[x], g[y], marker=".", lw=1, label=str(name))
    if hline is not None:
        ax.axhline(hline, color="k", lw=0.8, ls="--")
    if log_x and df[y].notna().any():  # a log axis with nothing on it cannot place its ticks
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6, ncol=2)
    _save(fig, path, bottom_labels=["x" * 4])


def overlap_bars(omitted: pd.DataFrame, path: Path, title: str) -> None:
    """Each omitted GFM result (mean over partitions) beside the gcn-Default result that replaced it."""
    d = omitted.groupby(["view", "dataset"], as_index=False)[["omitted_score", "replacement_score"]].mean()
    labels = d["view"] + " on " + d["dataset"]
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(d) + 1.4))
    y = np.arange(len(d))
    ax.barh(y - 0.2, d["omitted_score"], height=0.4, color=KIND_COLORS["gfm"], label="omitted GFM result")
    ax.barh(y + 0.2, d["replacement_score"], height=0.4, color=KIND_COLORS["default"], label="gcn-Default replacement")
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xlabel("test score (primary metric)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    _save(fig, path, labels)
