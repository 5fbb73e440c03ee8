"""Idle gaps per device: how a device's idle time is broken up, and its longest stretch without work.

Definition (quoted by docs/measures.md):

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

from ... import intervals as iv
from ...reading import Trace
from .busy import all_device_intervals

COLUMNS = ("device", "gaps", "longest_gap_ns", "longest_gap_start_ns")


def idle_gaps(trace: Trace) -> pd.DataFrame:
    """Idle gaps of each device in the trace window (module doc).

    Returns:
        DataFrame with one row per device that has device events, sorted by device:
        ``device`` (int64), ``gaps`` (int64, number of idle gaps), ``longest_gap_ns``
        (int64 ns, length of the longest; 0 without a gap), ``longest_gap_start_ns``
        (int64 ns on the trace's clock, its start; -1 without a gap).
    """
    lo, hi = trace.window_ns
    rows = []
    for d, busy in sorted(all_device_intervals(trace).items()):  # the devices' busy sets, computed once per trace
        gs, ge = iv.subtract((np.array([lo], np.int64), np.array([hi], np.int64)), busy)
        length = ge - gs
        top = int(np.argmax(length)) if length.size else -1  # the first of the longest: the earliest
        rows.append((d, length.size, int(length[top]) if top >= 0 else 0, int(gs[top]) if top >= 0 else -1))
    return pd.DataFrame({c: np.array([r[i] for r in rows], dtype=np.int64) for i, c in enumerate(COLUMNS)})
