"""Bounds on what one trace may hold: its (device, stream) pairs and its host threads, past which it is refused.

Each per-stream and per-thread question is answered for every stream or thread in one sort where it can be
(:mod:`traceprobe.keyed`); what is still asked once per thread (a gap's host part, classified by the thread that
launched its work, :mod:`traceprobe.analysis.host.idle_causes`) costs about 0.3 ms a thread. The bounds keep a
hostile trace (a 1.9 MB file of 10^5 threads of one op each) to one line instead of minutes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MAX_STREAMS = 65536
"""Most distinct (device, stream) pairs accepted in one trace."""
MAX_HOST_THREADS = 16384
"""Most distinct host threads (``pid``, ``tid``) accepted in one trace: a real trace holds tens (the training loop,
autograd's threads, data loaders); 16,384 threads that each launch device work are analysed in about 6 s of
CPU (measured on a generated trace, ``tests/test_host_threads.py``)."""


def too_many(device_events: pd.DataFrame, host_events: pd.DataFrame) -> str | None:
    """Why a trace holds too many streams or host threads to analyse (one line), or None where it fits both bounds
    (:data:`MAX_STREAMS`, :data:`MAX_HOST_THREADS`). ``device_events`` needs ``device`` and ``stream``,
    ``host_events`` ``pid`` and ``tid`` (the columns of :class:`~traceprobe.reading.trace.Trace`)."""
    n_streams = _pairs(device_events["device"].to_numpy(np.int64), device_events["stream"].to_numpy(np.int64)) if len(device_events) else 0
    if n_streams > MAX_STREAMS:
        return f"absurd trace: {n_streams:,} distinct (device, stream) pairs (limit {MAX_STREAMS:,})"
    if host_events.empty:
        return None
    pid, tid = host_events["pid"], host_events["tid"]
    if isinstance(pid.dtype, pd.CategoricalDtype) and isinstance(tid.dtype, pd.CategoricalDtype):
        pc, tc = pid.cat.codes.to_numpy(np.int64), tid.cat.codes.to_numpy(np.int64)
        both = (pc >= 0) & (tc >= 0)  # (a missing pid or tid is no thread, as groupby drops it)
        n_threads = _pairs(pc[both], tc[both])
    else:
        n_threads = host_events.groupby(["pid", "tid"], observed=True).ngroups
    if n_threads > MAX_HOST_THREADS:
        return f"absurd trace: {n_threads:,} distinct host threads (pid, tid) (limit {MAX_HOST_THREADS:,})"
    return None


def _pairs(a: np.ndarray, b: np.ndarray) -> int:
    """How many distinct ``(a[i], b[i])`` pairs two int64 arrays of one length hold (one sort, no DataFrame)."""
    if a.size == 0:
        return 0
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    return 1 + int(np.count_nonzero((a[1:] != a[:-1]) | (b[1:] != b[:-1])))
