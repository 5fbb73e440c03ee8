"""The job's dependency graph: which work waited for which, per rank, read from one trace.

Definitions (quoted by docs/measures.md). The graph (the kinds of edges HTA's ``critical_path_analysis`` builds for one
rank, and Daydream's, Zhu et al., USENIX ATC 2020, for what-if replays), replayed by :mod:`.what_if`:

- *host chain* (one per rank): the *anchors* of its launching threads, in time order: every call that launched
  device work in the trace (Kineto's correlation id), every synchronizing runtime call (:data:`.host_classes.SYNC_CALLS`,
  ``*Synchronize*``), every step's start and the last step's end (the host time after the window's last call, up to
  its last step's end, is that step's: the critical path is walked back from it where it is the window's last work).
  The host time before an anchor is what the host did since the
  previous one; its *host class* is, nanosecond by nanosecond, the first of :data:`HOST_CLASSES` that holds it on
  any launching thread (``dispatch``: inside an op that launched device work, or a runtime call; ``cpu_op``: inside
  an op that launched none; ``host``: outside every op: Python, sleeps, I/O). Launching threads are one chain: the
  main thread and autograd's take turns; threads that launch at the same time are serialised (a what-if there is
  an upper bound). A trace without device work (a CPU-only job) has no launching thread: its threads that ran ops
  take their place, and its anchors are its steps' starts and end.
- *device chains* (one per stream): each kernel, memcpy or memset starts at the latest of the previous work on its
  stream, its launch call's start (plus the trace's launch lag) and, where it started more than
  :data:`.device_chains.DEPENDENCY_SLACK_NS` after both, the work of another stream that ended last before it (a *dependency*:
  an event wait). The one that was latest in the trace is its *binding* edge and keeps the trace's lag; the others
  keep at most zero.
- *sync*: a synchronizing call returns when the work it waited for ends (the work that ended last inside the call;
  for a call that waited for nothing, per stream the last work launched before it that ended before it returned)
  plus the trace's return latency. A call that waits for its own copy (from or to pageable memory, a synchronous
  ``cudaMemcpy``) is a sync on that copy.
- *collective*: a collective kernel matched across ranks (:func:`.collectives.match_window`, within its process
  group) ends, on every member, its own transfer time after the last member's arrival (its kernel's start).
"""


from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..device.busy import comm_mask, cpu_ops, host_thread_codes, pageable_copies, per_value, runtime_calls
from ..host.graph_capture import replays_graphs
from ..host.host_classes import HOST_CAUSES, class_spans, program_call_top, top_name
from ..host.python_frames import frame_holding, thread_labels
from ..host.warmup import compile_holders, profiler_top
from ..memo import host_column, per_trace
from .class_times import ClassTimes
from .device_chains import BIND_DEPENDENCY, device_chains
from .event_waits import event_sync_targets
from .sweep import fits_int32

HOST_CLASSES = tuple("dispatch" if c == "launch" else c for c in HOST_CAUSES)
"""The host classes, in the order each host nanosecond is given to the first that holds it (module docstring).
``compile``: ``torch.compile``'s phases (:func:`.warmup.compile_phases`); ``warmup``: one-time first calls
(:func:`.warmup.first_calls`) and the set-up before a first compile; ``slow_call``: later calls far slower than their
median (:func:`.warmup.slow_calls`: a new shape's plan or autotuning); the others as in :mod:`.idle_causes`."""

DEVICE_WIDE = re.compile(r"DeviceSynchronize|CtxSynchronize")
"""Synchronizing calls that wait for every stream of the device (``cudaDeviceSynchronize``, ``hipDeviceSynchronize``,
``cuCtxSynchronize``), not one stream or event; the device frees (:data:`..host.host_classes.FREE_CALLS`) do too. A free
is a sync edge of host class ``device_alloc``; the what-if of its host class (``device_alloc``; ``slow_call`` or
``warmup`` for a first or slow one that did not wait) drops its wait with its host time (:data:`RankGraph.freeing`):
the call goes, and the drain with it."""

INDICES = ("target", "lane", "anchor", "name", "dep", "also_anchor", "also_op")
"""The fields of :class:`RankGraph` that index its own arrays or names (-1: none): held as int32."""


@dataclass(frozen=True)
class RankGraph:
    """One rank's part of the dependency graph (module docstring), as arrays; times int64 ns as in the trace, indices
    (:data:`INDICES`) int32.

    Attributes:
        rank: the trace's rank (0 without one).
        t: (A,) anchor times (the call's end), increasing.
        h: (A,) host time before each anchor (0 for the first).
        class_ns: (len(HOST_CLASSES), A) that host time by class, int64 ns held sparse (:class:`.class_times.ClassTimes`);
            columns sum to ``h``.
        class_top: per host class, the host op or call holding most of its time (``""`` none).
        target: (A,) the device op a sync anchor waited for, -1 for none; ``ret``: (A,) its return latency.
        lane: (K,) device chain of each device op (its (device, stream)), ops sorted by lane then start.
        start, end: (K,) the ops' times; ``d``: (K,) duration; ``g``: (K,) stream-edge lag; ``l``: (K,) launch-edge
            lag; ``anchor``: (K,) launching anchor (-1 none); ``fixed``: (K,) start of an op without launch nor
            predecessor (NEG otherwise); ``name``: (K,) kernel name, a code into ``names``; ``dep``: (K,) the op of another stream
            it waited for (-1 none), ``dep_lag``: (K,) the lag after it; ``pre_dur``: (A,) each anchor's call time
            before the point the host reaches it (the launch edge leaves from the call's start); ``pageable``: (K,)
            copies from or to pageable memory; ``blocking``: (A,) anchors that wait for their own copy; ``comm``:
            (K,) communication kernels (:func:`.busy.comm_mask`); ``bind``: (K,) each op's binding edge in the trace
            (:data:`.device_chains.BIND_NONE`, ``BIND_STREAM``, ``BIND_LAUNCH``, ``BIND_DEPENDENCY``).
        lane_names: each device chain's device and stream (``cuda:0 stream 7``), by ``lane``.
        ranked: whether the trace names its rank (``rank`` is 0 where it does not).
        id_density: the runtime calls' distinct correlation ids over the range they span (CUPTI numbers every
            call: a sampled trace, such as HTA's ``sampled_rank-0``, holds a small share of them).
        steps: step windows, columns ``step``, ``start_ns``, ``end_ns`` (int64 ns).
        stack_frames: the Python frames the trace recorded (``with_stack=True``; 0 without stacks): recording them
            slows the host.
        also_anchor, also_op: (E,) a device-wide sync's other edges: anchor ``also_anchor[e]`` returns no earlier than
            op ``also_op[e]`` ends plus its return latency (``ret``): per stream, the last work launched before the
            call, beside ``target`` (the work that ended last).
        backend: the trace's device runtime (:attr:`traceprobe.reading.Trace.backend`); ``replays``: whether the trace
            replays device graphs (:func:`.graph_capture.replays_graphs`): the advice on launch-bound time depends on it.
        event_rows: (K,) each op's row of the trace's ``device_events`` (int64; empty in a graph read from a summary).
        freeing: (A,) per anchor that is a device free (:data:`..host.host_classes.FREE_CALLS`), its host class (int8 index into
            :data:`HOST_CLASSES`); -1 for every other anchor.
        host_ops: whether the trace recorded host ops (``cpu_op`` events): where it did not, the ``host`` class is the
            host's time between the runtime calls it recorded, not known to be outside ops.
        device_causes: ``(cause, top, (K,) durations)`` of each device-time cause (:mod:`.what_if_kernels`: kernels at
            their roofline, elementwise chains fused), the ops' durations with it removed; empty where none is known.
    """

    rank: int
    t: np.ndarray
    h: np.ndarray
    class_ns: ClassTimes
    class_top: tuple[str, ...]
    target: np.ndarray
    ret: np.ndarray
    lane: np.ndarray
    start: np.ndarray
    end: np.ndarray
    d: np.ndarray
    g: np.ndarray
    l: np.ndarray  # noqa: E741
    anchor: np.ndarray
    fixed: np.ndarray
    name: np.ndarray
    names: tuple[str, ...]
    steps: pd.DataFrame
    dep: np.ndarray
    dep_lag: np.ndarray
    pre_dur: np.ndarray
    pageable: np.ndarray
    blocking: np.ndarray
    comm: np.ndarray
    bind: np.ndarray
    id_density: float = 1.0
    lane_names: tuple[str, ...] = ()
    ranked: bool = True
    also_anchor: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    also_op: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    stack_frames: int = 0
    backend: str = "cuda"
    replays: bool = False
    event_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    freeing: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    host_ops: bool = True
    device_causes: tuple[tuple[str, str, np.ndarray], ...] = ()

    def __post_init__(self) -> None:
        """The graph's own indices (:data:`INDICES`) held as int32 where their values fit (a rank's anchors, ops and
        names number far below 2^31: half the memory of int64, 80 KB of a 20,000-event rank's graph), the host classes
        sparse (:class:`.class_times.ClassTimes`; a dense table given is held sparse)."""
        for k in INDICES:
            v = getattr(self, k)
            if v.dtype != np.int32 and fits_int32(v):
                object.__setattr__(self, k, v.astype(np.int32))
        if not isinstance(self.class_ns, ClassTimes):
            object.__setattr__(self, "class_ns", ClassTimes.of(self.class_ns))

    @cached_property
    def step_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """:attr:`steps`' ``start_ns`` and ``end_ns`` (int64 arrays; empty without steps), read from the frame once: the
        what-ifs read them per rank, for every cause."""
        s = self.steps
        if not len(s):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return s["start_ns"].to_numpy(np.int64), s["end_ns"].to_numpy(np.int64)


def _id_density(trace: Trace) -> float:
    if trace.host_events.empty:
        return 1.0
    ids = host_column(trace, "correlation")[runtime_calls(trace)]
    ids = iv.distinct(ids[ids > 0])
    return ids.size / (int(ids[-1]) - int(ids[0]) + 1) if ids.size > 1 else 1.0


@per_trace
def rank_graph(trace: Trace) -> RankGraph:
    """The rank's part of the dependency graph (module docstring; :class:`RankGraph`)."""
    ch = device_chains(trace)
    k, host, cls, frees, sync_rows, real, steps = len(trace.device_events), trace.host_events, ch.cls, ch.frees, ch.sync_rows, ch.real, ch.steps
    h_start, t, anchor_rows, pairs, lane, lane_names, o = ch.h_start, ch.t, ch.anchor_rows, ch.pairs, ch.lane, ch.lane_names, ch.o
    start, end, rows, name, names, anchor, launch_t, corr = ch.start, ch.end, ch.rows, ch.name, ch.names, ch.anchor, ch.launch_t, ch.corr
    g, lag, fixed, dep, dep_lag = ch.g, ch.lag, ch.fixed, ch.dep, ch.dep_lag
    # syncs: the device op ending last before the call's end, if it ended inside the call
    a = anchor_rows.size
    target, ret = np.full(a, -1, np.int64), np.zeros(a, np.int64)
    also_a: list[np.ndarray] = [np.zeros(0, np.int64)]
    also_k: list[np.ndarray] = [np.zeros(0, np.int64)]
    waited_sync, blocked = np.zeros(a, bool), np.zeros(a, bool)
    is_sync = np.isin(anchor_rows, sync_rows) & (anchor_rows >= 0)
    if k and is_sync.any():
        by_end = np.argsort(end, kind="stable")
        j = np.searchsorted(end[by_end], t[is_sync], "right") - 1
        tgt = np.where(j >= 0, by_end[np.maximum(j, 0)], -1)
        waited = (tgt >= 0) & (end[np.maximum(tgt, 0)] > h_start[is_sync])
        # a sync that did not wait still waits, in a replay where its host comes earlier, for the work launched before it
        # (per stream, the last work launched before the call, where it ended before the call returned: a sync of
        # one stream returns while other streams still run)
        launched = np.where(anchor >= 0, launch_t, start)
        s_start, s_end = h_start[is_sync], t[is_sync]
        quiet = np.full(s_start.size, -1, np.int64)
        per_lane = []
        for one in iv.distinct(lane).tolist():
            ops = np.flatnonzero(lane == one)
            ops = ops[np.argsort(launched[ops], kind="stable")]
            q = np.searchsorted(launched[ops], s_start, "right") - 1
            cand = np.where(q >= 0, ops[np.maximum(q, 0)], -1)
            ok = (cand >= 0) & (end[np.maximum(cand, 0)] <= s_end)
            better = ok & ((quiet < 0) | (end[np.maximum(cand, 0)] > end[np.maximum(quiet, 0)]))
            quiet = np.where(better, cand, quiet)
            per_lane.append(np.where(ok, cand, -1))
        tgt = np.where(waited, tgt, quiet)
        host_corr = host_column(trace, "correlation")[np.maximum(anchor_rows[is_sync], 0)]
        told = event_sync_targets(trace, pairs, lane, corr, host_corr)  # (an event sync whose record the trace resolved)
        waited = np.where(told >= 0, end[np.maximum(told, 0)] > h_start[is_sync], waited)
        tgt = np.where(told >= 0, told, tgt)
        syncs = np.flatnonzero(is_sync)
        target[syncs] = tgt
        # a device-wide sync that waited returns after every stream's work launched before it, not only the last
        wide = (per_value(host["name"], lambda n: DEVICE_WIDE.search(str(n)) is not None, False, bool) | frees)[
            np.maximum(anchor_rows[is_sync], 0)]
        for cand in per_lane:
            more = wide & waited & (cand >= 0) & (cand != tgt)
            also_a.append(syncs[more])
            also_k.append(cand[more])
        freeing_call = frees[np.maximum(anchor_rows[is_sync], 0)]  # (a free that did not wait: its time is its own work)
        ret[syncs] = np.where(waited, t[is_sync] - end[np.maximum(tgt, 0)], np.where(freeing_call, 0, np.minimum(
            t[is_sync] - h_start[is_sync], t[is_sync] - end[np.maximum(tgt, 0)])))
        waited_sync[syncs[waited]] = True
    # a copy that the host call waits for (from or to pageable memory, or a synchronous cudaMemcpy; it started before
    # the call returned): the call returns when its copy ends (less the trace's lag, which may be negative: a pageable
    # copy's call can return as its last chunk is still in flight), as a sync does
    blocking = (anchor >= 0) & (start < launch_t) & (pageable_copies(trace)[o] | np.isin(rows, sync_rows)) if k else np.zeros(0, bool)
    if blocking.any():
        ops = np.flatnonzero(blocking)
        ops = ops[np.argsort(end[ops], kind="stable")]  # (the last copy of a call wins)
        target[anchor[ops]], ret[anchor[ops]] = ops, launch_t[ops] - end[ops]
        waited_sync[anchor[ops]] = blocked[anchor[ops]] = True
    # host time before each anchor, by class
    prev_t = np.concatenate([[t[0] if a else 0], t[:-1]])
    pre = np.where(waited_sync, np.maximum(h_start, prev_t), t)  # (a sync's wait is its edge, not host time)
    h = np.maximum(pre - prev_t, 0)
    h[:1] = 0
    pre_dur = prev_t + h - h_start  # (the launch call's time before the point it waits from, or its whole time)
    threads = iv.distinct(host_thread_codes(trace)[real]) if real.size else _op_threads(trace, k)
    spans = class_spans(trace, tuple(threads.tolist())) if a else [iv.empty()] * (len(HOST_CLASSES) - 1)
    class_ns = np.zeros((len(HOST_CLASSES), a), np.int64)
    for c, s in enumerate(spans):
        class_ns[c] = iv.measure(s, prev_t, prev_t + h)
    class_ns[-1] = h - class_ns[:-1].sum(axis=0)
    on = np.isin(host_thread_codes(trace), threads) if a else np.zeros(len(host), bool)
    tops = []
    for c, s in enumerate(spans):
        m = on & (cls >= 0) & (~runtime_calls(trace) if HOST_CLASSES[c] in ("dispatch", "cpu_op") else True)  # (not ProfilerStep#N)
        if HOST_CLASSES[c] == "compile":  # (named by its phase, not by the op holding it)
            m &= ~compile_holders(trace)
        tops.append(profiler_top(trace, s) if HOST_CLASSES[c] == "profiler" else  # (the profiler's record, not the op it held up)
                    (program_call_top if HOST_CLASSES[c] == "sync" else top_name)(trace, np.flatnonzero(m), s))
    if a and not trace.python_events.empty:  # (the Python function the host was in, where the trace has stacks)
        host_span = iv.subtract(iv.union(prev_t[h > 0], (prev_t + h)[h > 0]), iv.coverage_at_least(spans, 1))
        tops.append(frame_holding(trace, host_span, thread_labels(trace, threads)))
    else:
        tops.append("")
    return RankGraph(int(trace.rank or 0), t, h, ClassTimes.of(class_ns), tuple(tops), target, ret, lane, start, end, end - start, g, lag,
                     anchor, fixed, name, names, steps, dep, dep_lag, pre_dur, pageable_copies(trace)[o] if k else np.zeros(0, bool),
                     blocked, comm_mask(trace)[o] if k else np.zeros(0, bool),
                     ch.bind,
                     _id_density(trace), lane_names, trace.rank is not None, np.concatenate(also_a), np.concatenate(also_k),
                     len(trace.python_events), trace.backend, replays_graphs(trace), o.astype(np.int64) if k else np.zeros(0, np.int64),
                     _free_classes(anchor_rows, frees, cls) if len(host) else np.full(a, -1, np.int8),
                     bool(len(host)) and bool(cpu_ops(trace).any()))


def _op_threads(trace: Trace, device_ops: int) -> np.ndarray:
    """The host threads whose time is the rank's where none launched device work: in a trace without device work (a
    CPU-only job), the threads that ran ops (``cpu_op``: the main thread and autograd's; not a communication library's
    own threads, which hold annotations only), so the host time of its steps is told by the ops holding it. Empty
    where the trace has device work (its launching threads are then the ones) or no host ops."""
    host = trace.host_events
    if device_ops or host.empty:
        return np.zeros(0, np.int64)
    op = cpu_ops(trace)
    return iv.distinct(host_thread_codes(trace)[op])


def _free_classes(anchor_rows: np.ndarray, frees: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """Per anchor: its host class (index into :data:`HOST_CLASSES`, int8) where its call is a device free, else -1."""
    row = np.maximum(anchor_rows, 0)
    free = (anchor_rows >= 0) & frees[row] & (cls[row] >= 0)
    return np.where(free, cls[row].astype(np.int64) + 1, -1).astype(np.int8)  # (EVENT_CAUSES is HOST_CLASSES[1:-1])


def waited_for_rows(trace: Trace) -> np.ndarray:
    """Per row of ``trace.device_events``: the row of the device op of another stream whose end bound its start in the
    dependency graph (:data:`.device_chains.BIND_DEPENDENCY`: a recorded event wait, or one inferred past
    :data:`.device_chains.DEPENDENCY_SLACK_NS`), else -1 (int64). The idle causes read it (:mod:`..host.idle_causes`: ``dependency``),
    from the device chains alone (:func:`.device_chains.device_chains`: the graph's host time is not built for it)."""
    c = device_chains(trace)
    out = np.full(len(trace.device_events), -1, np.int64)
    if c.o.size:
        sel = (c.bind == BIND_DEPENDENCY) & (c.dep >= 0)
        out[c.o[sel]] = c.o[c.dep[sel]]
    return out
