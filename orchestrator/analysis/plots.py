"""Matplotlib figures for the report (Agg backend, PNG files; no display, no network)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

from orchestrator.trial_table.selection import FULL

KIND_COLORS = {"default": "#9aa5b1", "tuned": "#1f6feb", "gfm": "#d1495b", "budget": "#8fb5ef"}
#: A user submission, wherever a figure shows it (bars, points, labels); the pages mark its rows alike.
SUBMITTED_COLOR = "#8250df"
#: What a crowded figure shows without naming it (off the frontier, not a submission).
MUTED = "#c8cdd3"
DPI = 90
#: Tick labels and names on the figures, in points (10 pixels at ``DPI``: readable at 1,400 pixels).
LABEL_PT = 8


def submitted(data: pd.DataFrame) -> pd.Series:
    """Which rows are user submissions: the ``submitted`` column the site adds to a figure's data, if any."""
    if "submitted" not in data.columns:
        return pd.Series(False, index=data.index)
    return data["submitted"].fillna(False).astype(bool)


def _mark_labels(ax, mine: set[str]) -> None:
    """Submissions' names on the y axis in the submission colour, bold."""
    for t in ax.get_yticklabels():
        if t.get_text() in mine:
            t.set_color(SUBMITTED_COLOR)
            t.set_fontweight("bold")


def _margins(fig, left_labels=(), bottom_labels=()) -> None:
    """Margins sized from the tick labels (much cheaper than tight_layout)."""
    w, h = fig.get_size_inches()
    left = min(0.45, (0.6 + 0.065 * max((len(str(x)) for x in left_labels), default=6)) / w)
    bottom = min(0.45, (0.55 + 0.05 * max((len(str(x)) for x in bottom_labels), default=0)) / h)
    top = 1 - min(0.2, 0.4 / h)
    fig.subplots_adjust(
        left=left, bottom=bottom, top=top, right=0.97 if not fig.axes[-1].get_label() == "<colorbar>" else 0.9
    )


def _save_fitted(fig, path: Path) -> None:
    """Save with the canvas grown (or cut) to every artist: labels and legends outside the axes are never clipped."""
    fig.savefig(path, dpi=DPI, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)


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
    mine = submitted(d)
    colors = [
        SUBMITTED_COLOR if m else KIND_COLORS.get(v, "#555")
        for v, m in zip(d.get("variant", pd.Series("tuned", index=d.index)), mine, strict=True)
    ]
    ax.barh(y, d["elo"] - d["elo"].min() + 20, left=d["elo"].min() - 20, color=colors, alpha=0.8)
    xerr = [(d["elo"] - d["lower"]).clip(lower=0), (d["upper"] - d["elo"]).clip(lower=0)]
    ax.errorbar(d["elo"], y, xerr=xerr, fmt="none", ecolor="k", lw=0.8)
    ax.set_yticks(y, d["view"], fontsize=LABEL_PT)
    _mark_labels(ax, set(d.loc[mine, "view"]))
    ax.set_xlabel("Elo (95% dataset-bootstrap interval)")
    ax.set_title(title, fontsize=fontsize)
    return d["view"]


#: Height of one bar or row in inches (23 pixels: room for a ``LABEL_PT`` name).
ROW_IN = 0.26


def elo_bars(lb: pd.DataFrame, path: Path, title: str) -> None:
    fig, ax = plt.subplots(figsize=(7, ROW_IN * len(lb) + 1.2))
    _save(fig, path, _elo_axis(ax, lb, title, 9))


def rank_iqr(mr: pd.DataFrame, path: Path, title: str) -> None:
    d = mr.sort_values("mean_rank", ascending=False)
    fig, ax = plt.subplots(figsize=(7, ROW_IN * len(d) + 1.2))
    y = np.arange(len(d))
    mine = submitted(d)
    ax.hlines(y, d["rank_q25"], d["rank_q75"], color="#999", lw=3)
    ax.plot(d["mean_rank"], y, "o", color="#1f6feb", ms=4)
    ax.plot(d.loc[mine, "mean_rank"], y[mine.to_numpy()], "o", color=SUBMITTED_COLOR, ms=6)
    ax.set_yticks(y, d["view"], fontsize=LABEL_PT)
    _mark_labels(ax, set(d.loc[mine, "view"]))
    ax.set_xlabel("mean rank (bar: interquartile range of per-dataset ranks)")
    ax.set_title(title, fontsize=9)
    _save(fig, path, d["view"])


def cohort_elo(df: pd.DataFrame, path: Path, title: str) -> None:
    piv = df.pivot_table(index="view", columns="cohort", values="elo")
    piv = piv.sort_values(piv.columns[0]) if "all" not in piv.columns else piv.sort_values("all")
    fig, ax = plt.subplots(figsize=(7, ROW_IN * len(piv) + 1.2))
    y = np.arange(len(piv))
    # more markers than there are cohorts (three): the extra ones go unused
    for col, marker in zip(piv.columns, "osD^", strict=False):
        ax.plot(piv[col], y, marker, label=col, ms=4, alpha=0.85)
    ax.set_yticks(y, piv.index, fontsize=LABEL_PT)
    _mark_labels(ax, set(df.loc[submitted(df), "view"]))
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


def place_labels(
    ax, xs, ys, labels, fontsize: float = 7, colors=None, point_px: float = 4.0, points=None
) -> list[Placed]:
    """Name every point without collisions where the axes leave room: each label, in the order given
    (most important first), takes the nearest free spot on rings around its point (beyond the first
    ring with a thin leader line back to it); one that finds no free spot goes where it overlaps least.

    The axes' limits and the figure's margins must be final: positions are computed in display pixels.
    Labels avoid each other, every point and the legend; ``points`` (xs, ys): every point drawn, where some go
    unnamed (default: the named ones).
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
    drawn = to_px(np.column_stack([np.asarray(p, dtype=float) for p in points])) if points is not None else pts
    marks = np.column_stack([drawn - point_px, drawn + point_px]) if len(drawn) else np.zeros((0, 4))
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
#: A shown point's colour by kind on the endpoints' plot (a default configuration darker than the grey of the rest).
_SHOWN = {**KIND_COLORS, "default": "#57606a"}
#: One colour per shown method's budget path: dark enough for its k labels to read on white (tab10, then Dark2;
#: neither purple, the submissions' colour, nor grey, the colour of the rest).
# A table: tab10's row, then Dark2's: the formatter keeps the two palettes apart.
PATH_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#8c564b", "#e377c2", "#bcbd22", "#17becf",
    "#1b9e77", "#d95f02", "#e7298a", "#66a61e", "#e6ab02", "#a6761d",
)  # fmt: skip
_PRIORITY = {"gfm": 0, "tuned": 1, "default": 2, "budget": 3}
#: A Pareto plot of at most this many points names every one; a larger one names only what it shows in colour (the
#: frontier and the user submissions), the rest grey and unnamed (the data file beside the figure lists them).
NAME_EVERY_POINT_UP_TO = 16


def _finite(df: pd.DataFrame) -> pd.DataFrame:
    """The points a Pareto plot can place."""
    return df[np.isfinite(df["mean_overhead"].astype(float)) & np.isfinite(df["mean_improvability"].astype(float))]


def names_every_point(df: pd.DataFrame) -> bool:
    """Whether the Pareto plot of ``df`` names every point (else only the frontier and the submissions)."""
    return len(_finite(df)) <= NAME_EVERY_POINT_UP_TO


def _label_colour(mine: bool, shown: bool, budget: bool, colour: str) -> str:
    """A Pareto label's ink: a submission's colour, its path's for a shown budget k, black, or grey for the rest."""
    if mine:
        return SUBMITTED_COLOR
    if shown:
        return colour if budget else "k"
    return "#6e7781"


def pareto(df: pd.DataFrame, path: Path, title: str, xlabel: str, budgets: bool = False) -> list[Placed]:
    """The views' tradeoffs, the frontier as a step line: the frontier's points and the user submissions' in
    colour and named (a submission ringed in its colour), the rest grey, named only when the plot holds at most
    ``NAME_EVERY_POINT_UP_TO`` points, so a 35-method field stays legible.

    ``budgets``: each method's path from its default through its budgets to its full search, in its own colour
    where it reaches the frontier or is a submission's (its points named, the intermediate ones by their budget
    k), grey otherwise. Returns the labels placed.
    """
    fig, ax = plt.subplots(figsize=(11, 7.5))
    df = _finite(df)
    mine = submitted(df)
    label_of = df["view"].astype(str)
    if budgets:
        shown_methods = set(df.loc[df["on_front"] | mine, "method"].astype(str))
        shown = df["method"].astype(str).isin(shown_methods)
    else:
        shown = df["on_front"] | mine
    colors = {
        i: SUBMITTED_COLOR if mine[i] else _SHOWN.get(str(v), "#555") if shown[i] else MUTED
        for i, v in df["variant"].items()
    }
    if budgets:
        path_rows = df[df["variant"].isin(["budget", "default", "tuned"])].copy()
        path_rows["k"] = path_rows["k"].fillna(path_rows["variant"].map({"default": 1, "tuned": 10**6}))
        n_shown = 0
        for method, g in path_rows.groupby(path_rows["method"].astype(str), sort=True):
            g = g.sort_values("k")
            if method in shown_methods:
                c = SUBMITTED_COLOR if mine[g.index].any() else PATH_COLORS[n_shown % len(PATH_COLORS)]
                n_shown += not mine[g.index].any()
            else:
                c = MUTED
            muted = c == MUTED
            ax.plot(
                g["mean_overhead"],
                g["mean_improvability"],
                "-",
                color=c,
                alpha=0.8,
                lw=0.8 if muted else 1.2,
                zorder=1 if muted else 2,
            )
            colors.update(dict.fromkeys(g.index, c))
        inter = df["variant"] == "budget"
        label_of[inter] = [f"{int(k)}" if pd.notna(k) else "" for k in df.loc[inter, "k"]]
    for in_colour in (False, True):  # the grey ones underneath
        for variant, g in df[shown == in_colour].groupby("variant"):
            ax.scatter(
                g["mean_overhead"],
                g["mean_improvability"],
                s=(12 if variant == "budget" else 26) * (1.0 if in_colour else 0.8),
                color=[colors[i] for i in g.index],
                marker=PARETO_MARKERS.get(str(variant), "o"),
                zorder=3 if in_colour else 1.5,
                edgecolor="k" if in_colour else "#8c959f",
                linewidth=0.3,
            )
    ring: dict[str, Any] = {
        "s": 130,
        "facecolors": "none",
        "edgecolors": SUBMITTED_COLOR,
        "linewidths": 1.4,
        "zorder": 4,
    }
    ax.scatter(df.loc[mine, "mean_overhead"], df.loc[mine, "mean_improvability"], **ring)
    named = shown | names_every_point(df)
    kinds = [v for v in PARETO_MARKERS if v in set(df["variant"].astype(str))]
    point: dict[str, Any] = {"ls": "", "mec": "#8c959f", "mew": 0.3, "color": "#8c959f"}
    handles = [
        Line2D([], [], marker=PARETO_MARKERS[v], ms=4 if v == "budget" else 6, label=_LEGEND[v], **point) for v in kinds
    ]
    handles.append(Line2D([], [], color="k", lw=1, label="Pareto frontier"))
    if budgets:
        handles.append(Line2D([], [], color=PATH_COLORS[0], lw=1.2, label="a frontier method: default to full search"))
    if mine.any():
        ringed: dict[str, Any] = {"ls": "", "marker": "o", "ms": 9, "mfc": "none", "mec": SUBMITTED_COLOR, "mew": 1.4}
        handles.append(Line2D([], [], label="user submission", **ringed))
    if not shown.all():
        unnamed = "" if named.all() else ", unnamed (listed in the data file)"
        handles.append(
            Line2D([], [], marker="o", ms=5, label=f"off the frontier{unnamed}", **{**point, "color": MUTED})
        )
    front = df[df["on_front"]].sort_values("mean_overhead")
    ax.step(front["mean_overhead"], front["mean_improvability"], where="post", color="k", lw=1, zorder=2.5)
    ax.margins(0.08)
    ax.set_xlim(ax.get_xlim())  # fixed now: labels are placed against these limits
    ax.set_ylim(ax.get_ylim())
    ax.set_xlabel(xlabel)
    ax.set_ylabel("Mean Improvability (lower is better)")
    ax.set_title(title, fontsize=9)
    ax.legend(handles=handles, fontsize=LABEL_PT, loc="best")  # where it hides the fewest points
    _margins(fig)
    order = sorted(
        df.index[named],
        key=lambda i: (
            not bool(df.at[i, "on_front"]),
            not bool(mine[i]),
            not bool(shown[i]),
            _PRIORITY.get(str(df.at[i, "variant"]), 4),
            label_of[i],
        ),
    )
    ink = {i: _label_colour(bool(mine[i]), bool(shown[i]), df.at[i, "variant"] == "budget", colors[i]) for i in order}
    placed = place_labels(
        ax,
        df.loc[order, "mean_overhead"].to_numpy(),
        df.loc[order, "mean_improvability"].to_numpy(),
        label_of[order].tolist(),
        fontsize=LABEL_PT,
        colors=[ink[i] for i in order],
        points=(df["mean_overhead"].to_numpy(), df["mean_improvability"].to_numpy()),
    )
    _save(fig, path, adjusted=True)
    return placed


#: Budget ticks when a figure holds more than eight budgets (else each budget it holds is ticked).
_ROUND_BUDGETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000)


def budget_ticks(ax, ks, full_at: float | None = None) -> list[str]:
    """Integer ticks on a log budget axis, never "10^0" or "2x10^0": each budget k of ``ks`` when there are at most
    eight, else round ones in their range; ``full_at``: where the full search sits, ticked "full". Returns the tick
    labels."""
    held = sorted({int(k) for k in ks if np.isfinite(k) and k >= 1})
    if len(held) > 8:
        held = [k for k in _ROUND_BUDGETS if held[0] <= k <= held[-1]]
    ticks, labels = [float(k) for k in held], [str(k) for k in held]
    if full_at is not None:
        ticks, labels = [*ticks, full_at], [*labels, "full"]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FixedFormatter(labels))
    ax.xaxis.set_minor_locator(NullLocator())
    return labels


def _line_styles(names: list[str], mine: set[str]) -> dict[str, dict[str, Any]]:
    """One look per line: ten colours, then the same colours dashed, dotted...; submissions purple and thicker."""
    styles, colors = ("-", "--", ":", "-."), PATH_COLORS[:10]
    return {
        n: {"color": SUBMITTED_COLOR, "ls": "-", "lw": 2.2}
        if n in mine
        else {"color": colors[i % len(colors)], "ls": styles[i // len(colors) % len(styles)], "lw": 1.2}
        for i, n in enumerate(names)
    }


def _legend_right(ax, lines: int) -> None:
    """The legend beside the axes, so it hides no line (the figure is saved to fit it); a column per 20 lines."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, ncol=1 + (lines - 1) // 20)


def budget_curves(traj: pd.DataFrame, path: Path, title: str) -> list[str]:
    """Improvability and overhead against budget k; the full search sits just right of its own k. Returns the budget
    axis' tick labels."""
    full = traj["budget"] == FULL
    fulls = set(traj.loc[full, "k"].dropna())
    traj = traj.assign(k=traj["k"].where(~full, traj["k"] * 1.3))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    methods = sorted(traj["method"].astype(str).unique())
    look = _line_styles(methods, set(traj.loc[submitted(traj), "method"].astype(str)))
    for method, g in traj.groupby(traj["method"].astype(str)):
        g = g.sort_values("k")
        axes[0].plot(g["k"], g["mean_improvability"], marker=".", **look[method])
        axes[1].plot(g["k"], g["mean_overhead"], marker=".", label=method, **look[method])
    full_at = 1.3 * next(iter(fulls)) if len(fulls) == 1 else None
    for ax in axes:
        ax.set_xscale("log")
        ticks = budget_ticks(ax, traj.loc[~full, "k"], full_at=full_at)
        ax.set_xlabel("tuning budget k (first k trials; last point: full search)")
    axes[0].set_ylabel("Mean Improvability")
    axes[1].set_ylabel("Mean Overhead, workflow time (interpolated)")
    _legend_right(axes[1], len(methods))
    fig.suptitle(title, fontsize=9)
    fig.subplots_adjust(wspace=0.3)
    _save_fitted(fig, path)
    return ticks


#: A heatmap's cells: at most this wide and this tall (inches), the grid at most ``GRID_MAX_IN`` wide; a number is
#: written in a cell only where it fits at ``CELL_PT`` (else the colour and the data file beside it carry it).
CELL_IN = (0.5, 0.26)
GRID_MAX_IN = 10.0
CELL_PT = 7


def _fits(texts: list[str], cell_w: float, cell_h: float) -> bool:
    """Whether every one of ``texts`` fits a cell of ``cell_w`` x ``cell_h`` inches at ``CELL_PT`` (a digit is about
    0.6 em wide, a line 1.25 em tall)."""
    widest = max((len(t) for t in texts), default=0) * 0.6 * CELL_PT / 72
    return widest + 0.06 <= cell_w and 1.25 * CELL_PT / 72 <= cell_h


def heatmap(
    mat: pd.DataFrame,
    path: Path,
    title: str,
    cbar: str,
    fmt: str = "{:.2f}",
    cmap: str = "viridis",
    reverse: bool = False,
) -> bool:
    """A matrix as coloured cells, sized to the cells so its labels and numbers read at the page's scale: the
    column labels at 45 degrees and the canvas fitted to every label (never clipped). Returns whether the cells
    carry their numbers: all of them when the widest fits a cell, else none (the colour and the data file carry
    them)."""
    rows, cols = mat.shape
    cell_w, cell_h = min(CELL_IN[0], GRID_MAX_IN / max(cols, 1)), CELL_IN[1]
    values = mat.to_numpy(dtype=float)
    texts = {(i, j): fmt.format(v) for (i, j), v in np.ndenumerate(values) if np.isfinite(v)}
    numbers = _fits(list(texts.values()), cell_w, cell_h)
    grid_w, grid_h = cell_w * cols, cell_h * rows
    fig = plt.figure(figsize=(grid_w + 1.0, grid_h + 0.4))
    ax = fig.add_axes((0.0, 0.0, grid_w / (grid_w + 1.0), grid_h / (grid_h + 0.4)))  # the grid, cell for cell
    cax = fig.add_axes(((grid_w + 0.15) / (grid_w + 1.0), 0.0, 0.18 / (grid_w + 1.0), grid_h / (grid_h + 0.4)))
    im = ax.imshow(values, aspect="auto", cmap=cmap + ("_r" if reverse else ""))
    ax.set_yticks(np.arange(rows), mat.index, fontsize=LABEL_PT)
    ax.set_xticks(np.arange(cols), mat.columns, fontsize=LABEL_PT, rotation=45, ha="right", rotation_mode="anchor")
    if numbers:
        for (i, j), t in texts.items():
            r, g, b, _ = im.cmap(im.norm(values[i, j]))
            ink = "k" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "w"  # dark on light cells, light on dark
            ax.text(j, i, t, ha="center", va="center", fontsize=CELL_PT, color=ink)
    fig.colorbar(im, cax=cax, label=cbar)
    ax.set_title(title, fontsize=9)
    _save_fitted(fig, path)
    return numbers


def elo_panels(df: pd.DataFrame, path: Path, title: str, panel: str) -> None:
    """Elo bars with intervals, one panel per value of ``panel`` (e.g. task type)."""
    groups = list(df.groupby(panel, sort=True))
    n = max(len(groups), 1)
    rows = max((len(g) for _, g in groups), default=1)
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, ROW_IN * rows + 1.4), squeeze=False)
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
) -> list[str]:
    """One line per ``group`` of ``y`` against ``x`` (budget curves of the tuning views); returns the log axis' tick
    labels (none on a linear axis)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    names = sorted(df[group].astype(str).unique())
    look = _line_styles(names, set(df.loc[submitted(df), group].astype(str)))
    for name, g in df.groupby(df[group].astype(str), sort=True):
        g = g.sort_values(x)
        ax.plot(g[x], g[y], marker=".", label=name, **look[name])
    if hline is not None:
        ax.axhline(hline, color="k", lw=0.8, ls="--")
    ticks: list[str] = []
    if log_x and df[y].notna().any():  # a log axis with nothing on it cannot place its ticks
        ax.set_xscale("log")
        ticks = budget_ticks(ax, df[x])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    if names:
        _legend_right(ax, len(names))
    _save_fitted(fig, path)
    return ticks


def overlap_bars(omitted: pd.DataFrame, path: Path, title: str) -> None:
    """Each omitted GFM result (mean over partitions) beside the gcn-Default result that replaced it."""
    d = omitted.groupby(["view", "dataset"], as_index=False)[["omitted_score", "replacement_score"]].mean()
    labels = d["view"] + " on " + d["dataset"]
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(d) + 1.4))
    y = np.arange(len(d))
    ax.barh(y - 0.2, d["omitted_score"], height=0.4, color=KIND_COLORS["gfm"], label="omitted GFM result")
    ax.barh(y + 0.2, d["replacement_score"], height=0.4, color=KIND_COLORS["default"], label="gcn-Default replacement")
    ax.set_yticks(y, labels, fontsize=LABEL_PT)
    ax.set_xlabel("test score (primary metric)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    _save(fig, path, labels)
