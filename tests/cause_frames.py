"""The reference of tests/test_cause_tables.py: the parts of :func:`traceprobe.analysis.job.cause_tables.rank_tables`
as they were computed before they were summed on arrays (a groupby, a pivot table and a join), kept unchanged but
for its name."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from traceprobe.analysis.job.cause_tables import PARTS, RankColumns, _cat


def parts_frames(cols: Sequence[RankColumns]) -> pd.DataFrame:
    busy = _cat(cols, "busy", ["step", "compute", "other_busy"])
    parts = pd.DataFrame(busy.groupby(["rank", "step"], sort=True).sum())
    idle = _cat(cols, "idle", ["step", "cause", "ns"])
    if len(idle):
        parts = pd.DataFrame(parts.join(idle.pivot_table(index=["rank", "step"], columns="cause", values="ns", aggfunc="sum"), how="left"))
    parts = pd.DataFrame(parts.reindex(columns=list(PARTS))).fillna(0.0).astype(np.float64).reset_index()
    return parts.astype({"rank": np.int64, "step": np.int64})
