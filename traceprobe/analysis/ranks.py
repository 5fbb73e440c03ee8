"""Summaries across the ranks of each profiler window of a run.

Runs and windows come from :func:`.run.build_runs`. For each window holding two
or more ranked traces, and each headline figure, the summary gives min, median
and max across the window's ranks; the *slowest rank* is the one with the
longest mean step time, or with the longest trace duration where there are no
steps. Windows are never mixed: a folder of 2 ranks x 2 windows gives two
summaries of 2 ranks each.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .busy import fraction_of
from .report import OverlapReport
from .run import Run, build_runs

COLUMNS = ["run", "window", "ranks", "figure", "min", "median", "max", "slowest_rank"]


def headline(r: OverlapReport) -> dict[str, float]:
    """One report's headline figures (fractions in 0..1, times in ns; NaN where undefined).

    ``duration_ns`` is the length of the report's trace window
    (``window_ns[1] - window_ns[0]``).
    """
    copy_all = r.copy_overlap[r.copy_overlap["direction"] == "all"] if not r.copy_overlap.empty else r.copy_overlap

    steps = r.steps
    return {
        "duration_ns": float(r.window_ns[1] - r.window_ns[0]),
        "mean_step_ns": float(steps["duration_ns"].mean()) if not steps.empty else math.nan,
        "utilization": float(r.devices.devices["utilization"].mean()) if not r.devices.devices.empty else math.nan,
        "copy_overlap": fraction_of(copy_all, "overlapped_ns", "copy_ns"),
        "comm_overlap": fraction_of(r.comm_overlap, "overlapped_ns", "comm_ns"),
        "stream_concurrency": fraction_of(r.stream_concurrency, "multi_stream_ns", "busy_ns"),
        "cpu_gpu_overlap": r.cpu_gpu.fraction,
    }


def rank_summary(reports: list[OverlapReport] | None = None, runs: list[Run] | None = None) -> pd.DataFrame:
    """Across-rank summary of every window holding two or more ranked traces.

    Args:
        reports: per-trace reports, grouped with :func:`.run.build_runs`; or
        runs: runs already built (one of the two).

    Returns:
        DataFrame with columns ``run`` (str, the run label), ``window`` (str,
        e.g. ``steps 2-4``), ``ranks`` (int64, distinct ranks in the window),
        ``figure`` (str, see :func:`headline`), ``min``, ``median``, ``max``
        (float64), ``slowest_rank`` (int64, same for every row of a window).
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
            figs = pd.DataFrame([headline(r) for _, r in ranked])
            ranks = [k for k, _ in ranked]
            key = figs["mean_step_ns"] if figs["mean_step_ns"].notna().any() else figs["duration_ns"]
            slowest = int(ranks[int(np.nanargmax(key.to_numpy()))])
            for fig in figs.columns:
                col = figs[fig]
                rows.append([run.name, w.label, w.rank_count, fig, float(col.min()), float(col.median()), float(col.max()), slowest])
    return pd.DataFrame(rows, columns=COLUMNS)
