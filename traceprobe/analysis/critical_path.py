"""What bounds each step, and what removing a cause would give back: a replay of the job's dependency graph.

Definitions (quoted by the README). The model is a dependency graph of the window, replayed (as Daydream
replays one, Zhu et al., USENIX ATC 2020; HTA's ``critical_path_analysis`` builds the same edges for one rank):

- *host chain* (one per rank): the *anchors* of its launching threads, in time order: every call that launched
  device work in the trace (Kineto's correlation id) and every synchronizing runtime call (:data:`.idle_causes.SYNC_CALLS`,
  ``*Synchronize*``). The host time before an anchor is what the host did since the previous one; its
  *host class* is, nanosecond by nanosecond, the first of :data:`HOST_CLASSES` that holds it on any launching
  thread (``dispatch``: inside an op that launched device work, or a runtime call; ``cpu_op``: inside an op
  that launched none; ``host``: outside every op: Python, sleeps, I/O). Launching threads are one chain: the
  main thread and autograd's take turns; threads that launch at the same time are serialised (a what-if there
  is an upper bound).
- *device chains* (one per stream): each kernel, memcpy or memset starts at the later of the previous work on its
  stream and its launch call's end; the one that was later in the trace is its *binding* edge and keeps the
  trace's lag (launch latency, or a dependency on another stream: the lag is kept, the other stream's work is not
  modelled), the other edge keeps at most zero.
- *sync*: a synchronizing call that returned after device work ended inside it (the device's work ending last
  before the call's end, *target*) returns in the replay when its target ends, plus the trace's return latency.
- *collective*: a collective kernel matched across ranks (:func:`.collectives.match_window`, within its process
  group) ends, on every member, its own transfer time after the last member's arrival (its kernel's start).

Replaying the graph with the trace's durations gives the trace's own times exactly (int64 ns). A *what-if* replays it
with one cause's time removed and gives the *gain*: how much earlier the window's last work ends (per step: the
gain over the number of steps), on the slowest rank of the window when it has several (:func:`what_if`). Causes:
each host class of each rank (its time set to zero), ``sync`` (the rank's syncs wait for nothing), and, across
ranks, ``imbalance``: a rank's device time, per kernel name, beyond the median of the other ranks'. Each what-if is
replayed alone: gains of two causes are not added (removing both may give less than their sum, never more).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import intervals as iv
from ..reading import Trace
from .busy import host_name_codes, host_thread_codes, pageable_copies, runtime_calls
from .graph_capture import graph_intervals
from .idle_causes import EVENT_CAUSES, host_classes
from .launch_links import launch_rows
from .memo import device_column, host_column, per_trace
from .warmup import compile_phases, setup_span, slow_calls

HOST_CLASSES = ("graph_capture", "sync", "compile", "slow_call", "warmup", "pinned_alloc", "device_alloc", "other_rank", "data_loading",
                "optimizer", "dispatch", "cpu_op", "host")
"""The host classes, in the order each host nanosecond is given to the first that holds it (module docstring).
``compile``: ``torch.compile``'s phases (:func:`.warmup.compile_phases`); ``warmup``: one-time first calls
(:func:`.warmup.first_calls`) and the set-up before a first compile; ``slow_call``: later calls far slower than their
median (:func:`.warmup.slow_calls`: a new shape's plan or autotuning); the others as in :mod:`.idle_causes`."""

NEG = -(2**60)
"""Minus infinity for int64 times: no edge."""

DEPENDENCY_SLACK_NS = 20_000
"""An op that starts more than this after both its stream's previous work and its launch call waited on something
else: the work of another stream that ended last before it is its dependency (20 µs: above launch latency and the
device's own gaps between queued kernels, a few µs)."""

EVERY_RANK_FACTOR = 1.2
"""A cause removed on every rank is listed when it gains more than this times its best single rank's removal."""

MAX_ROUNDS = 2_000
"""Rounds of the replay (each carries time across one host-device or cross-rank edge) before it stops."""


@dataclass(frozen=True)
class RankGraph:
    """One rank's part of the dependency graph (module docstring), as arrays; times int64 ns as in the trace.

    Attributes:
        rank: the trace's rank (0 without one).
        t: (A,) anchor times (the call's end), increasing.
        h: (A,) host time before each anchor (0 for the first).
        class_ns: (len(HOST_CLASSES), A) that host time by class; columns sum to ``h``.
        class_top: per host class, the host op or call holding most of its time (``""`` none).
        target: (A,) the device op a sync anchor waited for, -1 for none; ``ret``: (A,) its return latency.
        lane: (K,) device chain of each device op (its (device, stream)), ops sorted by lane then start.
        start, end: (K,) the ops' times; ``d``: (K,) duration; ``g``: (K,) stream-edge lag; ``l``: (K,) launch-edge
            lag; ``anchor``: (K,) launching anchor (-1 none); ``fixed``: (K,) start of an op without launch nor
            predecessor (NEG otherwise); ``name``: (K,) kernel name (object); ``dep``: (K,) the op of another stream
            it waited for (-1 none), ``dep_lag``: (K,) the lag after it; ``pre_dur``: (A,) each anchor's call time
            before the point the host reaches it (the launch edge leaves from the call's start); ``pageable``: (K,)
            copies from or to pageable memory; ``blocking``: (A,) anchors that wait for their own copy.
        steps: step windows, columns ``step``, ``start_ns``, ``end_ns`` (int64 ns).
    """

    rank: int
    t: np.ndarray
    h: np.ndarray
    class_ns: np.ndarray
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
    steps: pd.DataFrame
    dep: np.ndarray
    dep_lag: np.ndarray
    pre_dur: np.ndarray
    pageable: np.ndarray
    blocking: np.ndarray


def _exclusive_spans(trace: Trace, threads: np.ndarray) -> list[iv.Intervals]:
    """Per host class but ``host``, its time on the launching threads, not held by an earlier class."""
    host = trace.host_events
    start, end = host_column(trace, "start_ns"), host_column(trace, "end_ns")
    thread = host_thread_codes(trace)
    on = np.isin(thread, threads)
    cls = host_classes(trace)
    runtime = runtime_calls(trace)
    compiling = compile_phases(trace)
    launching = np.zeros(len(host), bool)
    rows = launch_rows(trace)
    launching[rows[rows >= 0]] = True
    op = on & (cls == EVENT_CAUSES.index("launch")) & ~runtime
    holds = np.zeros(len(host), bool)  # an op with a launch call inside it on its thread
    for t in np.unique(thread[op]).tolist():
        calls = np.sort(start[launching & (thread == t)])
        sel = np.flatnonzero(op & (thread == t))
        holds[sel] = np.searchsorted(calls, end[sel], "right") > np.searchsorted(calls, start[sel], "left")
    graph = [g for t, g in graph_intervals(trace).items() if t in set(threads.tolist())]

    def span(m: np.ndarray) -> iv.Intervals:
        return iv.union(start[m & on], end[m & on])

    warm = EVENT_CAUSES.index("warmup")
    raw = [iv.coverage_at_least(graph, 1) if graph else iv.empty(), span(cls == EVENT_CAUSES.index("sync")),
           span((cls == warm) & compiling), span(slow_calls(trace)),
           iv.coverage_at_least([span((cls == warm) & ~compiling), setup_span(trace)], 1)]
    raw += [span(cls == EVENT_CAUSES.index(c)) for c in HOST_CLASSES[5:10]]
    raw += [span((op & holds) | (runtime & (cls == EVENT_CAUSES.index("launch")))), span(op & ~holds)]
    out, taken = [], iv.empty()
    for s in raw:
        out.append(iv.subtract(s, taken))
        taken = iv.coverage_at_least([taken, s], 1)
    return out


def _top(trace: Trace, rows: np.ndarray, span: iv.Intervals) -> str:
    """The name among host ``rows`` whose time inside ``span`` adds up to the most."""
    if rows.size == 0 or span[0].size == 0:
        return ""
    over = iv.measure(span, host_column(trace, "start_ns")[rows], host_column(trace, "end_ns")[rows])
    codes, names = host_name_codes(trace)
    c, ok = codes[rows], (over > 0) & (codes[rows] >= 0)
    if not ok.any():
        return ""
    return names[int(np.argmax(np.bincount(c[ok], weights=over[ok].astype(np.float64), minlength=len(names))))]


@per_trace
def rank_graph(trace: Trace) -> RankGraph:
    """The rank's part of the dependency graph (module docstring; :class:`RankGraph`)."""
    from .steps import step_windows

    ev = trace.device_events
    k = len(ev)
    rows = launch_rows(trace) if k else np.zeros(0, np.int64)
    host = trace.host_events
    cls = host_classes(trace) if len(host) else np.zeros(0, np.int8)
    sync_rows = np.flatnonzero((cls == EVENT_CAUSES.index("sync")) & runtime_calls(trace)) if len(host) else np.zeros(0, np.int64)
    real = np.union1d(rows[rows >= 0], sync_rows).astype(np.int64)
    steps = step_windows(trace)
    step_t = steps["start_ns"].to_numpy(np.int64)  # each step's start is an anchor too: host time from it is counted
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
    lane = pd.MultiIndex.from_arrays([dev, stream]).factorize()[0].astype(np.int64) if k else np.zeros(0, np.int64)
    o = np.lexsort((end, start, lane))
    lane, start, end, rows = lane[o], start[o], end[o], rows[o]
    name = ev["name"].to_numpy(dtype=object)[o].astype(str) if k else np.zeros(0, object)
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
    by_dep = dep >= 0
    by_launch = ~by_dep & (anchor >= 0) & (launch_t > prev_end)  # the binding edge: the latest of the three
    g = np.where(first, 0, np.where(by_launch | by_dep, np.minimum(start - prev_end, 0), start - prev_end))
    lag = np.where(anchor >= 0, np.where(by_launch, start - issue_t, np.minimum(start - issue_t, 0)), 0)
    dep_lag = np.where(by_dep, start - dep_end, 0)
    fixed = np.where((anchor < 0) & first & ~by_dep, start, NEG)
    # syncs: the device op ending last before the call's end, if it ended inside the call
    a = anchor_rows.size
    target, ret = np.full(a, -1, np.int64), np.zeros(a, np.int64)
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
        for one in np.unique(lane).tolist():
            ops = np.flatnonzero(lane == one)
            ops = ops[np.argsort(launched[ops], kind="stable")]
            q = np.searchsorted(launched[ops], s_start, "right") - 1
            cand = np.where(q >= 0, ops[np.maximum(q, 0)], -1)
            ok = (cand >= 0) & (end[np.maximum(cand, 0)] <= s_end)
            better = ok & ((quiet < 0) | (end[np.maximum(cand, 0)] > end[np.maximum(quiet, 0)]))
            quiet = np.where(better, cand, quiet)
        tgt = np.where(waited, tgt, quiet)
        syncs = np.flatnonzero(is_sync)
        target[syncs] = tgt
        ret[syncs] = np.where(waited, t[is_sync] - end[np.maximum(tgt, 0)], np.minimum(t[is_sync] - h_start[is_sync],
                                                                                        t[is_sync] - end[np.maximum(tgt, 0)]))
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
    threads = np.unique(host_thread_codes(trace)[real]) if real.size else np.zeros(0, np.int64)
    spans = _exclusive_spans(trace, threads) if a else [iv.empty()] * (len(HOST_CLASSES) - 1)
    class_ns = np.zeros((len(HOST_CLASSES), a), np.int64)
    for c, s in enumerate(spans):
        class_ns[c] = iv.measure(s, prev_t, prev_t + h)
    class_ns[-1] = h - class_ns[:-1].sum(axis=0)
    on = np.isin(host_thread_codes(trace), threads) if a else np.zeros(len(host), bool)
    tops = []
    for c, s in enumerate(spans):
        m = on & (cls >= 0) & (~runtime_calls(trace) if HOST_CLASSES[c] in ("dispatch", "cpu_op") else True)  # (not ProfilerStep#N)
        tops.append(_top(trace, np.flatnonzero(m), s))
    tops.append("")
    return RankGraph(int(trace.rank or 0), t, h, class_ns, tuple(tops), target, ret, lane, start, end, end - start, g, lag,
                     anchor, fixed, name, steps, dep, dep_lag, pre_dur, pageable_copies(trace)[o] if k else np.zeros(0, bool),
                     blocked)


def _grouped_cummax(key: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Running maximum of ``v`` within runs of equal ``key`` (``key`` sorted); values at or below NEG / 2 (no edge)
    are lifted to just under the least other value first, so that the running maximum works on a small range."""
    if v.size == 0:
        return v
    none = v <= NEG // 2
    if none.all():
        return v
    low = int(v[~none].min()) - 1
    out = iv.grouped_running_max(key, np.where(none, low, v))
    return np.where(out == low, NEG, out)


@dataclass
class _Job:
    """The ranks' graphs concatenated: offsets, chain keys, collective groups."""

    graphs: list[RankGraph]
    a_rank: np.ndarray
    k_rank: np.ndarray
    lane: np.ndarray
    target: np.ndarray
    anchor: np.ndarray
    group: np.ndarray
    d: np.ndarray
    first: np.ndarray
    dep: np.ndarray


def _job(graphs: list[RankGraph], per_rank: pd.DataFrame | None) -> _Job:
    a_off = np.cumsum([0] + [g.t.size for g in graphs])
    k_off = np.cumsum([0] + [g.start.size for g in graphs])
    l_off = np.cumsum([0] + [int(g.lane.max(initial=-1)) + 1 for g in graphs])
    cat = np.concatenate
    a_rank = cat([np.full(g.t.size, i, np.int64) for i, g in enumerate(graphs)])
    k_rank = cat([np.full(g.start.size, i, np.int64) for i, g in enumerate(graphs)])
    lane = cat([g.lane + l_off[i] for i, g in enumerate(graphs)])
    target = cat([np.where(g.target >= 0, g.target + k_off[i], -1) for i, g in enumerate(graphs)])
    anchor = cat([np.where(g.anchor >= 0, g.anchor + a_off[i], -1) for i, g in enumerate(graphs)])
    dep = cat([np.where(g.dep >= 0, g.dep + k_off[i], -1) for i, g in enumerate(graphs)])
    d = cat([g.d for g in graphs]).copy()
    group = np.full(d.size, -1, np.int64)
    if per_rank is not None and not per_rank.empty:
        ranks = {g.rank: i for i, g in enumerate(graphs)}
        gid = pd.MultiIndex.from_arrays([per_rank["pg"], per_rank["seq"]]).factorize()[0]
        start = cat([g.start for g in graphs])
        for r, i in ranks.items():
            sel = (per_rank["rank"] == r).to_numpy()
            if not sel.any():
                continue
            ks = np.arange(k_off[i], k_off[i + 1])
            key = start[ks]
            o = np.argsort(key, kind="stable")
            p = np.searchsorted(key[o], per_rank["start_ns"].to_numpy(np.int64)[sel])
            hit = (p < key.size) & (key[o][np.minimum(p, key.size - 1)] == per_rank["start_ns"].to_numpy(np.int64)[sel])
            group[ks[o[p[hit]]]] = gid[sel][hit]
        m = group >= 0
        last = np.full(int(gid.max(initial=-1)) + 1, NEG, np.int64)
        np.maximum.at(last, group[m], start[m])
        end = cat([g.end for g in graphs])
        d[m] = np.maximum(end[m] - last[group[m]], 0)  # a collective's transfer after its last member arrived
    first = np.ones(lane.size, bool)
    first[1:] = lane[1:] != lane[:-1]
    return _Job(graphs, a_rank, k_rank, lane, target, anchor, group, d, first, dep)


def replay(job: _Job, h: np.ndarray, d: np.ndarray, no_sync: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Anchor times and device op ends of the job replayed with host times ``h``, durations ``d`` and the sync edges
    of the anchors in ``no_sync`` (bool) dropped (module docstring). Returns ``(t, end)`` (int64 ns)."""
    cat = np.concatenate
    graphs = job.graphs
    t0 = cat([g.t for g in graphs])
    start0 = cat([g.start for g in graphs])
    g_lag, l_lag, fixed = cat([g.g for g in graphs]), cat([g.l for g in graphs]), cat([g.fixed for g in graphs])
    ret, dep_lag, pre_dur = cat([g.ret for g in graphs]), cat([g.dep_lag for g in graphs]), cat([g.pre_dur for g in graphs])
    first_a = np.ones(t0.size, bool)
    first_a[1:] = job.a_rank[1:] != job.a_rank[:-1]
    H = np.cumsum(h)
    sync = (job.target >= 0) & ~no_sync
    P = np.cumsum(g_lag + d)
    t, end = t0.copy(), cat([g.end for g in graphs])
    arrival = start0.copy()
    m = job.group >= 0
    n_groups = int(job.group.max(initial=-1)) + 1
    for _ in range(MAX_ROUNDS):
        issue = np.where(first_a, t, np.roll(t, 1) + h) - pre_dur  # each launch call's start
        ext = np.where(job.anchor >= 0, issue[np.maximum(job.anchor, 0)] + l_lag, NEG) if t.size else np.full(end.size, NEG)
        ext = np.maximum(ext, np.where(job.dep >= 0, end[np.maximum(job.dep, 0)] + dep_lag, fixed))
        if n_groups:
            last = np.full(n_groups, NEG, np.int64)
            np.maximum.at(last, job.group[m], arrival[m])
            ext = np.where(m, np.maximum(ext, last[np.maximum(job.group, 0)]), ext)
        new_end = P + _grouped_cummax(job.lane, np.maximum(ext + d - P, NEG))
        prev = np.where(job.first, NEG, np.roll(new_end, 1) + g_lag)
        own = np.where(job.anchor >= 0, issue[np.maximum(job.anchor, 0)] + l_lag, NEG) if t.size else np.full(end.size, NEG)
        new_arrival = np.maximum(np.maximum(prev, own), np.where(job.dep >= 0, end[np.maximum(job.dep, 0)] + dep_lag, fixed))
        x = np.where(first_a, t0, np.where(sync, new_end[np.maximum(job.target, 0)] + ret, NEG)) if t.size else t
        new_t = H + _grouped_cummax(job.a_rank, np.maximum(x - H, NEG)) if t.size else t
        if np.array_equal(new_t, t) and np.array_equal(new_end, end) and np.array_equal(new_arrival, arrival):
            break
        t, end, arrival = new_t, new_end, new_arrival
    return t, end


WHAT_IF_COLUMNS = ["rank", "cause", "top", "removed_ns", "gain_ns", "per_step_ns", "steps_with"]


def what_if(graphs: list[RankGraph], per_rank: pd.DataFrame | None = None, min_ns: int = 0) -> pd.DataFrame:
    """The gain of removing each cause, one at a time (module docstring).

    Causes: each host class of :data:`HOST_CLASSES` (its host time set to zero), ``sync`` (the syncs wait for
    nothing), ``pageable_copy`` (copies from or to pageable memory take no time: pinned memory would let the host go
    on), per rank and, where two or more ranks hold it, on every rank at once (``rank`` -1: a cause every rank
    shares, such as a sync in the loop or a recompile, gives nothing back when removed from one rank alone); and,
    across ranks, ``imbalance``: a rank's device time per kernel name beyond the median of the other ranks'.

    Args:
        graphs: the ranks of one window (:func:`rank_graph` of each trace), in any order.
        per_rank: the window's matched collectives (:attr:`.collectives.WindowCollectives.per_rank`), None for one rank.
        min_ns: causes whose removed time is at most this are not replayed.

    Returns:
        DataFrame, largest gain first: ``rank`` (int64, -1 every rank), ``cause`` (str), ``top`` (str: the host op,
        sync call or kernel name holding most of it), ``removed_ns`` (int64: the time taken out, on all its ranks),
        ``gain_ns`` (int64: how much earlier the window's last work ends), ``per_step_ns`` (int64: ``gain_ns`` over
        the most steps a rank of the window has, or ``gain_ns`` without steps), ``steps_with`` (int64: the steps
        whose own time the cause held, on the rank holding it most; -1 without steps).
    """
    if not graphs:
        return pd.DataFrame({c: pd.Series([], dtype=object if c in ("cause", "top") else np.int64) for c in WHAT_IF_COLUMNS})
    job = _job(graphs, per_rank)
    h0 = np.concatenate([g.h for g in graphs])
    no_sync = np.zeros(h0.size, bool)
    base = _finish(*replay(job, h0, job.d, no_sync))
    n_steps = max((len(g.steps) for g in graphs), default=0)
    floor = max(min_ns, 0)
    cls_all = np.concatenate([g.class_ns for g in graphs], axis=1)
    waits = [np.where(g.target >= 0, g.t - np.concatenate([g.t[:1], g.t[:-1]]) - g.h, 0) for g in graphs]
    pageable = np.concatenate([g.pageable for g in graphs])
    rows: list[tuple] = []

    def add(ranks: list[int], cause: str, removed: list[int], top: str, h: np.ndarray, d: np.ndarray, drop: np.ndarray,
            held: list[int]) -> None:
        rank = graphs[ranks[0]].rank if len(ranks) == 1 else -1
        rows.append((rank, cause, top, sum(removed), base - _finish(*replay(job, h, d, drop)), max(held)))

    sync = HOST_CLASSES.index("sync")
    for c, cause in enumerate(HOST_CLASSES):
        if c == sync:
            continue  # (told with the syncs' waits, below)
        holding = [i for i, g in enumerate(graphs) if g.class_ns[c].sum() > floor]
        for ranks in [[i] for i in holding] + ([holding] if len(holding) > 1 else []):
            on = np.isin(job.a_rank, ranks)
            top = max(ranks, key=lambda i: graphs[i].class_ns[c].sum())
            add(ranks, cause, [int(graphs[i].class_ns[c].sum()) for i in ranks], graphs[top].class_top[c],
                h0 - np.where(on, cls_all[c], 0), job.d, no_sync, [_steps_with(graphs[i], graphs[i].class_ns[c], floor) for i in ranks])
    waits = [w + g.class_ns[sync] for w, g in zip(waits, graphs)]  # a sync's wait and its host time (aten::item's own)
    holding = [i for i, w in enumerate(waits) if w.sum() > floor]
    for ranks in [[i] for i in holding] + ([holding] if len(holding) > 1 else []):
        on = np.isin(job.a_rank, ranks)
        add(ranks, "sync", [int(waits[i].sum()) for i in ranks], _sync_top(graphs[max(ranks, key=lambda i: waits[i].sum())]),
            h0 - np.where(on, cls_all[sync], 0), job.d, on & (job.target >= 0) & ~np.concatenate([g.blocking for g in graphs]),
            [_steps_with(graphs[i], waits[i], floor) for i in ranks])
    copies = [int(g.d[g.pageable].sum()) for g in graphs]
    holding = [i for i, n in enumerate(copies) if n > floor]
    for ranks in [[i] for i in holding] + ([holding] if len(holding) > 1 else []):
        sel = pageable & np.isin(job.k_rank, ranks)
        add(ranks, "pageable_copy", [copies[i] for i in ranks], "Memcpy (pageable)", h0, np.where(sel, 0, job.d), no_sync, [-1])
    if len(graphs) > 1:
        rows += _imbalance(job, h0, no_sync, base, floor)
    out = pd.DataFrame(rows, columns=["rank", "cause", "top", "removed_ns", "gain_ns", "steps_with"])
    single = out[out["rank"] >= 0].groupby("cause")["gain_ns"].max()
    best = out["cause"].map(single).fillna(-1).to_numpy(np.float64)
    out = out[(out["rank"] >= 0).to_numpy() | (out["gain_ns"].to_numpy() > EVERY_RANK_FACTOR * best)]  # (one rank says it all)
    out["per_step_ns"] = out["gain_ns"] // max(n_steps, 1)
    out["_last"] = out["cause"] == "sync"  # on a tie a sync comes after what made it wait (an allocator's free)
    out = out.astype({"rank": np.int64, "removed_ns": np.int64, "gain_ns": np.int64, "per_step_ns": np.int64, "steps_with": np.int64})
    return out.sort_values(["gain_ns", "_last", "rank"], ascending=[False, True, False], kind="stable").reset_index(drop=True)[WHAT_IF_COLUMNS]


def _finish(t: np.ndarray, end: np.ndarray) -> int:
    """When the window's last work ends: its last anchor or device op."""
    return int(max(t.max(initial=NEG), end.max(initial=NEG)))


def _sync_top(g: RankGraph) -> str:
    return g.class_top[HOST_CLASSES.index("sync")] or "synchronizing call"


def _steps_with(g: RankGraph, ns: np.ndarray, min_ns: int) -> int:
    """The steps of ``g`` in which ``ns`` (per anchor) adds up to more than ``min_ns`` (at least 1 ns); -1 without steps."""
    if g.steps.empty:
        return -1
    t = g.t
    s = np.searchsorted(g.steps["start_ns"].to_numpy(np.int64), t, "right") - 1
    ok = (s >= 0) & (t <= int(g.steps["end_ns"].iloc[-1]))
    per = np.bincount(s[ok], weights=ns[ok].astype(np.float64), minlength=len(g.steps))
    return int((per > max(min_ns, 0)).sum())


def _imbalance(job: _Job, h0: np.ndarray, no_sync: np.ndarray, base: int, min_ns: int) -> list[tuple]:
    """Per rank, its device time per kernel name beyond the median of the other ranks', removed."""
    names = np.concatenate([g.name for g in job.graphs])
    code, uniq = pd.factorize(names)
    n = len(job.graphs)
    tot = np.zeros((n, len(uniq)), np.int64)
    np.add.at(tot, (job.k_rank, code), np.concatenate([g.d for g in job.graphs]))
    comm = job.group >= 0
    comm_name = np.zeros(len(uniq), bool)
    comm_name[code[comm]] = True
    rows = []
    for i, g in enumerate(job.graphs):
        others = np.median(np.delete(tot, i, axis=0), axis=0)
        excess = np.where(comm_name, 0, np.maximum(tot[i] - others, 0)).astype(np.int64)
        removed = int(excess.sum())
        if removed <= max(min_ns, 0):
            continue
        keep = np.where(tot[i] > 0, 1 - excess / np.maximum(tot[i], 1), 1.0)
        d = job.d.copy()
        on = job.k_rank == i
        d[on] = np.round(d[on] * keep[code[on]]).astype(np.int64)
        gain = base - _finish(*replay(job, h0, d, no_sync))
        rows.append((g.rank, "imbalance", str(uniq[int(np.argmax(excess))]), removed, gain, -1))
    return rows
