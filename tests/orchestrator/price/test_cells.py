"""A plan's cells priced: every estimate inside its own interval, whatever the held-out errors say."""

from __future__ import annotations

import pandas as pd

from orchestrator.cli.specs import plan_specs
from orchestrator.plan import SweepPlan, make_plan
from orchestrator.price import estimate_cells, learn_cost_model
from tests.orchestrator.price.helpers import LARGE, SMALL, gcn_law, probe, records


def test_held_out_errors_all_of_one_sign_still_give_an_interval_around_the_estimate():
    """The old interval was the 10-90% range of held-out measured/predicted ratios: three errors of one sign put
    appnp's 84,890 h outside its own 109,509-119,549 h. Here every held-out dataset runs 30-40% slower than the
    model learned without it says; the interval widens and still contains the estimate."""

    def slow_law(size, regime, config, epochs):
        seconds, peak = gcn_law(size, regime, config, epochs)
        return seconds * (1.3 + 0.1 * (size.nodes % 2)), peak

    frame = pd.concat([records(SMALL + LARGE, law=slow_law), probe()])
    model = learn_cost_model(frame)
    specs = plan_specs(("gcn",), {})
    plan = make_plan(SweepPlan(("gcn",), ("cora",), ("10/10/80",), (0,), 201), specs)
    (cost,) = estimate_cells(plan, model)
    assert cost.low <= cost.seconds <= cost.high and cost.peak_low <= cost.peak <= cost.peak_high
