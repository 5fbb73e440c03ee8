"""The device chains of a rank's dependency graph (:mod:`.dependency_graph`'s module docstring): the device ops on their
streams in start order, each op's launching anchor on the host chain and its binding edge (the previous work on its
stream, its launch, or another stream's work), computed once per trace. The graph (:func:`.dependency_graph.rank_graph`)
builds its syncs and host time on them; the idle causes read the dependencies alone
(:func:`.dependency_graph.waited_for_rows`), of a trace whose graph is not replayed (the report's profiled window)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...keyed import unique_pairs
from ...reading import Trace
from ..device.busy import runtime_calls
from ..host.host_classes import EVENT_CAUSES, device_frees, host_classes
from ..host.launch_links import launch_rows
from ..memo import device_column, host_column, per_trace
from .event_waits import stream_waits
from .sweep import NEG

BIND_NONE, BIND_STREAM, BIND_LAUNCH, BIND_DEPENDENCY = 0, 1, 2, 3
"""An op's binding edge: none in the trace (the first op of its stream, launched before the trace), the previous work
on its stream, its launch, a dependency on another stream."""

DEPENDENCY_SLACK_NS = 20_000
"""An op that starts more than this after both its stream's previous work and its launch call waited on something
else: the work of another stream that ended last before it is its dependency (20 µs: above launch latency and the
device's own gaps between queued kernels, a few µs)."""


@dataclass(frozen=True)
class DeviceChains:
    """:func:`device_chains`' arrays (A anchors, K device ops; times int64 ns as in the trace).

    Attributes:
        cls, frees: per row of ``host_events``, its host class (:func:`.host_classes.host_classes`) and whether it is a
            device free. sync_rows: the synchronizing runtime calls' and frees' rows. real: the host rows that are
            anchors (launch calls and syncs), increasing. steps: the step windows (:func:`.steps.step_windows`).
        t, h_start, anchor_rows: (A,) each anchor's time (its call's end, or a step's bound), its call's start, its
            host row (-1: a step's bound), by time.
        pairs, lane_names: each lane's (device, stream) and its label. o: (K,) the rows of ``device_events`` in lane
            order (by lane, then start, then end); lane, start, end, rows, corr, name: (K,) each op's lane, times,
            launching host row (-1 none), correlation id and name code (into ``names``), in that order.
        anchor, launch_t: (K,) its launching anchor (-1 none) and the anchor's time (:data:`.sweep.NEG` none).
        dep, dep_lag: (K,) the op of another stream it waited for (-1 none) and the lag after it. g, lag: (K,) the
            stream edge's and the launch edge's lag. fixed: (K,) the start of an op without launch nor predecessor
            (:data:`.sweep.NEG` otherwise). bind: (K,) the binding edge (:data:`BIND_NONE`... :data:`BIND_DEPENDENCY`).
    """

    cls: np.ndarray
    frees: np.ndarray
    sync_rows: np.ndarray
    real: np.ndarray
    steps: pd.DataFrame
    t: np.ndarray
    h_start: np.ndarray
    anchor_rows: np.ndarray
    pairs: np.ndarray
    lane_names: tuple[str, ...]
    o: np.ndarray
    lane: np.ndarray
    start: np.ndarray
    end: np.ndarray
    rows: np.ndarray
    corr: np.ndarray
    name: np.ndarray
    names: tuple[str, ...]
    anchor: np.ndarray
    launch_t: np.ndarray
    dep: np.ndarray
    dep_lag: np.ndarray
    g: np.ndarray
    lag: np.ndarray
    fixed: np.ndarray
    bind: np.ndarray


@per_trace
def device_chains(trace: Trace) -> DeviceChains:
    """The device chains of ``trace`` (module docstring; :class:`DeviceChains`)."""
    from ..device.steps import step_windows

    ev = trace.device_events
    k = len(ev)
    rows = launch_rows(trace) if k else np.zeros(0, np.int64)
    host = trace.host_events
    cls = host_classes(trace) if len(host) else np.zeros(0, np.int8)
    frees = device_frees(trace) if len(host) else np.zeros(0, bool)
    sync_rows = np.flatnonzero(((cls == EVENT_CAUSES.index("sync")) | frees) & runtime_calls(trace)) if len(host) else np.zeros(0, np.int64)
    real = iv.distinct(np.concatenate([rows[rows >= 0], sync_rows])).astype(np.int64)
    steps = step_windows(trace)
    step_t = steps["start_ns"].to_numpy(np.int64)  # each step's start is an anchor too: host time from it is counted
    if len(steps):  # (and the last step's end: the host time after its last call, up to the step's end, is the step's)
        step_t = np.concatenate([step_t, [int(steps["end_ns"].max())]])
    h_start = np.concatenate([host_column(trace, "start_ns")[real] if len(host) else np.zeros(0, np.int64), step_t])
    t = np.concatenate([host_column(trace, "end_ns")[real] if len(host) else np.zeros(0, np.int64), step_t])
    anchor_rows = np.concatenate([real, np.full(step_t.size, -1, np.int64)])
    order = np.argsort(t, kind="stable")
    anchor_rows, h_start, t = anchor_rows[order], h_start[order], t[order]
    position = np.empty(real.size, np.int64)  # anchor of each real row (real is sorted)
    position[np.searchsorted(real, anchor_rows[anchor_rows >= 0])] = np.flatnonzero(anchor_rows >= 0)
    # device ops by lane (device, stream), then start
    dev, stream = device_column(trace, "device"), device_column(trace, "stream")
    start, end = device_column(trace, "start_ns"), device_column(trace, "end_ns")
    pairs, lane = unique_pairs(dev, stream)
    lane_names = tuple(f"{trace.device_label(int(d))} stream {int(s)}" for d, s in zip(*pairs))
    o = np.lexsort((end, start, lane))
    lane, start, end, rows = lane[o], start[o], end[o], rows[o]
    names_col = ev["name"]
    if k and isinstance(names_col.dtype, pd.CategoricalDtype):  # (the loader's names are categorical: their codes)
        code, uniq = names_col.cat.codes.to_numpy().astype(np.int64), list(names_col.cat.categories)
        code, uniq = np.where(code < 0, len(uniq), code), [*uniq, "nan"]
    else:
        code, uniq = pd.factorize(names_col.to_numpy(dtype=object)) if k else (np.zeros(0, np.int64), [])
    name, names = code.astype(np.int64)[o], tuple(str(x) for x in uniq)
    first = np.ones(k, bool)
    first[1:] = lane[1:] != lane[:-1]
    prev_end = np.where(first, NEG, np.roll(end, 1))
    anchor = np.where(rows >= 0, position[np.clip(np.searchsorted(real, rows), 0, max(real.size - 1, 0))] if real.size else -1, -1)
    safe = np.clip(anchor, 0, max(t.size - 1, 0))
    launch_t = np.where(anchor >= 0, t[safe] if t.size else NEG, NEG)
    issue_t = np.where(anchor >= 0, h_start[safe] if t.size else NEG, NEG)  # (the launch call's start)
    # a dependency: work of another stream ending after both, the last before the op's start, where the op started
    # more than DEPENDENCY_SLACK_NS after both (an event wait: cudaStreamWaitEvent)
    explained = np.maximum(prev_end, launch_t)
    by_end = np.argsort(end, kind="stable")
    j = np.searchsorted(end[by_end], start, "right") - 1
    dep = np.where(j >= 0, by_end[np.maximum(j, 0)], -1) if k else np.zeros(0, np.int64)
    dep_end = end[np.maximum(dep, 0)] if k else np.zeros(0, np.int64)
    dep = np.where((dep >= 0) & (start - explained > DEPENDENCY_SLACK_NS) & (dep_end > explained) & (lane[np.maximum(dep, 0)] != lane), dep, -1)
    corr = device_column(trace, "correlation")[o] if k else np.zeros(0, np.int64)
    recorded = stream_waits(trace, pairs, lane, start, end, corr) if k else None
    exact = np.zeros(k, bool)
    if recorded is not None:  # the waits the trace recorded, else (Kineto's sync events can miss some) the inferred ones
        told, exact = recorded
        dep = np.where(told >= 0, told, dep)
        dep_end = end[np.maximum(dep, 0)]
    by_dep = (dep >= 0) & (dep_end > explained)
    # an edge that did not bind is kept where it is exact (a resolved record; a first op without launch keeps its start)
    dep = np.where(by_dep | (exact & ((anchor >= 0) | ~first)), dep, -1)
    by_launch = ~by_dep & (anchor >= 0) & (launch_t > prev_end)  # the binding edge: the latest of the three
    g = np.where(first, 0, np.where(by_launch | by_dep, np.minimum(start - prev_end, 0), start - prev_end))
    lag = np.where(anchor >= 0, np.where(by_launch, start - issue_t, np.minimum(start - issue_t, 0)), 0)
    dep_lag = np.where(by_dep, start - dep_end, np.where(dep >= 0, np.minimum(start - dep_end, 0), 0))
    fixed = np.where((anchor < 0) & first & ~by_dep, start, NEG)
    bind = np.select([by_dep, by_launch, ~first], [BIND_DEPENDENCY, BIND_LAUNCH, BIND_STREAM], BIND_NONE).astype(np.int8)
    return DeviceChains(cls, frees, sync_rows, real, steps, t, h_start, anchor_rows, pairs, lane_names, o, lane, start, end, rows, corr,
                        name, names, anchor, launch_t, dep, dep_lag, g, lag, fixed, bind)
