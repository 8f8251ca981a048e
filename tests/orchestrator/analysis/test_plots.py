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


def test_every_point_of_the_endpoint_plot_is_named_without_collisions(tmp_path):
    df = _endpoints()
    placed = plots.pareto(df, tmp_path / "p.png", "t", "overhead")
    assert sorted(p.label for p in placed) == sorted(df["view"])
    assert not [p.label for p in placed if p.collides]
    for i, a in enumerate(placed):
        for b in placed[i + 1 :]:
            assert not _boxes_overlap(a.box, b.box), (a.label, b.label)


def test_the_budget_plot_names_endpoints_by_method_and_budget_points_by_k(tmp_path):
    ends = _endpoints(1)
    inter = []
    for m in SUPERVISED:
        d, t = ends[ends["view"] == f"{m}-Default"].iloc[0], ends[ends["view"] == m].iloc[0]
        for i, k in enumerate((2, 5, 10, 25), start=1):
            f = i / 5
            x = d["mean_overhead"] + f * (t["mean_overhead"] - d["mean_overhead"])
            y = d["mean_improvability"] + f * (t["mean_improvability"] - d["mean_improvability"])
            inter.append({"view": f"{m}@{k}", "variant": "budget", "method": m, "kind": "supervised", "k": float(k),
                          "mean_overhead": x, "mean_improvability": y})  # fmt: skip
    df = pd.concat([ends.drop(columns="on_front"), pd.DataFrame(inter)], ignore_index=True)
    df["on_front"] = pareto_front(df)
    placed = plots.pareto(df, tmp_path / "b.png", "t", "overhead", budgets=True)
    assert len(placed) == len(df)
    labels = [p.label for p in placed]
    assert sorted(set(ends["view"])) == sorted(x for x in labels if not x.isdigit())
    assert sorted(x for x in labels if x.isdigit()) == sorted(["2", "5", "10", "25"] * len(SUPERVISED))
    assert sum(p.collides for p in placed) == 0


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
