"""The trial table (one row per trial record) read and selected over, shared by the planner, `show`, `export`,
submissions and the report; the named protocols that decide which trials a sweep runs are ``orchestrator.protocols``,
and one trial run on a replica is ``orchestrator.run_trial``.

- ``load``: a store, Parquet or CSV file read into the typed trial table;
- ``selection``: the selection rule per tuning budget, the workflow costs it implies, and the views it yields;
- ``pretraining``: the graphs a foundation model's configuration was pretrained on, and the sweep's exclusion rule.

The report (``orchestrator.analysis``) imports these; nothing here imports the report.
"""
