"""Per-step figures from ``ProfilerStep#N`` annotations.

A step's window runs from its ``ProfilerStep#N`` start to the next step's start;
the last step's window ends at the later of its own end and the last device event
(device work launched in a step may finish after the host moved on). *Step time*
(latency) is the window's length; *throughput* is steps / summed step time, in
steps per second.
"""

from __future__ import annotations

from dataclasses import fields, replace

import numpy as np
import pandas as pd

from ..trace import Trace


def clip_trace(trace: Trace, lo: int, hi: int) -> Trace:
    """A copy of ``trace`` whose device and host events are clipped to ``[lo, hi)``.

    Events wholly outside the window are dropped; others are cut at its edges.
    Everything derived from the events (steps, window) describes the clipped copy.
    """

    def clip(df: pd.DataFrame) -> pd.DataFrame:
        s = df["start_ns"].to_numpy().clip(lo, hi)
        e = df["end_ns"].to_numpy().clip(lo, hi)
        keep = e > s
        out = df[keep].copy()
        out["start_ns"] = s[keep]
        out["end_ns"] = e[keep]
        return out.reset_index(drop=True)

    kw = {"device_events": clip(trace.device_events), "host_events": clip(trace.host_events)}
    if "steps" in {f.name for f in fields(trace)}:  # a stored copy: clip it too, never carry it stale
        kw["steps"] = clip(trace.steps) if not trace.steps.empty else trace.steps
    return replace(trace, **kw)


def step_windows(trace: Trace) -> pd.DataFrame:
    """Step windows: columns ``step`` (int64), ``start_ns``, ``end_ns``, ``duration_ns`` (int64)."""
    st = trace.steps
    if st.empty:
        return pd.DataFrame({c: pd.Series([], dtype=np.int64) for c in ("step", "start_ns", "end_ns", "duration_ns")})
    starts = st["start_ns"].to_numpy()
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    last_dev = trace.window_ns[1]
    ends[-1] = max(int(st["end_ns"].iloc[-1]), last_dev)
    return pd.DataFrame({"step": st["step"].to_numpy(), "start_ns": starts, "end_ns": ends, "duration_ns": ends - starts})
