"""The price of a sweep before it runs: fit+predict hours and peak memory per cell, from records and each family's
cost prior (docs/estimate.md).

The package's face is ``__all__``: nothing outside it imports a module of it or a name not listed here
(``tests/orchestrator/price/test_face.py``). Its modules, each importing only those above it:

- ``sizes``: a graph's sizes as a prior's terms name them, from the catalog;
- ``model``: one method's model, its prior's terms laid out as columns (``Design``) and weighed from records in
  three steps (``learn_method_model``), the prediction formula (``Weights``), epochs, intervals;
- ``records``: the stores' trials read, a trial's cost, the hardware, every method's model (``learn_cost_model``);
- ``cells``: a plan's cells priced, summed by group and shard;
- ``backtest``: the price checked against held-out datasets;
- ``probe``: the cost probe (``orchestrator calibrate``), each method on synthetic graphs of growing size.
"""

from orchestrator.price.backtest import BacktestRow, backtest, size_holdout
from orchestrator.price.cells import CellCost, CostRow, ShardCost, estimate_cells, shard_costs, summarise
from orchestrator.price.model import (
    KAPPA,
    MIN_DATASETS,
    Z80,
    Design,
    EpochsModel,
    MethodModel,
    Weights,
    interval,
    learn_method_model,
)
from orchestrator.price.probe import (
    GFM_SECONDS,
    PROBE_CONFIGS,
    PROBE_EPOCHS,
    PROBE_GRAPHS,
    PROBE_REGIMES,
    SUPERVISED_SECONDS,
    ProbeProgress,
    calibrate,
    calibration_store,
    methods_to_probe,
    prior_work,
)
from orchestrator.price.records import (
    CostModel,
    EstimateError,
    choose_hardware,
    learn_cost_model,
    read_records,
    trial_costs,
)
from orchestrator.price.sizes import Size, size_values, sizes_of, train_fraction

__all__ = [
    "GFM_SECONDS",
    "KAPPA",
    "MIN_DATASETS",
    "PROBE_CONFIGS",
    "PROBE_EPOCHS",
    "PROBE_GRAPHS",
    "PROBE_REGIMES",
    "SUPERVISED_SECONDS",
    "Z80",
    "BacktestRow",
    "CellCost",
    "CostModel",
    "CostRow",
    "Design",
    "EpochsModel",
    "EstimateError",
    "MethodModel",
    "ProbeProgress",
    "ShardCost",
    "Size",
    "Weights",
    "backtest",
    "calibrate",
    "calibration_store",
    "choose_hardware",
    "estimate_cells",
    "interval",
    "learn_cost_model",
    "learn_method_model",
    "methods_to_probe",
    "prior_work",
    "read_records",
    "shard_costs",
    "size_holdout",
    "size_values",
    "sizes_of",
    "summarise",
    "trial_costs",
    "train_fraction",
]
