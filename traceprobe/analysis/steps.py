"""Steps from ``ProfilerStep#N`` annotations, on the host and on the device.

- A step's *host window* runs from its ``ProfilerStep#N`` start to the next step's
  start; the last step's ends at its own end. *Host time* is its length.
- A step's *device work* is the device work launched inside its host window (by
  the launch times of :mod:`.profiled`, so step N does not hold step N-1's GPU
  tail). Its *GPU time* runs from the first start to the last end of that work;
  *GPU busy* is the length of the union of its intervals (all devices).
- Every per-step figure (cross-device, copy/compute, comm/compute and stream
  concurrency) is computed on the step's own device work.
- *Throughput* is steps / summed GPU step time, in steps per second; a trace
  whose steps hold no device work (a CPU-only run) uses host step times instead.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from .. import intervals as iv
from ..trace import Trace
from .memo import device_column, per_trace
from .profiled import Launches
from .step_figures import step_figures

STEP_COLUMNS = ["step", "host_start_ns", "host_end_ns", "host_ns", "gpu_start_ns", "gpu_end_ns", "gpu_ns", "gpu_busy_ns", "events"]


def clip_trace(trace: Trace, lo: int, hi: int) -> Trace:
    """A copy of ``trace`` whose device and host events are clipped to ``[lo, hi)``.

    Events wholly outside the window are dropped; others are cut at its edges.
    Everything derived from the events (``steps``, ``window_ns``) is derived again
    for the copy: a :class:`~traceprobe.trace.Trace` computes them from its events.
    """

    def clip(df: pd.DataFrame) -> pd.DataFrame:
        s = df["start_ns"].to_numpy().clip(lo, hi)
        e = df["end_ns"].to_numpy().clip(lo, hi)
        keep = e > s
        out = df.loc[keep].copy()
        out["start_ns"] = s[keep]
        out["end_ns"] = e[keep]
        return out.reset_index(drop=True)

    return replace(trace, device_events=clip(trace.device_events), host_events=clip(trace.host_events))


@per_trace
def step_windows(trace: Trace) -> pd.DataFrame:
    """Host windows of the steps (module doc): columns ``step``, ``start_ns``, ``end_ns``, ``duration_ns`` (int64).
    Computed once per trace: callers read it and do not change it."""
    st = trace.steps
    if st.empty:
        return pd.DataFrame({c: pd.Series([], dtype=np.int64) for c in ("step", "start_ns", "end_ns", "duration_ns")})
    starts = st["start_ns"].to_numpy(np.int64)
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1] = max(int(st["end_ns"].iloc[-1]), int(starts[-1]))
    return pd.DataFrame({"step": st["step"].to_numpy(np.int64), "start_ns": starts, "end_ns": ends, "duration_ns": ends - starts})


def step_of(trace: Trace, la: Launches) -> np.ndarray:
    """Index into ``trace.steps`` of the step whose host window launched each device event; -1 for none.

    The last step's window includes its end: a launch at the very end of the
    profiled steps still belongs to them (see :mod:`.profiled`).
    """
    w = step_windows(trace)
    out = np.full(len(trace.device_events), -1, dtype=np.int64)
    if w.empty or out.size == 0:
        return out
    starts = w["start_ns"].to_numpy(np.int64)
    i = np.searchsorted(starts, la.launch_ns, side="right") - 1
    inside = (la.launch_ns >= starts[0]) & (la.launch_ns <= int(w["end_ns"].iloc[-1])) & la.kept
    out[inside] = i[inside]
    return out


def device_steps(trace: Trace, la: Launches) -> pd.DataFrame:
    """Per step: host time, GPU time, GPU busy and the figures of its own device work.

    Args:
        trace: the whole trace (its ``steps`` and device events).
        la: the launches of its device events (:func:`.profiled.launches`).

    Returns:
        DataFrame with columns ``step`` (int64), ``host_start_ns``,
        ``host_end_ns``, ``host_ns``, ``gpu_start_ns``, ``gpu_end_ns`` (-1 for a
        step without device work), ``gpu_ns``, ``gpu_busy_ns``, ``events`` (int64,
        0 without device work), then the :data:`~.step_figures.STEP_FIGURES`
        columns (float64, :func:`.step_figures.step_figures`).
        Empty (with these columns) without step annotations.
    """
    w = step_windows(trace)
    if w.empty:
        return pd.DataFrame({c: pd.Series([], dtype=np.int64) for c in STEP_COLUMNS})
    which = step_of(trace, la)
    n = len(w)
    sel = which >= 0
    k = which[sel]
    s, e = device_column(trace, "start_ns")[sel], device_column(trace, "end_ns")[sel]
    events = np.bincount(k, minlength=n).astype(np.int64)
    has = events > 0
    first = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, k, s)
    np.maximum.at(last, k, e)
    first, last = np.where(has, first, -1), np.where(has, last, -1)
    busy = iv.grouped_coverage(k, s, e, 1, n)
    return pd.DataFrame({"step": w["step"].to_numpy(np.int64), "host_start_ns": w["start_ns"].to_numpy(np.int64),
                         "host_end_ns": w["end_ns"].to_numpy(np.int64), "host_ns": w["duration_ns"].to_numpy(np.int64),
                         "gpu_start_ns": first, "gpu_end_ns": last, "gpu_ns": np.where(has, last - first, 0), "gpu_busy_ns": busy,
                         "events": events, **step_figures(trace, which, n)})


def throughput(steps: pd.DataFrame) -> float:
    """Steps per second over GPU step times, or host step times when no step has device work (module doc)."""
    if steps.empty:
        return float("nan")
    total = int(steps["gpu_ns"].sum()) if int(steps["events"].sum()) > 0 else int(steps["host_ns"].sum())
    return float(len(steps) / (total / 1e9)) if total > 0 else float("nan")
