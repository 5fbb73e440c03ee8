"""Concurrency figures: across devices, across the streams of one device, and idle time.

Definitions (quoted by docs/measures.md):

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

from ... import intervals as iv
from ...reading import Trace
from ..memo import device_column
from .busy import all_device_intervals, any_device_busy, fraction, is_kind

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
    dev = device_column(trace, "device")
    devices = iv.distinct(dev)
    n = devices.size
    if n == 0:
        return pd.DataFrame([], columns=STREAM_COLUMNS)
    # every (device, stream) at once: each stream's busy set (grouped_union), then per device the time one or two of
    # its streams are busy (grouped_coverage); no loop over devices or streams (65,536 pairs in seconds)
    d_idx = np.searchsorted(devices, dev)
    streams, s_idx = np.unique(device_column(trace, "stream"), return_inverse=True)
    pair = d_idx * np.int64(streams.size) + s_idx.astype(np.int64)
    start, end = device_column(trace, "start_ns"), device_column(trace, "end_ns")
    kmask = is_kind(trace, "kernel")

    def per_stream(m: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        k, s, e = iv.grouped_union(pair if m is None else pair[m], start if m is None else start[m], end if m is None else end[m])
        return k, k // np.int64(streams.size), s, e  # (pair, device index, start, end), sorted by pair then start

    pk, pd_, ps, pe = per_stream(None)
    kk, kd, ks, ke = per_stream(kmask)
    busy, multi = iv.grouped_coverage(pd_, ps, pe, 1, n), iv.grouped_coverage(pd_, ps, pe, 2, n)
    kbusy, kmulti = iv.grouped_coverage(kd, ks, ke, 1, n), iv.grouped_coverage(kd, ks, ke, 2, n)
    pairs, first = np.unique(pk, return_index=True)
    count = np.bincount(pairs // np.int64(streams.size), minlength=n)
    # the busiest stream of each device (ties: the lowest stream id), left out of the side streams
    length = np.add.reduceat(pe - ps, first) if first.size else np.zeros(0, np.int64)
    pdev = pairs // np.int64(streams.size)
    order = np.lexsort((pairs, -length, pdev))
    top = pairs[order][np.r_[True, pdev[order][1:] != pdev[order][:-1]]] if order.size else pairs
    side = ~np.isin(pk, top) & (count[pd_] > 1)
    side_busy = iv.grouped_coverage(pd_[side], ps[side], pe[side], 1, n)
    def frac(num: np.ndarray, den: np.ndarray) -> np.ndarray:  # (fraction, per device)
        return np.divide(num, den, out=np.full(num.size, np.nan), where=den > 0)

    return pd.DataFrame({
        "device": devices.astype(np.int64), "streams": count.astype(np.int64), "busy_ns": busy, "multi_stream_ns": multi,
        "concurrency": frac(multi, busy), "kernel_busy_ns": kbusy, "multi_stream_kernel_ns": kmulti,
        "kernel_concurrency": frac(kmulti, kbusy), "side_busy_ns": side_busy, "side_concurrency": frac(multi, side_busy),
    }, columns=STREAM_COLUMNS)
