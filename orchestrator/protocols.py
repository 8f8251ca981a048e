"""Named protocols: the sweeps NodeGround publishes results for, and what each trial was run for.

``paper``: the paper's protocol, both regimes, splits 0-4, budget 201 (a default plus 200 sampled
configurations), every catalog task. ``lite``: the tier a contributor runs first and the project ships
reference records of (``orchestrator.reference``): both regimes, split 0, budget ``LITE_BUDGET``, every catalog
task this machine can load. A budget of K is a prefix of a larger one, so a lite trial is also a paper trial
(same key), and a full run contains the lite run it verifies. A contributor's Lite run without ``--datasets`` covers
the datasets the shipped reference holds, what it is compared with (``orchestrator.cli.options.default_datasets``).

A command given ``--protocol`` takes the protocol's datasets, regimes, splits and budget for every one of those
flags not given; a trial is recorded with the protocol's name when the protocol holds it (its regime, split and
place in its configuration sequence), so a store says which trials belong to which protocol.

``calibration``: the cost probe's trials (``orchestrator calibrate``): they time a method on synthetic graphs of
growing size so that ``plan --estimate`` can price graphs larger than any a store holds. They are ordinary
records, read by the estimate and never shown by ``show``, ``export`` or ``report``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

CALIBRATION = "calibration"
LITE_BUDGET = 10  # see LITE's note: chosen from our own tuning requirements (docs/reference.md)


@dataclass(frozen=True)
class Protocol:
    name: str
    regimes: tuple[str, ...]
    splits: tuple[int, ...]
    budget: int
    datasets: str  # "catalog": every catalog task; "loadable": those this machine can load now
    note: str

    def holds(self, regime: str, split: int, index: int) -> bool:
        """Whether a trial (its regime, split and place in its configuration sequence) belongs to the protocol."""
        return regime in self.regimes and split in self.splits and index < self.budget


PAPER = Protocol(
    "paper", ("10/10/80", "50/25/25"), (0, 1, 2, 3, 4), 201, "catalog", "the paper's protocol (about 1.9 M trials)"
)
LITE = Protocol(
    "lite",
    ("10/10/80", "50/25/25"),
    (0,),
    LITE_BUDGET,
    "loadable",
    f"every loadable catalog task, both regimes, split 0, budget {LITE_BUDGET}",
)
PROTOCOLS = {p.name: p for p in (PAPER, LITE)}


def protocol_named(name: str) -> Protocol:
    """The protocol of a name; ValueError (one line) naming the known ones."""
    if name not in PROTOCOLS:
        raise ValueError(f"unknown protocol {name!r}; choose from {', '.join(PROTOCOLS)}")
    return PROTOCOLS[name]


def without_calibration(frame: pd.DataFrame) -> pd.DataFrame:
    """A trial table without the cost probe's rows: they time methods on synthetic graphs and rank nothing."""
    if "protocol" not in frame.columns:
        return frame
    return frame[frame["protocol"].astype("string").fillna("") != CALIBRATION]


def recorded_protocol(name: str | None, regime: str, split: int, index: int) -> str | None:
    """The protocol a trial of a sweep run under ``name`` is recorded with: a named protocol's when it holds the
    trial (a flag may have widened the sweep beyond it), the cost probe's always, else None."""
    if name is None or name not in PROTOCOLS:
        return name
    return name if PROTOCOLS[name].holds(regime, split, index) else None
