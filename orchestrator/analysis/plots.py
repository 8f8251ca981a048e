"""Matplotlib figures for the report (Agg backend, PNG files; no display, no network)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from orchestrator.trials.selection import FULL

KIND_COLORS = {"default": "#9aa5b1", "tuned": "#1f6feb", "gfm": "#d1495b", "budget": "#8fb5ef"}
DPI = 90


def _margins(fig, left_labels=(), bottom_labels=()) -> None:
    """Margins sized from the tick labels (much cheaper than tight_layout)."""
    w, h = fig.get_size_inches()
    left = min(0.45, (0.6 + 0.055 * max((len(str(x)) for x in left_labels), default=6)) / w)
    bottom = min(0.45, (0.55 + 0.05 * max((len(str(x)) for x in bottom_labels), default=0)) / h)
    top = 1 - min(0.2, 0.4 / h)
    fig.subplots_adjust(
        left=left, bottom=bottom, top=top, right=0.97 if not fig.axes[-1].get_label() == "<colorbar>" else 0.9
    )


def _save(fig, path: Path, left_labels=(), bottom_labels=(), adjusted: bool = False) -> None:
    """Save; ``adjusted``: the margins are already set (labels were placed against the final layout)."""
    if not adjusted:
        _margins(fig, left_labels, bottom_labels)
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


@dataclass(frozen=True)
class Placed:
    """Where ``place_labels`` put one label: its box in display pixels, and whether it overlaps anything."""

    label: str
    box: tuple[float, float, float, float]  # x0, y0, x1, y1
    leader: bool  # drawn away from its point, with a line back to it
    collides: bool  # no free position was found: it overlaps a label or a point


_RINGS_PX = (5, 12, 22, 34, 48, 64, 84, 108, 136)
_DIRECTIONS = [(np.cos(a), np.sin(a)) for a in np.deg2rad([0, 180, 90, 270, 45, 135, 315, 225, 22, 158, 338, 202])]


def _overlap(a: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Overlap areas of box ``a`` with each row of ``boxes`` (x0, y0, x1, y1)."""
    if not len(boxes):
        return np.zeros(0)
    w = np.minimum(a[2], boxes[:, 2]) - np.maximum(a[0], boxes[:, 0])
    h = np.minimum(a[3], boxes[:, 3]) - np.maximum(a[1], boxes[:, 1])
    return np.clip(w, 0, None) * np.clip(h, 0, None)


def place_labels(ax, xs, ys, labels, fontsize: float = 7, colors=None, point_px: float = 4.0) -> list[Placed]:
    """Name every point without collisions where the axes leave room: each label, in the order given
    (most important first), takes the nearest free spot on rings around its point (beyond the first
    ring with a thin leader line back to it); one that finds no free spot goes where it overlaps least.

    The axes' limits and the figure's margins must be final: positions are computed in display pixels.
    Labels avoid each other, every point and the legend.
    """
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    to_px = ax.transData.transform
    frame = ax.get_window_extent(renderer)
    pts = (
        to_px(np.column_stack([np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)]))
        if len(xs)
        else np.zeros((0, 2))
    )
    marks = np.column_stack([pts - point_px, pts + point_px])
    legend = ax.get_legend()
    if legend is not None:  # the legend is a box no label may cover
        b = legend.get_window_extent(renderer)
        marks = np.vstack([marks, [b.x0, b.y0, b.x1, b.y1]])
    placed_boxes: list[np.ndarray] = []
    out: list[Placed] = []
    px_per_pt = fig.dpi / 72.0
    for i, (label, (px, py)) in enumerate(zip(labels, pts, strict=True)):
        probe = ax.text(0, 0, label, fontsize=fontsize, transform=None)
        ext = probe.get_window_extent(renderer)
        probe.remove()
        w, h = ext.width + 2, ext.height + 1
        best = None
        for r in _RINGS_PX:
            for dx, dy in _DIRECTIONS:
                cx, cy = px + (r + point_px) * dx, py + (r + point_px) * dy
                x0 = cx if dx > 0.3 else cx - w if dx < -0.3 else cx - w / 2
                y0 = cy if dy > 0.3 else cy - h if dy < -0.3 else cy - h / 2
                box = np.array([x0, y0, x0 + w, y0 + h])
                outside = max(frame.x0 - box[0], 0) + max(box[2] - frame.x1, 0) + max(frame.y0 - box[1], 0)
                outside += max(box[3] - frame.y1, 0)
                cost = _overlap(box, np.array(placed_boxes)).sum() + _overlap(box, marks).sum() + 1e3 * outside
                if best is None or cost < best[0] - 1e-9:
                    best = (cost, box, r, dx, dy)
                if cost == 0:
                    break
            if best is not None and best[0] == 0:
                break
        assert best is not None  # the rings and directions are non-empty
        cost, box, r, dx, dy = best
        leader = r > _RINGS_PX[0]
        ha = "left" if dx > 0.3 else "right" if dx < -0.3 else "center"
        va = "bottom" if dy > 0.3 else "top" if dy < -0.3 else "center"
        anchor_x = box[0] if ha == "left" else box[2] if ha == "right" else (box[0] + box[2]) / 2
        anchor_y = box[1] if va == "bottom" else box[3] if va == "top" else (box[1] + box[3]) / 2
        color = colors[i] if colors is not None else "k"
        ax.annotate(
            label,
            (xs[i], ys[i]),
            xytext=((anchor_x - px) / px_per_pt, (anchor_y - py) / px_per_pt),
            textcoords="offset points",
            fontsize=fontsize,
            ha=ha,
            va=va,
            color=color,
            zorder=5,
            bbox={"boxstyle": "square,pad=0.05", "fc": "white", "ec": "none", "alpha": 0.8},  # lines pass behind
            arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "#8c959f", "shrinkA": 0, "shrinkB": 3}
            if leader
            else None,
        )
        placed_boxes.append(box)
        x0, y0, x1, y1 = (float(v) for v in box)
        out.append(Placed(str(label), (x0, y0, x1, y1), leader, bool(cost > 0)))
    return out


#: Marker per kind of point on the Pareto plots (colour says the same, for readers who cannot tell colours).
PARETO_MARKERS = {"default": "o", "tuned": "s", "gfm": "D", "budget": "o"}
_LEGEND = {"default": "default configuration", "tuned": "tuned (full search)", "gfm": "GFM", "budget": "budget k"}
#: One colour per method's budget path: dark enough for its k labels to read on white (tab10, then Dark2).
PATH_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d",
)  # fmt: skip
_PRIORITY = {"gfm": 0, "tuned": 1, "default": 2, "budget": 3}


def pareto(df: pd.DataFrame, path: Path, title: str, xlabel: str, budgets: bool = False) -> list[Placed]:
    """The views' tradeoffs with every point named, the frontier as a step line.

    ``budgets``: each method's path from its default through its budgets to its full search, one
    colour per method, the intermediate points named by their budget k. Returns the labels placed.
    """
    fig, ax = plt.subplots(figsize=(11, 7.5))
    df = df[np.isfinite(df["mean_overhead"].astype(float)) & np.isfinite(df["mean_improvability"].astype(float))]
    label_of = df["view"].astype(str)
    colors = {i: KIND_COLORS.get(str(v), "#555") for i, v in df["variant"].items()}
    if budgets:
        path_rows = df[df["variant"].isin(["budget", "default", "tuned"])].copy()
        path_rows["k"] = path_rows["k"].fillna(path_rows["variant"].map({"default": 1, "tuned": 10**6}))
        for i, (_method, g) in enumerate(path_rows.groupby("method", sort=True)):
            g = g.sort_values("k")
            c = PATH_COLORS[i % len(PATH_COLORS)]
            ax.plot(g["mean_overhead"], g["mean_improvability"], "-", color=c, alpha=0.7, lw=1, zorder=1)
            colors.update(dict.fromkeys(g.index, c))
        inter = df["variant"] == "budget"
        label_of[inter] = [f"{int(k)}" if pd.notna(k) else "" for k in df.loc[inter, "k"]]
    for variant, g in df.groupby("variant"):
        ax.scatter(
            g["mean_overhead"],
            g["mean_improvability"],
            s=12 if variant == "budget" else 26,
            color=[colors[i] for i in g.index],
            marker=PARETO_MARKERS.get(str(variant), "o"),
            zorder=3,
            edgecolor="k",
            linewidth=0.3,
        )
    shown = [v for v in PARETO_MARKERS if v in set(df["variant"].astype(str))]
    handles = [
        Line2D([], [], ls="", marker=PARETO_MARKERS[v], ms=4 if v == "budget" else 6, mec="k", mew=0.3,
               color="#8c959f" if budgets and v != "gfm" else KIND_COLORS[v], label=_LEGEND[v])
        for v in shown
    ]  # fmt: skip
    if budgets:
        handles.append(Line2D([], [], color="#8c959f", lw=1, label="one colour per method: default to full search"))
    front = df[df["on_front"]].sort_values("mean_overhead")
    ax.step(front["mean_overhead"], front["mean_improvability"], where="post", color="k", lw=1, zorder=2)
    ax.margins(0.08)
    ax.set_xlim(ax.get_xlim())  # fixed now: labels are placed against these limits
    ax.set_ylim(ax.get_ylim())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("Mean Improvability (lower is better)")
    ax.set_title(title, fontsize=9)
    ax.legend(handles=handles, fontsize=7, loc="best")  # where it hides the fewest points
    _margins(fig)
    order = sorted(
        df.index,
        key=lambda i: (not bool(df.at[i, "on_front"]), _PRIORITY.get(str(df.at[i, "variant"]), 4), label_of[i]),
    )
    placed = place_labels(
        ax,
        df.loc[order, "mean_overhead"].to_numpy(),
        df.loc[order, "mean_improvability"].to_numpy(),
        label_of[order].tolist(),
        fontsize=7,
        colors=["k" if df.at[i, "variant"] != "budget" else colors[i] for i in order],
    )
    _save(fig, path, adjusted=True)
    return placed


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
