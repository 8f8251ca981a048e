"""The conformance check: does a method service keep the NodeGround contract?

``run_checks(endpoint)`` returns one result per contract item; ``orchestrator
validate`` prints them as a table. See ``checks.py`` for the list.
"""

from orchestrator.conformance.checks import FAIL, PASS, REFUSED, SKIP, CheckResult, Options, run_checks
from orchestrator.conformance.guard import GuardedClient, LabelLeak

__all__ = ["FAIL", "PASS", "REFUSED", "SKIP", "CheckResult", "GuardedClient", "LabelLeak", "Options", "run_checks"]
