"""Summaries across the per-rank traces of one distributed run.

Reports that carry a rank (``distributedInfo.rank``) and sit in the same folder
form one run. For each headline figure the summary gives min, median and max
across ranks; the *slowest rank* is the one with the longest mean step time, or
with the longest trace window where there are no steps.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from .busy import fraction_of
from .report import OverlapReport


def headline(r: OverlapReport) -> dict[str, float]:
    """One report's headline figures (fractions in 0..1, times in ns; NaN where undefined)."""
    copy_all = r.copy_overlap[r.copy_overlap["direction"] == "all"] if not r.copy_overlap.empty else r.copy_overlap

    steps = r.steps
    return {
        "window_ns": float(r.window_ns[1] - r.window_ns[0]),
        "mean_step_ns": float(steps["duration_ns"].mean()) if not steps.empty else math.nan,
        "utilization": float(r.devices.devices["utilization"].mean()) if not r.devices.devices.empty else math.nan,
        "copy_overlap": fraction_of(copy_all, "overlapped_ns", "copy_ns"),
        "comm_overlap": fraction_of(r.comm_overlap, "overlapped_ns", "comm_ns"),
        "stream_concurrency": fraction_of(r.stream_concurrency, "multi_stream_ns", "busy_ns"),
        "cpu_gpu_overlap": r.cpu_gpu.fraction,
    }


def rank_summary(reports: list[OverlapReport]) -> pd.DataFrame:
    """Across-rank summary of every folder holding two or more ranked traces.

    Returns:
        DataFrame with columns ``run`` (str, the folder), ``ranks`` (int64),
        ``figure`` (str, see :func:`headline`), ``min``, ``median``, ``max``
        (float64), ``slowest_rank`` (int64, same for every row of a run).
        Empty when no folder has two ranked traces.
    """
    runs: dict[str, list[OverlapReport]] = defaultdict(list)
    for r in reports:
        if r.rank is not None:
            runs[str(Path(r.path).parent)].append(r)
    rows = []
    for run, rs in sorted(runs.items()):
        if len(rs) < 2:
            continue
        figs = pd.DataFrame([headline(r) for r in rs])
        ranks = [r.rank for r in rs]
        key = figs["mean_step_ns"] if figs["mean_step_ns"].notna().any() else figs["window_ns"]
        slowest = int(ranks[int(np.nanargmax(key.to_numpy()))])
        for fig in figs.columns:
            col = figs[fig]
            rows.append(
                {
                    "run": run,
                    "ranks": len(rs),
                    "figure": fig,
                    "min": float(col.min()),
                    "median": float(col.median()),
                    "max": float(col.max()),
                    "slowest_rank": slowest,
                }
            )
    return pd.DataFrame(rows, columns=["run", "ranks", "figure", "min", "median", "max", "slowest_rank"])
