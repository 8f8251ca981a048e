"""The numeric settings a service or the orchestrator reads from its environment (or a service's flags), and the one
rule that parses them: a number of the setting's kind inside its range, else one line that names the setting and
the range (``SettingError``).

Each program checks its settings at start-up (``check_all``; ``methods.serve`` for a service, the CLI's callback for the
orchestrator), so a bad value ends in that line and exit 2 before anything starts; code that reads one later reads it
through the same ``Setting.read``. An integer setting takes ``8589934592`` or ``8e9`` (an integral number), never
``1.5``; every range is finite, so ``1e99`` is refused as ``abc`` and ``-1`` are.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from contract.handshake import PARENT_PID_ENV


class SettingError(ValueError):
    """A setting's value is not a number of its kind inside its range; the message is one line naming both."""


@dataclass(frozen=True)
class Setting:
    """One setting: the variable (and the service flag, if any) that sets it, its kind, range and default."""

    env: str
    kind: type[int] | type[float]
    low: float
    high: float
    default: int | float | None
    help: str
    flag: str = ""  # the service's flag that overrides the variable, "" where none does

    def expected(self) -> str:
        """The accepted values in words: ``an integer in [1, 2**50]``."""
        what = "an integer" if self.kind is int else "a number"
        return f"{what} in [{_shown(self.low)}, {_shown(self.high)}]"

    def parse(self, raw: str, source: str | None = None) -> int | float:
        """``raw`` as this setting's value; SettingError naming ``source`` (default: the variable) otherwise."""
        text = raw.strip()
        try:
            value: float = float(text)
        except ValueError:
            value = math.nan
        if self.kind is int and math.isfinite(value) and value.is_integer():
            value = int(text) if text.lstrip("+-").isdigit() else int(value)
        elif self.kind is int:
            value = math.nan
        if not self.low <= value <= self.high:  # NaN fails too
            raise SettingError(f"{source or self.env}={raw[:40]!r}: must be {self.expected()}")
        return self.kind(value)

    def read(self, environ: Mapping[str, str] | None = None) -> int | float | None:
        """The variable's value, or the default where it is unset or empty."""
        raw = (os.environ if environ is None else environ).get(self.env, "")
        return self.default if not raw.strip() else self.parse(raw)


def check_all(settings: Iterable[Setting], environ: Mapping[str, str] | None = None) -> None:
    """Parse every setting of a program from its environment once, at start-up: the first bad one's SettingError."""
    for setting in settings:
        setting.read(environ)


def _shown(number: float) -> str:
    if number >= 2**20 and math.log2(number).is_integer():
        return f"2**{int(math.log2(number))}"
    return f"{number:g}" if isinstance(number, float) and not number.is_integer() else str(int(number))


DAY_S = 86400.0
MAX_BYTES = 2**50  # a petabyte: more than any machine these settings describe

GRAPH_CACHE_BYTES = Setting(
    "NODEGROUND_GRAPH_CACHE_BYTES", int, 1, MAX_BYTES, 8 << 30, "bytes of graphs held at once", "--graph-cache-bytes"
)
MAX_UPLOAD_BYTES = Setting(
    "NODEGROUND_MAX_UPLOAD_BYTES",
    int,
    1,
    MAX_BYTES,
    8 << 30,
    "largest graph accepted (tensors plus its N x C prediction); the memory available bounds it too",
    "--max-upload-bytes",
)
UPLOAD_WAIT_SECONDS = Setting(
    "NODEGROUND_UPLOAD_WAIT_SECONDS",
    float,
    0.0,
    DAY_S,
    60.0,
    "how long an upload waits for one of the concurrent upload slots before RESOURCE_EXHAUSTED",
    "--upload-wait-seconds",
)
UPLOAD_IDLE_SECONDS = Setting(
    "NODEGROUND_UPLOAD_IDLE_SECONDS",
    float,
    0.001,
    DAY_S,
    30.0,
    "how long a stream may go without a chunk before it is cancelled: an upload's next chunk (DEADLINE_EXCEEDED, its "
    "slot freed), a Predict reply's chunk its client has not taken",
    "--upload-idle-seconds",
)
MAX_MODELS = Setting(
    "NODEGROUND_MAX_MODELS",
    int,
    1,
    1_000_000,
    32,
    "fitted models held without Release before the least recently used is dropped",
    "--max-models",
)
# One thread per service, one service per core: a one-thread service keeps its pace when other work shares the
# machine (a two-thread one on two cores with one kept busy ran 3-4x slower, 19-29x under heavier load), and two
# one-thread services beat one two-thread service at every size tried (docs/running.md#threads-and-kernels).
THREADS = Setting("NODEGROUND_THREADS", int, 1, 4096, 1, "torch threads of a service")
MEMORY_BUDGET_BYTES = Setting(
    "NODEGROUND_MEMORY_BUDGET_BYTES", int, 1, MAX_BYTES, None, "bytes a fit may plan on (default: 75% of the free)"
)
PARENT_PID = Setting(PARENT_PID_ENV, int, 1, 2**22, None, "the launcher's pid: the service exits when it is gone")
RANDOM_INIT_WEIGHTS = Setting(
    "NODEGROUND_RANDOM_INIT_WEIGHTS", int, 0, 1, 0, "1: a GFM without its checkpoint runs with random weights"
)
ALLOW_UNVERIFIED_WEIGHTS = Setting(
    "NODEGROUND_ALLOW_UNVERIFIED_WEIGHTS", int, 0, 1, 0, "1: weights without a pinned sha256 may be used"
)
START_TIMEOUT_S = Setting(
    "NODEGROUND_START_TIMEOUT_S", float, 0.001, DAY_S, None, "seconds a local service may take to announce its port"
)
ADD_MEMORY = Setting(
    "NODEGROUND_ADD_MEMORY", int, 1, MAX_BYTES, None, "bytes a dataset's arrays may take in `datasets add`"
)

#: The servicer's limits: each has a flag of `methods.serve` that overrides its variable.
SERVICE_LIMITS = (GRAPH_CACHE_BYTES, MAX_UPLOAD_BYTES, UPLOAD_WAIT_SECONDS, UPLOAD_IDLE_SECONDS, MAX_MODELS)
#: Everything numeric a service reads from its environment.
SERVICE_SETTINGS = (
    *SERVICE_LIMITS,
    THREADS,
    MEMORY_BUDGET_BYTES,
    PARENT_PID,
    RANDOM_INIT_WEIGHTS,
    ALLOW_UNVERIFIED_WEIGHTS,
)
#: Everything numeric the orchestrator reads, and what its embedded services inherit from its environment (their
#: launcher's pid is set for each, not inherited).
ORCHESTRATOR_SETTINGS = (START_TIMEOUT_S, ADD_MEMORY, *(s for s in SERVICE_SETTINGS if s is not PARENT_PID))
