"""The back-test: a price learned from small graphs and the probe, held against graphs many times larger."""

from __future__ import annotations

import pandas as pd

from orchestrator.price import backtest
from tests.orchestrator.price.helpers import LARGE, SMALL, probe, records


def test_with_the_probe_a_price_holds_on_graphs_5_to_55_times_larger_than_the_records():
    rows = backtest(pd.concat([records(SMALL), probe(), records(LARGE, seed=2)]), by_size=5)
    (row,) = rows
    assert set(row.learned_from) == set(SMALL) and set(row.datasets) == set(LARGE)
    assert row.size_factor[1] > 35  # minesweeper has 40 times wisconsin's nodes
    assert 0.8 < row.ratio < 1.25, row
    assert 0.8 < row.peak_ratio < 1.25, row
