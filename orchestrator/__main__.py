"""`python -m orchestrator`: the same CLI as the `orchestrator` script (batch jobs call it through their Python)."""

from orchestrator.cli.main import main

main()
