"""Reading records for a price: which trials are the probe's, and what they may teach."""

from __future__ import annotations

import pandas as pd

from orchestrator.price import PROBE_GRAPHS, learn_cost_model, trial_costs
from tests.orchestrator.price.helpers import SMALL, probe, records


def test_calibration_rows_teach_the_cost_of_an_epoch_not_how_many_epochs_a_fit_runs():
    costs = trial_costs(pd.concat([records(SMALL), probe()]))
    assert costs["calibration"].sum() == len(PROBE_GRAPHS) * 6
    model = learn_cost_model(pd.concat([records(SMALL), probe()])).methods["gcn"]
    assert not model.epochs.from_prior and max(model.epochs.best) < 40  # the real records' best epochs only
