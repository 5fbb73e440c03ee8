"""Summaries across the ranks of each profiler window of a run.

Runs and windows come from :func:`.run.build_runs`. For each window holding two
or more ranked traces, and each headline figure, the summary gives min, median
and max across the window's ranks. Windows are never mixed: a folder of 2 ranks
x 2 windows gives two summaries of 2 ranks each.

No rank is called *slowest*: in a collective every rank finishes together, and
the rank with the longest steps or the most busy time is often the one that was
ahead and waited in its collectives (NCCL kernels spin while they wait). Until
collectives are matched across ranks, the summary names two ranks separately:
``busiest_rank``, the rank whose devices ran the most work outside communication
kernels (``work_ns``, :func:`.busy.work_ns`), and ``most_comm_rank``, the rank with
the most time in communication kernels (``comm_ns``, waiting for peers included).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..per_trace import OverlapReport
from ..run import Run, build_runs

COLUMNS = ["run", "window", "ranks", "figure", "min", "median", "max", "busiest_rank", "most_comm_rank"]


def rank_summary(reports: list[OverlapReport] | None = None, runs: list[Run] | None = None) -> pd.DataFrame:
    """Across-rank summary of every window holding two or more ranked traces.

    Args:
        reports: per-trace reports, grouped with :func:`.run.build_runs`; or
        runs: runs already built (one of the two).

    Returns:
        DataFrame with columns ``run`` (str, the run label), ``window`` (str,
        e.g. ``steps 2-4``), ``ranks`` (int64, distinct ranks in the window),
        ``figure`` (str, see :attr:`.report.OverlapReport.headline`), ``min``, ``median``, ``max``
        (float64), ``busiest_rank`` (int64) and ``most_comm_rank`` (Int64, NA
        without communication), the same for every row of a window (module doc).
        Empty when no window has two ranked traces.
    """
    if runs is None:
        runs = build_runs(reports or [])
    rows = []
    for run in runs:
        for w in run.windows:
            ranked = [(k, r) for k, r in zip(w.ranks, w.reports) if k is not None]
            if w.rank_count < 2:
                continue
            figs = pd.DataFrame([r.headline for _, r in ranked])
            ranks = [k for k, _ in ranked]
            busiest = int(ranks[int(np.argmax(figs["work_ns"].to_numpy()))])
            comm = figs["comm_ns"].to_numpy()
            most_comm = int(ranks[int(np.nanargmax(comm))]) if np.isfinite(comm).any() else pd.NA
            for fig in figs.columns:
                col = figs[fig]
                rows.append([run.name, w.label, w.rank_count, fig, float(col.min()), float(col.median()), float(col.max()), busiest, most_comm])
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["most_comm_rank"] = out["most_comm_rank"].astype("Int64")
    return out
