"""The report: rankings, Elo, costs, Pareto frontiers and the static site over the trial table.

One long table of trials goes in (read and selected by the rules of ``orchestrator.trial_table``); tidy
tables come out. The modules are importable without matplotlib except ``plots`` and ``site``, which
draw the report.
"""
