"""The Pareto plots name every point: labels placed without collisions where there is room."""

from __future__ import annotations

import numpy as np
import pandas as pd

from orchestrator.analysis import plots
from orchestrator.analysis.pareto import pareto_front
from tests.synthetic_trials import GFMS, SUPERVISED


def _boxes_overlap(a, b) -> bool:
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def _endpoints(seed: int = 0) -> pd.DataFrame:
    """Every default, tuned and GFM point of the 21 methods, scattered as the paper's figure scatters them."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in SUPERVISED:
        x0, y0 = rng.uniform(0, 4), rng.uniform(0.35, 0.6)
        rows.append({"view": f"{m}-Default", "variant": "default", "method": m, "x": x0, "y": y0})
        rows.append({"view": m, "variant": "tuned", "method": m, "x": x0 + rng.uniform(3, 6), "y": y0 - 0.15})
    for m in GFMS:  # the GFMs sit close together, as they do on real stores
        rows.append({"view": m, "variant": "gfm", "method": m, "x": rng.normal(2, 0.3), "y": rng.normal(0.45, 0.01)})
    df = pd.DataFrame(rows).rename(columns={"x": "mean_overhead", "y": "mean_improvability"})
    df["kind"] = np.where(df["variant"] == "gfm", "gfm", "supervised")
    df["k"] = np.nan
    df["on_front"] = pareto_front(df)
    return df


def _apart(placed: list[plots.Placed]) -> None:
    """No label collides with anything, nor overlaps another."""
    assert not [p.label for p in placed if p.collides]
    for i, a in enumerate(placed):
        for b in placed[i + 1 :]:
            assert not _boxes_overlap(a.box, b.box), (a.label, b.label)


def test_a_crowded_endpoint_plot_names_the_frontier_and_the_submission_only(tmp_path):
    df = _endpoints()
    mine = df.index[~df["on_front"]][0]  # a submission off the frontier
    df["submitted"] = df.index == mine
    assert len(df) > plots.NAME_EVERY_POINT_UP_TO
    placed = plots.pareto(df, tmp_path / "p.png", "t", "overhead")
    assert sorted(p.label for p in placed) == sorted(df.loc[df["on_front"] | df["submitted"], "view"])
    _apart(placed)


def test_a_small_endpoint_plot_names_every_point_without_collisions(tmp_path):
    df = _endpoints()
    df = df[df["method"].isin([*SUPERVISED[:5], *GFMS[:2]])]
    assert len(df) <= plots.NAME_EVERY_POINT_UP_TO
    placed = plots.pareto(df, tmp_path / "p.png", "t", "overhead")
    assert sorted(p.label for p in placed) == sorted(df["view"])
    _apart(placed)


def test_the_budget_plot_names_the_frontier_methods_paths_by_view_and_budget_k(tmp_path):
    ends = _endpoints(1)
    inter = []
    for m in SUPERVISED:
        d, t = ends[ends["view"] == f"{m}-Default"].iloc[0], ends[ends["view"] == m].iloc[0]
        for i, k in enumerate((2, 5, 10, 25), start=1):
            f = i / 5
            x = d["mean_overhead"] + f * (t["mean_overhead"] - d["mean_overhead"])
            y = d["mean_improvability"] + f * (t["mean_improvability"] - d["mean_improvability"])
            point = {"view": f"{m}@{k}", "variant": "budget", "method": m, "kind": "supervised", "k": float(k)}
            inter.append({**point, "mean_overhead": x, "mean_improvability": y})
    df = pd.concat([ends.drop(columns="on_front"), pd.DataFrame(inter)], ignore_index=True)
    df["on_front"] = pareto_front(df)
    placed = plots.pareto(df, tmp_path / "b.png", "t", "overhead", budgets=True)
    shown = set(df.loc[df["on_front"], "method"])  # every point of a method that reaches the frontier
    assert 0 < len(shown) < len(SUPERVISED)
    rows = df[df["method"].isin(shown)]
    labels = sorted(p.label for p in placed)
    assert labels == sorted(
        [*rows.loc[rows["variant"] != "budget", "view"], *(str(int(k)) for k in rows["k"].dropna())]
    )
    _apart(placed)


def test_a_heatmap_names_its_cells_where_they_fit_and_grows_to_its_labels(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    views = [v for m in SUPERVISED for v in (m, f"{m}-Default")] + list(GFMS)  # the paper's field
    subgroups = [f"feature dimension 100-1000 (n={i})" for i in range(22)]
    ranks = pd.DataFrame(rng.uniform(1, 39, (len(views), 22)), views, subgroups)
    assert plots.heatmap(ranks, tmp_path / "s.png", "t", "rank", fmt="{:.1f}")  # 22 columns: "12.5" fits a cell
    square = pd.DataFrame(rng.uniform(0, 1, (len(views), len(views))), views, views)
    assert not plots.heatmap(square, tmp_path / "w.png", "t", "win rate")  # 37 columns: too narrow for "0.53"
    for png in ("s.png", "w.png"):
        assert Image.open(tmp_path / png).width <= 1330, png  # fits the page at 1,400 pixels
    longer = square.rename(index=lambda v: v + " (a much longer name)")
    plots.heatmap(longer, tmp_path / "l.png", "t", "win rate")
    grown = Image.open(tmp_path / "l.png").width - Image.open(tmp_path / "w.png").width
    assert grown > 100  # the canvas grows to the labels instead of cutting them


def test_budget_axes_read_as_whole_budgets(tmp_path):
    few = pd.DataFrame({"method": "gcn", "k": [1, 2, 3], "gap": [2.0, 1.0, 0.0]})
    assert plots.lines(few, tmp_path / "a.png", "t", "k", "gap", "method", "k", "gap") == ["1", "2", "3"]
    many = pd.DataFrame({"method": "gcn", "k": [1, 2, 3, 5, 10, 20, 50, 100, 200], "gap": 1.0})
    round_ones = ["1", "2", "5", "10", "20", "50", "100", "200"]
    assert plots.lines(many, tmp_path / "b.png", "t", "k", "gap", "method", "k", "gap") == round_ones
    traj = pd.DataFrame({"method": "gcn", "k": [1, 2, 5, 10], "budget": ["1", "2", "5", "full"]})
    traj = traj.assign(mean_improvability=0.3, mean_overhead=[0.0, 1.0, 2.0, 3.0])
    assert plots.budget_curves(traj, tmp_path / "c.png", "t") == ["1", "2", "5", "full"]


def test_a_crowd_of_points_gets_leader_lines_and_no_overlap(tmp_path):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    xs, ys = np.full(12, 0.5) + np.linspace(0, 0.01, 12), np.full(12, 0.5)
    ax.scatter(xs, ys)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    placed = plots.place_labels(ax, xs, ys, [f"method-{i}-Default" for i in range(12)])
    plt.close(fig)
    assert not any(p.collides for p in placed) and sum(p.leader for p in placed) >= 6
    for i, a in enumerate(placed):
        for b in placed[i + 1 :]:
            assert not _boxes_overlap(a.box, b.box)
