"""Aggregate views over the trial record table: rankings, Elo, costs, Pareto frontiers, report.

One long table of trials goes in (see ``orchestrator.records``); tidy tables come out. The
modules are importable without matplotlib except ``plots`` and ``site``, which draw the report.
"""

from orchestrator.analysis.load import AnalysisInputError, load_trials
from orchestrator.analysis.workflow import BUDGETS, FULL, workflow_costs

__all__ = ["AnalysisInputError", "BUDGETS", "FULL", "load_trials", "workflow_costs"]
