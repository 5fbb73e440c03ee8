"""Event waits the trace recorded: which device work each stream wait and each event sync waited for.

Definitions (quoted by docs/measures.md). A trace recorded with Kineto's ``enable_cuda_sync_events`` holds a ``cuda_sync``
event per ``cudaStreamWaitEvent`` (``Stream Wait Event``: its ``stream`` waits) and per event sync (``Event Sync``),
naming the ``cudaEventRecord`` call waited for (``wait_on_cuda_event_record_corr_id``) and its stream
(``wait_on_stream``) where Kineto resolved them (:attr:`traceprobe.reading.Trace.sync_events`). As in HTA's critical
path (``_get_cuda_event_record_df``), correlation ids number the runtime calls in call order, so:

- the *recorded* work of an event is the last device op on the record's stream launched before the record call (the
  highest correlation below the record's);
- the op a stream wait holds is the first op on the waiting stream launched after the wait call;
- where the record is not resolved (newer torch records with ``cudaEventRecordWithFlags``, which Kineto does not
  resolve: every sample recorded here on torch 2.11), the waited-for work is the op of another stream that ended last
  before the waiting op started, if it was launched before the wait call (HTA draws no edge there).

An event sync (``cudaEventSynchronize``) whose record is resolved returns when its recorded work ends.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..device.busy import equal_to

_SHIFT = 40
"""Bits of a correlation id in a (lane, correlation) key (CUPTI's ids are 32-bit)."""


def _lane_of(pairs: np.ndarray, device: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """The lane (column of ``pairs``: device and stream) of each (device, stream), -1 where none."""
    if pairs.shape[1] == 0 or device.size == 0:
        return np.full(device.size, -1, np.int64)
    index = pd.MultiIndex.from_arrays([pairs[0], pairs[1]])
    return index.get_indexer(pd.MultiIndex.from_arrays([device, stream])).astype(np.int64)


def _events(trace: Trace, kind: str) -> dict[str, np.ndarray]:
    """The ``kind`` rows of ``trace.sync_events``: their int64 columns by name."""
    sync = trace.sync_events
    m = equal_to(sync["kind"], kind)
    return {c: sync[c].to_numpy(np.int64)[m] for c in ("device", "stream", "correlation", "wait_correlation", "wait_stream")}


def _keyed(lane: np.ndarray, corr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ops with a correlation id, sorted by (lane, correlation): their keys and their indices."""
    ok = np.flatnonzero((corr >= 0) & (corr < 1 << _SHIFT))
    key = (lane[ok] << _SHIFT) | corr[ok]
    o = np.argsort(key, kind="stable")
    return key[o], ok[o]


def _last_before(keys: np.ndarray, ops: np.ndarray, lane: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """Per query, the op on ``lane`` with the highest correlation below ``corr`` (-1 none)."""
    out = np.full(lane.size, -1, np.int64)
    ok = (lane >= 0) & (corr >= 0)
    if not ok.any() or keys.size == 0:
        return out
    q = (lane[ok] << _SHIFT) | corr[ok]
    i = np.searchsorted(keys, q, "left") - 1
    hit = (i >= 0) & ((keys[np.maximum(i, 0)] >> _SHIFT) == lane[ok])
    out[np.flatnonzero(ok)[hit]] = ops[i[hit]]
    return out


def _last_ended_elsewhere(lane: np.ndarray, start: np.ndarray, end: np.ndarray, ops: np.ndarray) -> np.ndarray:
    """Per op of ``ops``, the op of another lane that ended last at or before its start (-1 none); one pass per lane
    of ``ops`` (the streams that wait on events: few)."""
    out = np.full(ops.size, -1, np.int64)
    for one in iv.distinct(lane[ops]).tolist():
        others = np.flatnonzero(lane != one)
        others = others[np.argsort(end[others], kind="stable")]
        mine = np.flatnonzero(lane[ops] == one)
        j = np.searchsorted(end[others], start[ops[mine]], "right") - 1
        out[mine[j >= 0]] = others[j[j >= 0]]
    return out


def stream_waits(trace: Trace, pairs: np.ndarray, lane: np.ndarray, start: np.ndarray, end: np.ndarray,
                 corr: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per device op (in the given order), the op it waited for through a recorded stream wait (module docstring), -1
    for none, and whether that op is the wait's resolved record (bool; else the other stream's work that ended last
    before it: the latest the waited-for work can be, an edge to keep only where it bound the op in the trace); None
    where the trace holds no ``Stream Wait Event``. The graph infers the dependencies of the other ops: Kineto's sync
    events can miss waits (a DDP trace of torch 2.11 holds none for its first gradient all-reduces).

    Args:
        pairs: (2, L) the lanes' device and stream; ``lane``: (K,) each op's lane; ``start``, ``end``: (K,) int64 ns;
            ``corr``: (K,) each op's correlation id (-1 none).
    """
    waits = _events(trace, "Stream Wait Event")
    if waits["correlation"].size == 0:
        return None
    keys, ops = _keyed(lane, corr)
    out, exact = np.full(lane.size, -1, np.int64), np.zeros(lane.size, bool)
    w_lane = _lane_of(pairs, waits["device"], waits["stream"])
    w_corr = waits["correlation"]
    ok = (w_lane >= 0) & (w_corr >= 0)
    if not ok.any() or keys.size == 0:
        return out, exact
    q = (w_lane[ok] << _SHIFT) | w_corr[ok]
    i = np.searchsorted(keys, q, "right")  # the first op on the waiting stream launched after the wait call
    hit = (i < keys.size) & ((keys[np.minimum(i, keys.size - 1)] >> _SHIFT) == w_lane[ok])
    held = np.full(ok.sum(), -1, np.int64)
    held[hit] = ops[i[hit]]
    rec_lane = _lane_of(pairs, waits["device"][ok], waits["wait_stream"][ok])
    recorded = _last_before(keys, ops, rec_lane, waits["wait_correlation"][ok])
    # not resolved: the other stream's work that ended last before the op, if launched before the wait call
    guess = np.full(held.size, -1, np.int64)
    if (held >= 0).any():
        guess[held >= 0] = _last_ended_elsewhere(lane, start, end, held[held >= 0])
    guess = np.where((guess >= 0) & (corr[np.maximum(guess, 0)] >= 0) & (corr[np.maximum(guess, 0)] < w_corr[ok]), guess, -1)
    waited = np.where(rec_lane >= 0, recorded, guess)
    use = (held >= 0) & (waited >= 0)
    # (an op held by several waits waits for the one whose work ends last)
    o = np.argsort(end[waited[use]], kind="stable")
    out[held[use][o]] = waited[use][o]
    exact[held[use][o]] = (rec_lane >= 0)[use][o]
    return out, exact


def event_sync_targets(trace: Trace, pairs: np.ndarray, lane: np.ndarray, corr: np.ndarray, call_corr: np.ndarray) -> np.ndarray:
    """Per host call with correlation ``call_corr`` (-1 none), the device op its resolved ``Event Sync`` waited for
    (module docstring), -1 for none."""
    out = np.full(call_corr.size, -1, np.int64)
    ev = _events(trace, "Event Sync")
    ok = (ev["wait_correlation"] >= 0) & (ev["wait_stream"] >= 0)
    if not ok.any() or call_corr.size == 0:
        return out
    keys, ops = _keyed(lane, corr)
    recorded = _last_before(keys, ops, _lane_of(pairs, ev["device"][ok], ev["wait_stream"][ok]), ev["wait_correlation"][ok])
    cc, rr = ev["correlation"][ok], recorded
    o = np.argsort(cc, kind="stable")  # (a call named twice: its last event)
    cc, rr = cc[o], rr[o]
    last = np.append(cc[1:] != cc[:-1], True)
    cc, rr = cc[last], rr[last]
    i = np.searchsorted(cc, call_corr)
    hit = (i < cc.size) & (cc[np.minimum(i, cc.size - 1)] == call_corr)
    out[hit] = rr[i[hit]]
    return out
