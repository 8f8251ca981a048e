"""The one base of the errors a user can fix: a flag, a file, a dataset name, a store in use, a service not started.

The CLI prints such an error's message as one line and exits 2 (orchestrator/cli/errors.py), whichever package
raised it. It lives in the contract, the bottom of the import order, so that the contract's, the data layer's
and the services' errors derive from it without importing the CLI.
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user can fix; the message says what."""
