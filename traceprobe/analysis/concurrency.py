"""Concurrency figures: across devices, across the streams of one device, and idle time.

Definitions (quoted by the README):

- *cross-device concurrency*: time during which two or more devices are busy /
  time during which at least one device is busy. Per device, ``concurrent_ns`` is
  the part of its busy time during which another device is busy too.
- *stream concurrency* of device d: time during which two or more streams of d
  are busy / time during which d is busy (``concurrency``, the raw figure);
  ``kernel_concurrency`` is the same counting kernels only (copies and memsets
  left out). The verdict judges ``side_concurrency``: the same time over the
  *side busy time*, the time during which any stream but the busiest one is busy.
  Two streams can only be busy together while a side stream is, so this is the
  share of the side streams' work that ran beside other work, whatever the
  busiest stream did alone (as the CPU/GPU verdict judges against the shorter
  side). A prefetch stream that ran 88% of its time beside compute reads 88%,
  where the raw figure may read 2% of a long compute timeline.
- *idle time* of device d: time within the trace window when no stream of d is busy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import intervals as iv
from ..reading import Trace
from .busy import all_device_intervals, any_device_busy, fraction, stream_intervals
from .memo import device_column

STREAM_COLUMNS = ["device", "streams", "busy_ns", "multi_stream_ns", "concurrency", "kernel_busy_ns", "multi_stream_kernel_ns",
                  "kernel_concurrency", "side_busy_ns", "side_concurrency"]


@dataclass(frozen=True)
class DeviceConcurrency:
    """Cross-device concurrency of one trace.

    Attributes:
        devices: one row per device: ``device`` (int64), ``busy_ns`` (int64),
            ``utilization`` (float64, busy_ns / window), ``idle_ns`` (int64, window
            minus busy), ``concurrent_ns`` (int64, busy while another device is
            busy), ``concurrency`` (float64, concurrent_ns / busy_ns).
        any_busy_ns: time at least one device is busy, ns.
        concurrent_ns: time two or more devices are busy, ns.
        concurrency: concurrent_ns / any_busy_ns (NaN with no device work).
        device_count: number of devices with device events.
    """

    devices: pd.DataFrame
    any_busy_ns: int
    concurrent_ns: int
    concurrency: float
    device_count: int


def device_concurrency(trace: Trace) -> DeviceConcurrency:
    """Cross-device concurrency and per-device busy/idle time (module docstring)."""
    per_dev = all_device_intervals(trace)
    lo, hi = trace.window_ns
    window = max(hi - lo, 0)
    sets = list(per_dev.values())
    any_busy = any_device_busy(trace)
    two = iv.coverage_at_least(sets, 2)
    rows = []
    for d, u in per_dev.items():
        busy = iv.length(u)
        conc = iv.length(iv.intersect(u, two))
        rows.append(
            {
                "device": d,
                "busy_ns": busy,
                "utilization": fraction(busy, window),
                "idle_ns": window - busy,
                "concurrent_ns": conc,
                "concurrency": fraction(conc, busy),
            }
        )
    df = pd.DataFrame(rows, columns=["device", "busy_ns", "utilization", "idle_ns", "concurrent_ns", "concurrency"])
    any_ns, two_ns = iv.length(any_busy), iv.length(two)
    return DeviceConcurrency(df, any_ns, two_ns, fraction(two_ns, any_ns), len(per_dev))


def stream_concurrency(trace: Trace) -> pd.DataFrame:
    """Stream concurrency per device (module docstring).

    Returns:
        DataFrame with columns ``device`` (int64), ``streams`` (int64, streams
        with non-zero busy time; zero-length events alone do not count), ``busy_ns`` (int64), ``multi_stream_ns`` (int64, two or more
        streams busy), ``concurrency`` (float64), ``kernel_busy_ns``,
        ``multi_stream_kernel_ns`` (int64), ``kernel_concurrency`` (float64),
        ``side_busy_ns`` (int64, any stream but the busiest busy; ties: the lowest
        stream id is the busiest), ``side_concurrency`` (float64,
        multi_stream_ns / side_busy_ns).
    """
    ev = trace.device_events
    rows = []
    kmask = (ev["kind"] == "kernel").to_numpy()
    for d in sorted(np.unique(device_column(trace, "device")).tolist()):
        streams = stream_intervals(trace, d)
        kstreams = stream_intervals(trace, d, kmask)
        busy = iv.length(iv.coverage_at_least(streams, 1)) if streams else 0
        multi = iv.length(iv.coverage_at_least(streams, 2)) if len(streams) > 1 else 0
        kbusy = iv.length(iv.coverage_at_least(kstreams, 1)) if kstreams else 0
        kmulti = iv.length(iv.coverage_at_least(kstreams, 2)) if len(kstreams) > 1 else 0
        lengths = [iv.length(u) for u in streams]
        side = [u for i, u in enumerate(streams) if i != int(np.argmax(lengths))] if len(streams) > 1 else []
        side_busy = iv.length(iv.coverage_at_least(side, 1)) if side else 0
        rows.append(
            {
                "device": d,
                "streams": len(streams),
                "busy_ns": busy,
                "multi_stream_ns": multi,
                "concurrency": fraction(multi, busy),
                "kernel_busy_ns": kbusy,
                "multi_stream_kernel_ns": kmulti,
                "kernel_concurrency": fraction(kmulti, kbusy),
                "side_busy_ns": side_busy,
                "side_concurrency": fraction(multi, side_busy),
            }
        )
    return pd.DataFrame(rows, columns=STREAM_COLUMNS)
