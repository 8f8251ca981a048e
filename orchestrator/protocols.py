"""Named protocols: what a trial was run for, recorded in its row (``TrialRecord.protocol``).

``calibration``: the cost probe's trials (``orchestrator calibrate``): they time a method on synthetic graphs of
growing size so that ``plan --estimate`` can price graphs larger than any a store holds. They are ordinary
records, read by the estimate and never shown by ``show``, ``export`` or ``report``.
"""

from __future__ import annotations

import pandas as pd

CALIBRATION = "calibration"


def without_calibration(frame: pd.DataFrame) -> pd.DataFrame:
    """A trial table without the cost probe's rows: they time methods on synthetic graphs and rank nothing."""
    if "protocol" not in frame.columns:
        return frame
    return frame[frame["protocol"].astype("string").fillna("") != CALIBRATION]
