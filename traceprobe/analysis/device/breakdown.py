"""GPU time breakdown: where each device's time went, and why it was idle.

Definitions (quoted by docs/measures.md). Over a window W of a device d (the trace
window, or a step's window), with

- C = union of d's compute kernels (every kernel that is not a collective, as in
  :func:`.busy.compute_mask`),
- M = union of d's communication kernels (launched by a communication op or named by a communication library,
  :func:`.busy.comm_mask`),
- P = union of d's memcpys,
- B = union of all of d's device work (kernels, memcpys, memsets),
- A = union of d's work *set aside* from the figures (:mod:`.profiled`:
  launched outside the profiled steps; empty with ``--all-device-work``): it is
  not this window's work, but it occupies the device,

all clipped to W:

- ``compute_ns`` = |C|
- ``exposed_comm_ns`` = |M \\ C|: communication with no compute beside it
- ``set_aside_ns`` = |A \\ (C ∪ M)|: set-aside work with none of the window's
  compute or communication beside it
- ``exposed_copy_ns`` = |P \\ (C ∪ M ∪ A)|: copies with nothing beside them (a copy
  under set-aside compute was hidden, although that compute is not the window's)
- ``other_ns`` = |B \\ (C ∪ M ∪ A ∪ P)|: memsets and the like, alone
- ``idle_ns`` = |W| - |B ∪ A|

so that compute + exposed comm + exposed copy + other + set aside + idle =
``window_ns`` exactly (int64 ns). This is TraceLens's ``GPUEventAnalyser``
breakdown (computation, exposed communication, exposed memcpy, idle), with
memsets kept apart instead of counted as compute, and set-aside work kept apart
instead of counted as idle.

The idle time is split by its cause (:mod:`.idle_causes`, which defines each):

- ``idle_sync_ns``: the cause ``sync``: the launching host thread was blocked in
  a synchronizing call.
- ``idle_launch_ns``: the other host causes (graph capture, pinned or device allocation, host
  waits for ranks, data loading, optimizer, launch-bound, CPU ops, host outside ops): the
  device had nothing queued and waited for the host (HTA's "host wait").
- ``idle_other_ns``: ``queued`` (the next work was launched and waited on a
  dependency) and ``unattributed`` (no launch in the trace, or after the
  device's last work).

Where HTA classifies each gap between two kernels of a stream, we classify the
gaps of the whole device (a gap of one stream filled by another is not idle).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..host.host_classes import HOST_CAUSES
from ..host.idle_causes import DeviceIdle, idle_causes
from ..memo import device_column, empty_frame, per_trace
from .busy import comm_mask, compute_mask, copy_mask, set_aside_intervals

Intervals = iv.Intervals

PARTS = ("compute_ns", "exposed_comm_ns", "exposed_copy_ns", "other_ns", "set_aside_ns", "idle_ns")
"""The breakdown's parts; they sum to ``window_ns``."""
IDLE_PARTS = ("idle_launch_ns", "idle_sync_ns", "idle_other_ns")
"""The idle time's parts; they sum to ``idle_ns``."""
COLUMNS = ["device", "rank", "window_ns", *PARTS, *IDLE_PARTS]


@dataclass(frozen=True)
class DeviceTime:
    """The interval sets behind one device's breakdown, clipped to a window.

    Attributes:
        device: device index.
        window: (lo, hi) in ns.
        compute: C. compute_or_comm: C ∪ M. busy_known: C ∪ M ∪ P. busy: B.
        aside: A, the set-aside work. hidden: C ∪ M ∪ A, what hides a copy.
        occupied: B ∪ A, the device busy with any work, set aside or not.
        idle_sync, idle_launch: the idle parts of the module docstring; the rest
            of the idle time is idle_other. All normalised int64 ns interval sets.
        causes: the idle time by cause (:class:`.idle_causes.DeviceIdle`).
    """

    device: int
    window: tuple[int, int]
    compute: Intervals
    compute_or_comm: Intervals
    busy_known: Intervals
    busy: Intervals
    aside: Intervals
    hidden: Intervals
    occupied: Intervals
    idle_sync: Intervals
    idle_launch: Intervals
    causes: DeviceIdle

    def idle(self) -> Intervals:
        """W \\ (B ∪ A)."""
        lo, hi = self.window
        return iv.subtract((np.array([lo]), np.array([hi])), self.occupied)


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


def _merge(sets: list[Intervals]) -> Intervals:
    return iv.coverage_at_least(sets, 1)


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
    whole = (np.array([lo], np.int64), np.array([hi], np.int64))
    aside_all = set_aside_intervals(trace)
    causes = {c.device: c for c in idle_causes(trace, (lo, hi))}
    # every device at once: each set of the docstring is one grouped union (keys: the devices' positions), each
    # device's DeviceTime holds its slices (no union per device)
    devices = iv.distinct(dev)
    size = devices.size
    d_idx = np.searchsorted(devices, dev)

    def split(k: np.ndarray, s_: np.ndarray, e_: np.ndarray) -> list[Intervals]:
        b = np.searchsorted(k, np.arange(size + 1)).tolist()
        return [(s_[b[i]:b[i + 1]], e_[b[i]:b[i + 1]]) for i in range(size)]

    def u(mask: np.ndarray | None) -> list[Intervals]:
        return split(*iv.grouped_union(d_idx if mask is None else d_idx[mask], start if mask is None else start[mask],
                                       end if mask is None else end[mask]))

    def merged(*per_device: list[Intervals]) -> list[Intervals]:
        k, s_, e_ = _grouped([x for sets in per_device for x in sets])
        return split(*iv.grouped_union(k % size, s_, e_))

    compute, compute_or_comm, busy_known, busy = u(comp), u(comp | comm), u(comp | comm | copy), u(None)
    aside = [iv.intersect(aside_all.get(int(d), iv.empty()), whole) for d in devices.tolist()]
    c_of = [causes[int(d)] for d in devices.tolist()]
    hidden, occupied = merged(compute_or_comm, aside), merged(busy, aside)
    idle_launch = merged(*[[c.spans[k] for c in c_of] for k in HOST_CAUSES if k != "sync"])
    return [
        DeviceTime(device=int(d), window=(int(lo), int(hi)), compute=compute[i], compute_or_comm=compute_or_comm[i],
                   busy_known=busy_known[i], busy=busy[i], aside=aside[i], hidden=hidden[i], occupied=occupied[i],
                   idle_sync=c_of[i].spans["sync"], idle_launch=idle_launch[i], causes=c_of[i])
        for i, d in enumerate(devices.tolist())
    ]


def _grouped(sets: list[Intervals]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One normalised set per device as one grouped set (keys: the devices' positions), as
    :func:`traceprobe.intervals.grouped_union` returns them."""
    n = [x[0].size for x in sets]
    keys = np.repeat(np.arange(len(sets), dtype=np.int64), n)
    if not sets:
        return keys, np.zeros(0, np.int64), np.zeros(0, np.int64)
    return keys, np.concatenate([x[0] for x in sets]).astype(np.int64), np.concatenate([x[1] for x in sets]).astype(np.int64)


def _rows(times: list[DeviceTime], lo: np.ndarray, hi: np.ndarray) -> dict[str, np.ndarray]:
    """Breakdown columns for every device x window (device-major), every device at once
    (:func:`traceprobe.intervals.grouped_measure`: no loop over devices, 4,096 of them in milliseconds)."""
    n, size = lo.size, len(times)
    w = np.tile(np.maximum(hi - lo, 0), size)

    def m(sets: list[Intervals]) -> np.ndarray:
        return iv.grouped_measure(*_grouped(sets), lo, hi, size).ravel()

    c, cm, cma, o = (m([getattr(t, a) for t in times]) for a in ("compute", "compute_or_comm", "hidden", "occupied"))
    hk, hs, he = _grouped([t.hidden for t in times])
    bk, bs, be = _grouped([t.busy_known for t in times])
    cmap = iv.grouped_measure(*iv.grouped_union(np.concatenate([hk, bk]), np.concatenate([hs, bs]), np.concatenate([he, be])),
                              lo, hi, size).ravel()
    sync, launch = m([t.idle_sync for t in times]), m([t.idle_launch for t in times])
    return {
        "device": np.repeat(np.array([t.device for t in times], dtype=np.int64), n),
        "window_ns": w.astype(np.int64),
        "compute_ns": c,
        "exposed_comm_ns": cm - c,
        "exposed_copy_ns": cmap - cma,
        "other_ns": o - cmap,
        "set_aside_ns": cma - cm,
        "idle_ns": w - o,
        "idle_launch_ns": launch,
        "idle_sync_ns": sync,
        "idle_other_ns": w - o - launch - sync,
    }


def gpu_breakdown(trace: Trace, window: tuple[int, int] | None = None) -> pd.DataFrame:
    """The GPU time breakdown of every device over ``window`` (module docstring).

    Args:
        window: (lo, hi) in ns; default the trace window (first device event
            start to last device event end, all devices).

    Returns:
        DataFrame, one row per device with device events, sorted by device:
        ``device`` (int64), ``rank`` (Int64, ``distributedInfo.rank``, NA if
        absent), ``window_ns``, ``compute_ns``, ``exposed_comm_ns``,
        ``exposed_copy_ns``, ``other_ns``, ``set_aside_ns``, ``idle_ns``, ``idle_launch_ns``,
        ``idle_sync_ns``, ``idle_other_ns`` (int64 ns). The six parts sum to
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
        return empty_frame({c: "Int64" if c == "rank" else np.int64 for c in ["step", *COLUMNS]})
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
