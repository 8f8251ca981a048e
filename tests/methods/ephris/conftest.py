"""The ephris family's own dependencies (methods/ephris/requirements.txt) live apart from the
orchestrator's, in .venv/families/ephris (make install); its tests import them from there, after
the environment's own packages (which they share at the same versions, except what only ephris needs)."""

from __future__ import annotations

import sys

from contract.families import family_site

_SITE = family_site("ephris")
assert _SITE is not None, "the ephris family's dependencies are not installed: run `make install`"
if str(_SITE) not in sys.path:
    sys.path.append(str(_SITE))
