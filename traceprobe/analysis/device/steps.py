"""Steps from ``ProfilerStep#N`` annotations, on the host and on the device.

- A step's *host window* runs from its ``ProfilerStep#N`` start to the next step's
  start; the last step's ends at its own end. *Host time* is its length.
- A step *launched* the device work whose launch lies inside its host window (by
  the launch times of :mod:`.profiled`).
- A step's *anchor* is the first start of the compute kernels it launched (of
  any device work it launched, if no compute kernel). Its *GPU interval* runs from
  its anchor to the next anchor (of the next step that launched work); the last
  such step's runs to the last end of the device work launched in the steps, and
  the first one's starts at the first start of that work. Where a later step's
  anchor lies before an earlier step's, the earlier boundary moves back to it:
  step N starts at the earliest anchor of steps N, N+1, ... . The intervals
  therefore never overlap and tile the device's time from the steps' first work
  to their last: side-stream prefetch launched early in a step no longer
  stretches that step back over the one before. Anchoring on compute rather than
  on any work keeps such a copy from setting the boundary: on a GPU that lags its
  host, the copies a prefetcher launches run at once on their idle stream, far
  ahead of the step's compute (the prefetch-on sample of ``sample_traces/causes``:
  boundaries at the copies gave steps of 3.6, 3.5 and 229.5 ms; at the compute,
  115.1, 60.8 and 60.8 ms, the first holding the copies that ran ahead from 0 ms).
  A step that launched no device work has an empty interval. *GPU time* is the
  interval's length; *GPU busy* the length of the union of every device
  interval inside it (all devices), whichever step launched it.
- Every per-step figure (cross-device, copy/compute, comm/compute and stream
  concurrency, :mod:`.step_figures`) is computed on the device intervals inside
  the step's GPU interval, cut at its edges, whichever step launched them: a copy
  of step k's output running during step k+1 counts in step k+1, overlapped by
  that step's compute.
- *Launched by this step*, a separate view: ``events`` counts the device work the
  step launched; ``launched_start_ns``/``launched_end_ns`` are its first start and
  last end, ``launched_busy_ns`` the length of its union.
- *Throughput*, in steps per second, is measured over the loop's periods: over
  the steps that launched device work, the number of steps from the first such
  step to the last, less one, over the time from the first one's GPU interval
  start to the last one's. Each GPU interval but the first and the last runs from
  one step's anchor to the next one's, a whole period of the loop; with three or
  more such steps the first is left out too, as it starts at the first of all the
  steps' work (copies a prefetcher ran ahead), not at its anchor. The last step's
  interval ends with its own work, before whatever the next step (not in the
  trace) waits for, so it is left out: on a host-bound loop it would hide a step's wait (the
  ``slow-input`` sample, whose DataLoader makes every step wait 20 ms on the host:
  38.5 ms per step over the summed GPU intervals, 45.5 ms between the steps'
  starts on the device, 45.6 ms between their host windows). With one such step, 1 / the
  longer of (its GPU time plus the time from its work's end to its host window's end,
  when that ends later: the next step's work is launched after it) and its host window
  (the host runs each step's code in turn: a loop of such steps takes at least that
  long a step): the one step of a trace of SGLang capturing its decode graph ran 11 µs
  of work in a 33.7 ms host step, which gave 90,777 steps/s over its GPU time alone;
  HTA's ``call_stack`` test trace launches its one kernel 395 ms into a 413 ms host
  step, which gave 55 steps/s from the kernel's start, beside a finding of 349 ms of
  host time a step. A trace whose steps hold no device work (a CPU-only run) uses the
  host windows alike.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..memo import device_column, empty_frame, per_trace
from .busy import compute_mask
from .profiled import Launches
from .step_figures import step_figures

STEP_COLUMNS = ["step", "host_start_ns", "host_end_ns", "host_ns", "gpu_start_ns", "gpu_end_ns", "gpu_ns", "gpu_busy_ns", "events",
                "launched_start_ns", "launched_end_ns", "launched_busy_ns"]


def clip_trace(trace: Trace, lo: int, hi: int) -> Trace:
    """A copy of ``trace`` whose device and host events are clipped to ``[lo, hi)``.

    Events wholly outside the window are dropped; others are cut at its edges.
    Everything derived from the events (``steps``, ``window_ns``) is derived again
    for the copy: a :class:`~traceprobe.reading.Trace` computes them from its events.
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
        return empty_frame(dict.fromkeys(("step", "start_ns", "end_ns", "duration_ns"), np.int64))
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


def gpu_intervals(anchor: np.ndarray, first: np.ndarray, last: np.ndarray, has: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The steps' GPU intervals (module doc) from each step's anchor, first start and last end of the work it launched.

    Args:
        anchor, first, last: int64 ns per step, in step order; read only where ``has``.
        has: bool per step: whether the step launched any device work.

    Returns:
        ``(starts, ends)``, int64 ns per step: consecutive, never overlapping,
        ``ends[i] == starts[i + 1]``, from the first start of all the steps' work to
        its last end; empty (``start == end``) for a step that launched none. All
        zeros when no step did.
    """
    n = first.size
    if not has.any():
        return np.zeros(n, np.int64), np.zeros(n, np.int64)
    big = np.iinfo(np.int64).max
    end_all = int(last[has].max())
    # step N starts at the earliest anchor of steps N, N+1, ...: a reversed running minimum
    starts = np.minimum.accumulate(np.where(has, anchor, big)[::-1])[::-1]
    starts = np.minimum(starts, end_all)  # (trailing steps without work: empty, at the end)
    # the first step with work (and the empty ones before it) from the first start of all of it
    lead = np.arange(n) <= int(np.argmax(has))
    starts = np.where(lead, min(int(starts[lead][-1]), int(first[has].min())), starts)
    ends = np.append(starts[1:], end_all)
    return starts, ends


def _pieces(s: np.ndarray, e: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Intervals ``[s, e)`` cut at the steps' GPU intervals (consecutive ``[starts, ends)``).

    Returns ``(event, step, piece_start, piece_end)``: each non-empty piece of each
    interval inside one step's GPU interval, with the interval's position in ``s``
    and the step's index. One numpy pass, no loop per interval.
    """
    lo, hi = int(starts[0]) if starts.size else 0, int(ends[-1]) if ends.size else 0
    s, e = s.clip(lo, hi), e.clip(lo, hi)
    ok = np.flatnonzero(e > s)
    s, e = s[ok], e[ok]
    # the step whose interval holds the start, and the one holding the last ns; among steps with the
    # same start (empty intervals before a non-empty one) the last, which is the non-empty one
    i0 = np.searchsorted(starts, s, side="right") - 1
    i1 = np.searchsorted(starts, e, side="left") - 1
    count = i1 - i0 + 1
    event = np.repeat(np.arange(s.size), count)
    offset = np.arange(event.size) - np.repeat(np.cumsum(count) - count, count)
    step = i0[event] + offset
    ps, pe = np.maximum(s[event], starts[step]), np.minimum(e[event], ends[step])
    keep = pe > ps
    return ok[event[keep]], step[keep], ps[keep], pe[keep]


def device_steps(trace: Trace, la: Launches) -> pd.DataFrame:
    """Per step: host time, the GPU interval and the figures of the device work inside it (module doc).

    Args:
        trace: the whole trace (its ``steps`` and device events).
        la: the launches of its device events (:func:`.profiled.launches`); the
            device work counted is the work launched inside the steps.

    Returns:
        DataFrame with columns ``step`` (int64), ``host_start_ns``,
        ``host_end_ns``, ``host_ns``, ``gpu_start_ns``, ``gpu_end_ns`` (the GPU
        interval; -1 for a step that launched no device work), ``gpu_ns``,
        ``gpu_busy_ns`` (0 without), ``events`` (device events the step launched),
        ``launched_start_ns``, ``launched_end_ns`` (-1 without), ``launched_busy_ns``
        (the launched-by-this-step view), all int64 ns, then the
        :data:`~.step_figures.STEP_FIGURES` columns (float64,
        :func:`.step_figures.step_figures`). Empty (with these columns) without
        step annotations.
    """
    w = step_windows(trace)
    if w.empty:
        return empty_frame(dict.fromkeys(STEP_COLUMNS, np.int64))
    which = step_of(trace, la)
    n = len(w)
    sel = np.flatnonzero(which >= 0)
    k = which[sel]
    s, e = device_column(trace, "start_ns")[sel], device_column(trace, "end_ns")[sel]
    events = np.bincount(k, minlength=n).astype(np.int64)
    has = events > 0
    first = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(first, k, s)
    np.maximum.at(last, k, e)
    launched_busy = iv.grouped_coverage(k, s, e, 1, n)
    anchor = first.copy()
    comp = compute_mask(trace)[sel]
    if comp.any():
        first_compute = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first_compute, k[comp], s[comp])
        anchor = np.where(np.bincount(k[comp], minlength=n) > 0, first_compute, first)
    starts, ends = gpu_intervals(anchor, first, last, has)
    pos, step, ps, pe = _pieces(s, e, starts, ends)
    busy = iv.grouped_coverage(step, ps, pe, 1, n)
    return pd.DataFrame({"step": w["step"].to_numpy(np.int64), "host_start_ns": w["start_ns"].to_numpy(np.int64),
                         "host_end_ns": w["end_ns"].to_numpy(np.int64), "host_ns": w["duration_ns"].to_numpy(np.int64),
                         "gpu_start_ns": np.where(has, starts, -1), "gpu_end_ns": np.where(has, ends, -1),
                         "gpu_ns": np.where(has, ends - starts, 0), "gpu_busy_ns": busy, "events": events,
                         "launched_start_ns": np.where(has, first, -1), "launched_end_ns": np.where(has, last, -1),
                         "launched_busy_ns": launched_busy,
                         **step_figures(trace, sel[pos], step, ps, pe, n)})


def throughput(steps: pd.DataFrame) -> float:
    """Steps per second over the loop's periods on the device, or on the host when no step has device work (module doc)."""
    if steps.empty:
        return float("nan")
    work = np.flatnonzero(steps["events"].to_numpy() > 0)
    on_device = work.size > 0
    rows = work if on_device else np.arange(len(steps))
    start = steps["gpu_start_ns" if on_device else "host_start_ns"].to_numpy(np.int64)
    if rows.size >= 3 and on_device:  # (the first interval may start before its anchor: module doc)
        rows = rows[1:]
    if rows.size >= 2:
        n, total = int(rows[-1] - rows[0]), int(start[rows[-1]] - start[rows[0]])
    else:  # one step: its time, to its host window's end at least (the next step's work is launched after it), and
        last = int(rows[0])  # at least its host window (the host runs each step's code in turn)
        host_start, host_end = int(steps["host_start_ns"].iloc[last]), int(steps["host_end_ns"].iloc[last])
        end = max(int(steps["gpu_end_ns"].iloc[last]), host_end) if on_device else host_end
        n, total = 1, max(end - int(start[last]), host_end - host_start)
    return float(n / (total / 1e9)) if total > 0 else float("nan")
