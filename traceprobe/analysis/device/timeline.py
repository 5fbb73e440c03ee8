"""Time series derived from a trace for the timeline outputs (Perfetto tracks, plots).

No new definitions: each series is an interval set or count of the analysis
(:mod:`.busy`, :mod:`.overlap`, :mod:`.concurrency`), kept as intervals instead of
summed, so exporters can draw them: where copies (or NCCL kernels) ran under
compute, how many streams or devices were busy at each change, and which host
launch started which device event (CUPTI correlation ids).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..advice.findings import exposed_spans
from ..host.host_classes import CAUSES, LABELS
from ..host.launch_links import launch_rows
from ..memo import device_column, empty_frame, host_column
from .breakdown import device_times
from .busy import compute_intervals, copy_mask, device_intervals


def under_compute(trace: Trace, mask: np.ndarray) -> dict[int, iv.Intervals]:
    """Per device with events selected by ``mask``: where they ran while a compute kernel did.

    With ``mask`` = memcpys this is the interval set whose length is
    ``copy_overlap``'s ``all`` row ``overlapped_ns``; with communication kernels,
    ``comm_overlap``'s ``overlapped_ns``.
    """
    if not mask.any():
        return {}
    sel, comp = device_intervals(trace, mask), compute_intervals(trace)
    return {int(d): iv.intersect(sel[int(d)], comp[int(d)]) for d in iv.distinct(device_column(trace, "device")[mask])}


def copy_compute_overlap(trace: Trace) -> dict[int, iv.Intervals]:
    """Per device with memcpys: where a memcpy and a compute kernel ran at once."""
    return under_compute(trace, copy_mask(trace))


BREAKDOWN_SLICES = ("exposed comm", "bubble", "exposed copy", "other", "set aside", *(f"idle: {LABELS[c]}" for c in CAUSES))
"""The parts of the GPU time breakdown drawn as slices (compute is left undrawn: the kernels show it); the idle
time is drawn by cause (:mod:`.idle_causes`)."""


def breakdown_intervals(trace: Trace) -> dict[int, dict[str, iv.Intervals]]:
    """Per device, where each part of its GPU time breakdown (:mod:`.breakdown`) lies in the trace window.

    Keys are :data:`BREAKDOWN_SLICES`; the sets are disjoint, and their lengths are
    the ``exposed_comm_ns`` (split into exposed collectives and the pipeline bubble,
    :func:`.findings.exposed_spans`), ``exposed_copy_ns``, ``other_ns`` and
    ``set_aside_ns`` of :func:`.breakdown.gpu_breakdown`, then the idle time of each
    cause of :func:`.idle_causes.idle_causes` (summing to ``idle_ns``).
    """
    out = {}
    for t in device_times(trace, None):
        bubble, exposed = exposed_spans(trace, t)
        out[t.device] = {
            "exposed comm": exposed,
            "bubble": bubble,
            "exposed copy": iv.subtract(iv.subtract(t.busy_known, t.compute_or_comm), t.aside),
            "other": iv.subtract(t.busy, iv.coverage_at_least([t.busy_known, t.aside], 1)),
            "set aside": iv.subtract(t.aside, t.compute_or_comm),
            **{f"idle: {LABELS[c]}": t.causes.spans[c] for c in CAUSES},
        }
    return out


def step_counts(keys: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> pd.DataFrame:
    """How many intervals of each key hold at once, as a step function.

    Returns:
        DataFrame ``key``, ``ts``, ``value`` (int64): per key, the count from ``ts``
        until the key's next row; the last row of a key has value 0.
    """
    k = np.concatenate([keys, keys]).astype(np.int64)
    t = np.concatenate([starts, ends]).astype(np.int64)
    d = np.concatenate([np.ones(len(starts), np.int64), -np.ones(len(ends), np.int64)])
    if not len(t):
        return empty_frame(dict.fromkeys(("key", "ts", "value"), np.int64))
    o = np.lexsort((d, t, k))
    k, t, d = k[o], t[o], d[o]
    value = pd.Series(d).groupby(k, sort=False).cumsum().to_numpy()
    last = np.r_[(k[1:] != k[:-1]) | (t[1:] != t[:-1]), True]
    return pd.DataFrame({"key": k[last], "ts": t[last], "value": value[last]})


def busy_streams(trace: Trace) -> pd.DataFrame:
    """Per device, the number of its streams busy at each change: ``device``, ``ts``, ``value``."""
    dcode, devs = pd.factorize(device_column(trace, "device"))
    scode, _ = pd.factorize(device_column(trace, "stream"))
    codes = dcode * (int(scode.max()) + 1 if len(scode) else 1) + scode  # one code per (device, stream)
    k, s, e = iv.grouped_union(codes, device_column(trace, "start_ns"), device_column(trace, "end_ns"))
    dev = np.asarray(devs, dtype=np.int64)[k // (int(scode.max()) + 1)] if len(k) else k
    return step_counts(dev, s, e).rename(columns={"key": "device"})


def busy_devices(trace: Trace) -> pd.DataFrame:
    """The number of devices busy at each change: ``ts``, ``value``."""
    sets = list(device_intervals(trace).values())
    s = np.concatenate([x[0] for x in sets]) if sets else np.zeros(0, np.int64)
    e = np.concatenate([x[1] for x in sets]) if sets else np.zeros(0, np.int64)
    return step_counts(np.zeros(len(s), np.int64), s, e).loc[:, ["ts", "value"]]


def launch_flows(trace: Trace) -> pd.DataFrame:
    """Launch -> device work links: one row per correlation id found on both sides.

    Returns:
        DataFrame with ``correlation`` (int64), ``host_row`` (row of the first
        ``cuda_runtime``/``cuda_driver`` event with that id in ``host_events``) and
        ``device_row`` (row of the earliest device event with that id), only where
        the device event does not start before its launch.
    """
    rows = launch_rows(trace)
    dev = np.flatnonzero(rows >= 0)
    corr = device_column(trace, "correlation")
    _, first = np.unique(corr[dev], return_index=True)  # earliest device event of each id (events sorted by start)
    dev = dev[first]
    hrow = rows[dev]
    ok = device_column(trace, "start_ns")[dev] >= host_column(trace, "start_ns")[hrow] if dev.size else np.zeros(0, bool)
    dev, hrow = dev[ok], hrow[ok]
    order = np.argsort(hrow, kind="stable")
    return pd.DataFrame({"correlation": corr[dev][order], "host_row": hrow[order], "device_row": dev[order]}).astype(np.int64)
