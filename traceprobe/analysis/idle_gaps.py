"""Idle gaps per device: how a device's idle time is broken up, and its longest stretch without work.

Definition (quoted by the README):

- an *idle gap* of a device is a maximal interval of the trace window (first start to
  last end of the device work counted, all devices: :mod:`.busy`) in which the device
  runs no device event (kernel, memcpy, memset) on any stream: between two of its busy
  intervals, or before its first or after its last inside the window. The gaps of a
  device add up to its ``idle_ns`` (:func:`.concurrency.device_concurrency`).
- its *longest idle gap* is the longest of them (the earliest, on a tie), with its start.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import intervals as iv
from ..reading import Trace
from .memo import device_column

COLUMNS = ("device", "gaps", "longest_gap_ns", "longest_gap_start_ns")


def idle_gaps(trace: Trace) -> pd.DataFrame:
    """Idle gaps of each device in the trace window (module doc).

    Returns:
        DataFrame with one row per device that has device events, sorted by device:
        ``device`` (int64), ``gaps`` (int64, number of idle gaps), ``longest_gap_ns``
        (int64 ns, length of the longest; 0 without a gap), ``longest_gap_start_ns``
        (int64 ns on the trace's clock, its start; -1 without a gap).
    """
    if trace.device_events.empty:
        return pd.DataFrame({c: pd.Series([], dtype=np.int64) for c in COLUMNS})
    lo, hi = trace.window_ns
    dev = device_column(trace, "device")
    devices = np.unique(dev)
    k, s, e = iv.grouped_union(dev, device_column(trace, "start_ns"), device_column(trace, "end_ns"))
    # busy intervals sorted by device then start: the gaps between neighbours of one device,
    # before each device's first and after its last, and the whole window for a device never busy
    first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if k.size else np.zeros(0, np.int64)
    last = np.r_[first[1:] - 1, k.size - 1] if k.size else first
    inner = np.flatnonzero(k[1:] == k[:-1])
    idle = np.setdiff1d(devices, k)
    gk = np.concatenate([k[inner], k[first], k[last], idle])
    gs = np.concatenate([e[inner], np.full(first.size, lo), e[last], np.full(idle.size, lo)])
    ge = np.concatenate([s[inner + 1], s[first], np.full(last.size, hi), np.full(idle.size, hi)])
    keep = ge > gs
    gk, gs, length = gk[keep], gs[keep], (ge - gs)[keep]
    # per device: the longest gap, the earliest on a tie (sorted by device, longest first, then start)
    order = np.lexsort((gs, -length, gk))
    gk, gs, length = gk[order], gs[order], length[order]
    top = np.flatnonzero(np.r_[True, gk[1:] != gk[:-1]]) if gk.size else np.zeros(0, np.int64)
    at = np.searchsorted(devices, gk[top])
    count = np.bincount(np.searchsorted(devices, gk), minlength=devices.size).astype(np.int64)
    longest = np.zeros(devices.size, np.int64)
    start = np.full(devices.size, -1, np.int64)
    longest[at], start[at] = length[top], gs[top]
    return pd.DataFrame({"device": devices.astype(np.int64), "gaps": count, "longest_gap_ns": longest, "longest_gap_start_ns": start})
