"""The link from each device event to the host call that launched it (Kineto's correlation id)."""

from __future__ import annotations

import numpy as np

from ...reading import Trace
from ..device.busy import runtime_calls
from ..memo import device_column, host_column, per_trace


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

