"""GPU time breakdown: where each device's time went, and why it was idle.

Definitions (quoted by the README). Over a window W of a device d (the trace
window, or a step's window), with

- C = union of d's compute kernels (every kernel that is not a collective, as in
  :func:`.busy.compute_mask`),
- M = union of d's communication kernels (NCCL/RCCL, :func:`.busy.comm_mask`),
- P = union of d's memcpys,
- B = union of all of d's device work (kernels, memcpys, memsets),

all clipped to W:

- ``compute_ns`` = |C|
- ``exposed_comm_ns`` = |M \\ C|: communication with no compute beside it
- ``exposed_copy_ns`` = |P \\ (C ∪ M)|: copies with neither compute nor
  communication beside them
- ``other_ns`` = |B \\ (C ∪ M ∪ P)|: memsets and the like, alone
- ``idle_ns`` = |W| - |B|

so that compute + exposed comm + exposed copy + other + idle = ``window_ns``
exactly (int64 ns). This is TraceLens's ``GPUEventAnalyser`` breakdown
(computation, exposed communication, exposed memcpy, idle), with memsets kept
apart instead of counted as compute.

The idle time is split by what the host was doing (HolisticTraceAnalysis's
idle-time breakdown is the anchor):

- ``idle_sync_ns``: d idle while a host thread was blocked in a synchronize call
  (a ``cuda_runtime``/``cuda_driver`` event whose name contains
  ``Synchronize``: cudaDeviceSynchronize, cudaStreamSynchronize,
  cudaEventSynchronize, cuCtxSynchronize...).
- ``idle_launch_ns``: the rest of the idle gaps in which the device had nothing
  queued: the work that ended the gap was launched (its ``cuda_runtime``/
  ``cuda_driver`` call, found by correlation id, started) after the gap began.
  The host was too slow to feed the device (HTA's "host wait").
- ``idle_other_ns``: everything else: gaps whose next work was already queued
  when the gap began (it waited on an event of another stream or device), gaps
  whose next work has no launch in the trace, and the gap after the device's
  last work.

Where HTA classifies each gap between two kernels of a stream, we classify the
gaps of the whole device (a gap of one stream filled by another is not idle).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .. import intervals as iv
from ..trace import Trace
from .busy import comm_mask, compute_mask, copy_mask, per_value, runtime_calls
from .memo import device_column, host_column, per_trace

Intervals = iv.Intervals

SYNC_PATTERN = "Synchronize"
"""Host runtime/driver calls whose name contains this block the host until device work ends."""

PARTS = ("compute_ns", "exposed_comm_ns", "exposed_copy_ns", "other_ns", "idle_ns")
"""The breakdown's parts; they sum to ``window_ns``."""
IDLE_PARTS = ("idle_launch_ns", "idle_sync_ns", "idle_other_ns")
"""The idle time's parts; they sum to ``idle_ns``."""
COLUMNS = ["device", "rank", "window_ns", *PARTS, *IDLE_PARTS]

_NO_LAUNCH = np.iinfo(np.int64).max


def first_match(keys: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Index of the first element of ``keys`` equal to each ``query`` value (int64), -1 where none or negative."""
    keys = np.asarray(keys, dtype=np.int64)
    query = np.asarray(query, dtype=np.int64)
    out = np.full(query.size, -1, dtype=np.int64)
    ids, first = np.unique(keys, return_index=True)
    if ids.size == 0:
        return out
    pos = np.minimum(np.searchsorted(ids, query), ids.size - 1)
    hit = (query >= 0) & (ids[pos] == query)
    out[hit] = first[pos[hit]]
    return out


@per_trace
def launch_rows(trace: Trace) -> np.ndarray:
    """Row in ``trace.host_events`` of the host call that launched each device event.

    The call is the first ``cuda_runtime``/``cuda_driver`` event whose CUPTI
    ``correlation`` id equals the device event's (Kineto's launch -> kernel
    link). Returns an int64 array aligned with ``trace.device_events`` rows,
    -1 where the trace holds no such call.
    """
    ev, host = trace.device_events, trace.host_events
    out = np.full(len(ev), -1, dtype=np.int64)
    if ev.empty or host.empty:
        return out
    rt = np.flatnonzero(runtime_calls(trace) & (host_column(trace, "correlation") >= 0))
    pos = first_match(host_column(trace, "correlation")[rt], device_column(trace, "correlation"))  # earliest call
    out[pos >= 0] = rt[pos[pos >= 0]]
    return out


@per_trace
def launch_start_ns(trace: Trace) -> np.ndarray:
    """Start (int64 ns) of the launching call of each device event (:func:`launch_rows`), -1 where none."""
    rows = launch_rows(trace)
    start = host_column(trace, "start_ns") if len(trace.host_events) else np.zeros(0, np.int64)
    return np.where(rows >= 0, start[np.maximum(rows, 0)] if start.size else -1, -1)


@per_trace
def sync_intervals(trace: Trace) -> Intervals:
    """Union, over host threads, of the synchronize calls (see :data:`SYNC_PATTERN`)."""
    host = trace.host_events
    if host.empty:
        return iv.empty()
    m = runtime_calls(trace) & per_value(host["name"], lambda v: SYNC_PATTERN in str(v), False, bool)
    return iv.union(host_column(trace, "start_ns")[m], host_column(trace, "end_ns")[m])


@dataclass(frozen=True)
class DeviceTime:
    """The interval sets behind one device's breakdown, clipped to a window.

    Attributes:
        device: device index.
        window: (lo, hi) in ns.
        compute: C. compute_or_comm: C ∪ M. busy_known: C ∪ M ∪ P. busy: B.
        idle_sync, idle_launch: the idle parts of the module docstring; the rest
            of the idle time is idle_other. All normalised int64 ns interval sets.
        idle_queued: the part of idle_other in gaps whose next work was already
            launched when the gap began, by the stream of that work: the stream
            waited on an event of another stream or device.
    """

    device: int
    window: tuple[int, int]
    compute: Intervals
    compute_or_comm: Intervals
    busy_known: Intervals
    busy: Intervals
    idle_sync: Intervals
    idle_launch: Intervals
    idle_queued: dict[int, Intervals]

    def idle(self) -> Intervals:
        """W \\ B."""
        lo, hi = self.window
        return iv.subtract((np.array([lo]), np.array([hi])), self.busy)


def _gaps(busy: Intervals, window: tuple[int, int], ev_start: np.ndarray, ev_stream: np.ndarray,
          launch: np.ndarray) -> tuple[Intervals, dict[int, Intervals]]:
    """Idle gaps of one device by what ended them.

    Returns:
        ``(starved, queued)``: the gaps whose next work was launched after the gap
        began (a normalised interval set), and, per stream, the gaps whose next
        work (on that stream) was already launched when the gap began.
    """
    lo, _ = window
    bs, be = busy
    if bs.size == 0:
        return iv.empty(), {}
    gap_s = np.concatenate([[lo], be])[:-1]  # the gap before busy interval k
    gap_e = bs
    order = np.argsort(ev_start, kind="stable")
    st, la, sm = ev_start[order], np.where(launch[order] >= 0, launch[order], _NO_LAUNCH), ev_stream[order]
    first_start, first_idx = np.unique(st, return_index=True)
    first_launch = np.minimum.reduceat(la, first_idx)
    pos = np.searchsorted(first_start, bs)
    found = pos < first_start.size
    found[found] = first_start[pos[found]] == bs[found]
    nxt = np.full(bs.size, _NO_LAUNCH, dtype=np.int64)
    nxt[found] = first_launch[pos[found]]
    stream = np.full(bs.size, -1, dtype=np.int64)
    stream[found] = sm[first_idx[pos[found]]]
    gap = (gap_e > gap_s) & (nxt != _NO_LAUNCH)
    starved = gap & (nxt > gap_s)
    queued = gap & (nxt <= gap_s)
    per_stream = {int(x): iv.union(gap_s[queued & (stream == x)], gap_e[queued & (stream == x)]) for x in np.unique(stream[queued])}
    return iv.union(gap_s[starved], gap_e[starved]), per_stream


def device_times(trace: Trace, window: tuple[int, int] | None = None) -> list[DeviceTime]:
    """The interval sets of every device with device events, clipped to ``window``.

    Args:
        window: (lo, hi) in ns; default the trace window (``trace.window_ns``).

    Returns:
        one :class:`DeviceTime` per device, sorted by device; computed once per
        trace and window (the default and the same window given are one).
    """
    lo, hi = trace.window_ns if window is None else window
    return _device_times(trace, (int(lo), int(hi)))


@per_trace
def _device_times(trace: Trace, window: tuple[int, int]) -> list[DeviceTime]:
    lo, hi = window
    ev = trace.device_events
    if ev.empty:
        return []
    dev = device_column(trace, "device")
    start = np.clip(device_column(trace, "start_ns"), lo, hi)
    end = np.clip(device_column(trace, "end_ns"), lo, hi)
    comp, comm = compute_mask(trace), comm_mask(trace)
    copy = copy_mask(trace)
    launch = launch_start_ns(trace)
    sync = iv.intersect(sync_intervals(trace), (np.array([lo], np.int64), np.array([hi], np.int64)))
    raw_start = device_column(trace, "start_ns")
    has_length = device_column(trace, "end_ns") > raw_start  # zero-length events end no gap
    stream = device_column(trace, "stream")
    out = []
    for d in np.unique(dev).tolist():
        on = dev == d

        def u(mask: np.ndarray, on: np.ndarray = on) -> Intervals:
            m = on & mask
            return iv.union(start[m], end[m])

        busy = u(np.ones_like(on))
        idle = iv.subtract((np.array([lo]), np.array([hi])), busy)
        idle_sync = iv.intersect(idle, sync)
        work = on & has_length
        starved, queued = _gaps(busy, (lo, hi), raw_start[work], stream[work], launch[work])
        out.append(
            DeviceTime(
                device=int(d),
                window=(int(lo), int(hi)),
                compute=u(comp),
                compute_or_comm=u(comp | comm),
                busy_known=u(comp | comm | copy),
                busy=busy,
                idle_sync=idle_sync,
                idle_launch=iv.subtract(starved, idle_sync),
                idle_queued={k: iv.subtract(v, idle_sync) for k, v in queued.items()},
            )
        )
    return out


def _rows(times: list[DeviceTime], lo: np.ndarray, hi: np.ndarray) -> dict[str, np.ndarray]:
    """Breakdown columns for every device x window (device-major)."""
    n = lo.size
    cols: dict[str, list[np.ndarray]] = {c: [] for c in ["device", "window_ns", *PARTS, *IDLE_PARTS]}
    for t in times:
        w = np.maximum(hi - lo, 0)
        c, cm, cmp_, b = (iv.measure(x, lo, hi) for x in (t.compute, t.compute_or_comm, t.busy_known, t.busy))
        sync, launch = iv.measure(t.idle_sync, lo, hi), iv.measure(t.idle_launch, lo, hi)
        parts = {
            "device": np.full(n, t.device, dtype=np.int64),
            "window_ns": w,
            "compute_ns": c,
            "exposed_comm_ns": cm - c,
            "exposed_copy_ns": cmp_ - cm,
            "other_ns": b - cmp_,
            "idle_ns": w - b,
            "idle_launch_ns": launch,
            "idle_sync_ns": sync,
            "idle_other_ns": w - b - launch - sync,
        }
        for k, v in parts.items():
            cols[k].append(v.astype(np.int64))
    return {k: np.concatenate(v) if v else np.zeros(0, np.int64) for k, v in cols.items()}


def gpu_breakdown(trace: Trace, window: tuple[int, int] | None = None) -> pd.DataFrame:
    """The GPU time breakdown of every device over ``window`` (module docstring).

    Args:
        window: (lo, hi) in ns; default the trace window (first device event
            start to last device event end, all devices).

    Returns:
        DataFrame, one row per device with device events, sorted by device:
        ``device`` (int64), ``rank`` (Int64, ``distributedInfo.rank``, NA if
        absent), ``window_ns``, ``compute_ns``, ``exposed_comm_ns``,
        ``exposed_copy_ns``, ``other_ns``, ``idle_ns``, ``idle_launch_ns``,
        ``idle_sync_ns``, ``idle_other_ns`` (int64 ns). The five parts sum to
        ``window_ns``, the three idle parts to ``idle_ns``.
    """
    lo, hi = trace.window_ns if window is None else window
    times = device_times(trace, (lo, hi))
    cols: dict[str, Any] = _rows(times, np.array([lo], np.int64), np.array([hi], np.int64))
    cols["rank"] = pd.array([trace.rank] * len(cols["device"]), dtype="Int64")
    return pd.DataFrame({c: cols[c] for c in COLUMNS})


def step_breakdown(trace: Trace, windows: pd.DataFrame) -> pd.DataFrame:
    """The breakdown of every device in each step window.

    Args:
        windows: DataFrame with ``step``, ``start_ns``, ``end_ns`` (int64), for
            example :func:`.steps.step_windows`.

    Returns:
        DataFrame with ``step`` (int64) then the columns of :func:`gpu_breakdown`,
        one row per step and device, sorted by step then device.
    """
    if windows.empty or trace.device_events.empty:
        return pd.DataFrame({c: pd.Series([], dtype="Int64" if c == "rank" else np.int64) for c in ["step", *COLUMNS]})
    lo = windows["start_ns"].to_numpy(np.int64)
    hi = windows["end_ns"].to_numpy(np.int64)
    tlo, thi = trace.window_ns
    times = device_times(trace, (min(int(lo.min()), tlo), max(int(hi.max()), thi)))
    cols: dict[str, Any] = _rows(times, lo, hi)
    cols["step"] = np.tile(windows["step"].to_numpy(np.int64), len(times))
    order = np.lexsort((cols["device"], cols["step"]))  # by step, then device (stable)
    cols = {c: cols[c][order] for c in cols}
    cols["rank"] = pd.array([trace.rank] * len(order), dtype="Int64")
    return pd.DataFrame({c: cols[c] for c in ["step", *COLUMNS]})
