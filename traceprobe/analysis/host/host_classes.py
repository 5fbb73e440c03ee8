"""What the host was in: the class of each host event (a synchronizing call, an allocation, a wait for other ranks,
the DataLoader, the optimizer, launching device work, CPU work that launches nothing), the one classification the idle
causes (:mod:`.idle_causes`) and the dependency graph's host classes (:mod:`..causal.dependency_graph`) read."""

from __future__ import annotations

import re

import numpy as np

from ... import intervals as iv
from ... import keyed
from ...reading import Trace
from ...reading.columns import is_step_name
from ..device.busy import cpu_ops, host_name_codes, host_thread_codes, occupied_intervals, per_value, runtime_calls
from ..memo import host_column, per_trace
from .graph_capture import graph_intervals
from .launch_links import launch_rows
from .warmup import compile_holders, compile_phases, first_calls, first_launches, profiler_spans, setup_span, slow_calls, varying_calls

CAUSES = ("graph_capture", "sync", "profiler", "compile", "slow_call", "warmup", "pinned_alloc", "device_alloc", "other_rank",
          "data_loading", "optimizer", "launch", "cpu_op", "host", "dependency", "queued", "unattributed")
"""The idle causes, in the order the host part of a gap is classified (:mod:`.idle_causes`). ``profiler`` is the
profiler's own work inside a host event (:func:`.warmup.profiler_spans`: CUPTI's activity buffers and start-up), held
by no host event of its own (:func:`class_spans`)."""

HOST_CAUSES = CAUSES[:14]
"""The causes of the host part of a gap: the device waited for the launching thread. The dependency graph's host
classes (:data:`..causal.dependency_graph.HOST_CLASSES`) are the same, ``launch`` named ``dispatch``."""

EVENT_CAUSES = HOST_CAUSES[1:-1]
"""The host causes held by host events, ``sync`` to ``cpu_op`` (:func:`host_classes` gives each event one of them up to
``launch``, ``profiler`` aside; :func:`dispatching` splits ``launch`` from ``cpu_op``)."""
_SYNC, _PROFILER, _COMPILE, _SLOW, _WARMUP, _OPTIMIZER, _LAUNCH = (EVENT_CAUSES.index(c) for c in (
    "sync", "profiler", "compile", "slow_call", "warmup", "optimizer", "launch"))

LABELS = {
    "graph_capture": "graph capture", "sync": "sync", "profiler": "profiler's own work", "compile": "compilation",
    "slow_call": "slow calls (new shapes)",
    "warmup": "warm-up", "pinned_alloc": "pinned alloc", "device_alloc": "device alloc", "other_rank": "host waits for ranks",
    "data_loading": "data loading", "optimizer": "optimizer on host", "launch": "launch-bound", "cpu_op": "CPU ops, no launch",
    "host": "host outside ops",
    "dependency": "dependency wait", "queued": "queued", "unattributed": "unattributed",
}
"""Short names of the causes, for tables."""

SYNC_CALLS = frozenset({
    "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol", "cudaMemcpyPeer",
    "cuMemcpy", "cuMemcpyDtoH_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoD_v2", "cuMemcpyDtoH", "cuMemcpyHtoD",
    "hipMemcpy", "hipMemcpyWithStream", "hipMemcpyDtoH", "hipMemcpyHtoD", "hipMemcpyDtoD", "hipMemcpy2D", "hipMemcpyPeer",
    "aten::item", "aten::_local_scalar_dense",
})
"""Host calls and ops that block until device work ends, besides every runtime/driver call named ``*Synchronize*``."""

PINNED_ALLOC_CALLS = frozenset({
    "cudaHostAlloc", "cudaMallocHost", "cudaHostRegister", "cudaFreeHost", "cudaHostUnregister", "cuMemHostAlloc",
    "cuMemAllocHost_v2", "cuMemAllocHost", "cuMemFreeHost", "cuMemHostRegister_v2", "hipHostMalloc", "hipHostAlloc",
    "hipMallocHost", "hipHostRegister", "hipHostFree", "hipFreeHost", "hipHostUnregister",
})
"""Page-locked (pinned) host allocation and release calls of the CUDA and HIP runtimes and drivers."""

DEVICE_ALLOC_CALLS = frozenset({
    "cudaMalloc", "cudaFree", "cudaMallocManaged", "cudaMallocPitch", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAlloc",
    "cuMemFree", "cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease", "hipMalloc", "hipFree", "hipExtMallocWithFlags",
    "hipMallocManaged",
})
"""Device memory allocation and release calls (``cudaFree`` also synchronizes the device)."""

FREE_CALLS = frozenset({"cudaFree", "cuMemFree", "cuMemFree_v2", "hipFree"})
"""Device frees, which synchronize the device before they return (the CUDA runtime's implicit synchronization of
``cudaFree``; what ``torch.cuda.empty_cache()`` calls): a sync edge in the dependency graph
(:mod:`..causal.dependency_graph`), of host class ``device_alloc``. A free that spent most of its time beside device
work waited for it (a drain): a sync's wait, never a first call's warm-up or a slow call (:func:`host_classes`)."""

_OTHER_RANK_RE = re.compile(r"barrier|wait_tensor|c10d::wait|ProcessGroup.*::wait|^gloo:", re.IGNORECASE)
_HOST_COLLECTIVE_RE = re.compile(r"^c10d::|^gloo:|^record_param_comms$")
"""Collective ops (``c10d::allreduce_``, ``gloo:all_reduce``, ``record_param_comms``) of a trace without device work:
a CPU-only job's communication runs on the host (gloo), so its time there is the host waiting for (and exchanging
with) the other ranks: class ``other_rank`` (:func:`host_classes`)."""
_OTHER_RANK = EVENT_CAUSES.index("other_rank")
_DATA_RE = re.compile(r"^enumerate\(DataLoader\)")
_OPT_RE = re.compile(r"^Optimizer\.(step|zero_grad)#")
_OP_CATS = ("cpu_op", "cuda_runtime", "cuda_driver")


def _host_class(name: object) -> int:
    """The class of one host event name: its index in :data:`EVENT_CAUSES` (``launch`` for any other name; ``warmup``
    is given call by call, in :func:`host_classes`)."""
    n = str(name)
    if "Synchronize" in n or n in SYNC_CALLS:
        return _SYNC
    for cause, matches in (("pinned_alloc", PINNED_ALLOC_CALLS.__contains__), ("device_alloc", DEVICE_ALLOC_CALLS.__contains__),
                           ("other_rank", _OTHER_RANK_RE.search), ("data_loading", _DATA_RE.search), ("optimizer", _OPT_RE.search)):
        if matches(n):
            return EVENT_CAUSES.index(cause)
    return _LAUNCH


@per_trace
def step_annotations(trace: Trace) -> np.ndarray:
    """Boolean mask over the rows of ``trace.host_events``: the step annotations (``ProfilerStep#N``,
    :data:`traceprobe.reading.columns.STEP_NAME`), by name once per distinct name, whatever their category (the reader
    files them under ``user_annotation``; a trace built by hand may not). A step is no op: it holds every op of its
    step, so it never makes the host "in an op" (:func:`host_classes`) nor names one (:func:`top_name`)."""
    return per_value(trace.host_events["name"], is_step_name, False, bool)


@per_trace
def host_classes(trace: Trace) -> np.ndarray:
    """Class of every row of ``trace.host_events`` (int8 index into :data:`EVENT_CAUSES`, computed once per distinct
    name), unless it synchronizes: a compile phase or an op holding one (:func:`.warmup.compile_phases`,
    :func:`.warmup.compile_holders`) is ``compile``, else a slow call (:func:`.warmup.slow_calls`: a new shape's plan)
    ``slow_call``, else a first call holding warm-up (:func:`.warmup.first_calls`) or a kernel's slow first launch
    (:func:`.warmup.first_launches`) ``warmup``, unless its name's later calls are as slow (:func:`.warmup.varying_calls`:
    an op of the CPU, whose time grows with its input, keeps its class); rows that are none of
    these nor a ``cpu_op``/runtime/driver call (user annotations) are -1 (but a collective of a trace without device work,
:data:`_HOST_COLLECTIVE_RE`, is ``other_rank``): they do not make the host "in an op"; so are the
    step annotations (``ProfilerStep#N``, :func:`step_annotations`) whatever their category. A device free (:data:`FREE_CALLS`) that spent at least half its time with its device's work
    running waited for it, as a sync does: it keeps ``device_alloc``."""
    host = trace.host_events
    if host.empty:
        return np.zeros(0, np.int8)
    cls = per_value(host["name"], _host_class, _LAUNCH, np.int8)
    if trace.device_events.empty:  # (a CPU-only job: its collectives run on the host, and wait there for the other ranks)
        cls = np.where(per_value(host["name"], lambda n: _HOST_COLLECTIVE_RE.search(str(n)) is not None, False, bool), _OTHER_RANK, cls)
    in_op = per_value(host["cat"], _OP_CATS.__contains__, False, bool) & ~step_annotations(trace)
    cls = np.where((cls < _LAUNCH) | in_op, cls, -1)
    own = (cls != _SYNC) & ~_waiting_frees(trace)
    cls = np.where((first_calls(trace) | first_launches(trace)) & own & ~varying_calls(trace), _WARMUP, cls)  # (slow again later)
    cls = np.where(slow_calls(trace) & own, _SLOW, cls)
    return np.where((compile_phases(trace) | compile_holders(trace)) & own, _COMPILE, cls).astype(np.int8)


@per_trace
def device_frees(trace: Trace) -> np.ndarray:
    """Boolean mask over the rows of ``trace.host_events``: the device frees (:data:`FREE_CALLS`), by name once per
    distinct name."""
    return per_value(trace.host_events["name"], FREE_CALLS.__contains__, False, bool)


def _waiting_frees(trace: Trace) -> np.ndarray:
    """Mask over ``trace.host_events``: the device frees (:data:`FREE_CALLS`) that were first or slow calls and spent at
    least half their time beside work on any device (they waited for it: a drain)."""
    free = device_frees(trace) & (first_calls(trace) | slow_calls(trace))
    if not free.any():
        return free
    occupied = list(occupied_intervals(trace).values())
    busy = iv.coverage_at_least(occupied, 1) if occupied else iv.empty()
    rows = np.flatnonzero(free)
    start, end = host_column(trace, "start_ns")[rows], host_column(trace, "end_ns")[rows]
    free[rows] = 2 * iv.measure(busy, start, end) >= end - start
    return free


@per_trace
def dispatching(trace: Trace) -> np.ndarray:
    """Boolean mask over the rows of ``trace.host_events`` of class ``launch`` (:func:`host_classes`) that dispatch
    device work: runtime and driver calls, and ``cpu_op`` events with a launch call (Kineto's correlation id,
    :func:`.launch_links.launch_rows`) inside them on their thread. The other ops of that class launched nothing:
    ``cpu_op``."""
    host = trace.host_events
    cls = host_classes(trace)
    if host.empty:
        return np.zeros(0, bool)
    start, end = host_column(trace, "start_ns"), host_column(trace, "end_ns")
    thread = host_thread_codes(trace)
    runtime = runtime_calls(trace)
    launching = np.zeros(len(host), bool)
    rows = launch_rows(trace)
    launching[rows[rows >= 0]] = True
    op = (cls == _LAUNCH) & ~runtime
    out = (cls == _LAUNCH) & runtime
    sel = np.flatnonzero(op)  # (a launch call inside the op on its thread: every thread in one sort, :mod:`traceprobe.keyed`)
    out[sel] = keyed.count_between(thread[launching], start[launching], thread[sel], start[sel], end[sel]) > 0
    return out


def top_name(trace: Trace, rows: np.ndarray, span: iv.Intervals) -> str:
    """Name of the host events (among ``rows``, int64 row numbers of ``trace.host_events``) whose time inside ``span``
    (a normalised int64 ns interval set) adds up to the most; ``""`` where none is inside it. A step annotation
    (``ProfilerStep#N``, :func:`step_annotations`) is never named, whatever its category: it holds its step's ops, it
    does not launch their work."""
    if rows.size:
        rows = rows[~step_annotations(trace)[rows]]
    if rows.size == 0 or span[0].size == 0:
        return ""
    over = iv.measure(span, host_column(trace, "start_ns")[rows], host_column(trace, "end_ns")[rows])
    hit = over > 0
    if not hit.any():
        return ""
    codes, names = host_name_codes(trace)
    c = codes[rows[hit]]
    ok = c >= 0
    if not ok.any():
        return ""
    total = np.bincount(c[ok], weights=over[hit][ok].astype(np.float64), minlength=len(names))
    return names[int(np.argmax(total))]


@per_trace
def program_calls(trace: Trace) -> np.ndarray:
    """Per row of ``trace.host_events``: the row of the outermost ``cpu_op`` on its thread that holds it (starts at or
    before it and ends at or after it): the op the program called (``aten::is_nonzero`` around ``aten::item`` around
    ``aten::_local_scalar_dense`` and its copy and stream sync), else the row itself. Ops are nested by Kineto's
    intervals; an op that overlaps another without being inside it starts a new outermost op; where two outermost ops
    hold an event (one at the end of one and the start of the next), the first is its call (int64). A step annotation
    (``ProfilerStep#N``, :func:`step_annotations`) is no op, whatever its category: it is never the op called."""
    host = trace.host_events
    out = np.arange(len(host), dtype=np.int64)
    if host.empty:
        return out
    start, end = host_column(trace, "start_ns"), host_column(trace, "end_ns")
    thread = host_thread_codes(trace)
    op = cpu_ops(trace) & ~step_annotations(trace)  # (a step holds calls, makes none)
    ops = np.flatnonzero(op)
    if ops.size == 0:
        return out
    ops = ops[np.lexsort((-end[ops], start[ops], thread[ops]))]  # (by thread, then by start, the longer first)
    # every thread at once (:mod:`traceprobe.keyed`): keys of one thread are contiguous, so a running maximum of the
    # end keys is each thread's running maximum of ends once past its first op
    k_end, k_start, k_row, k_row_end = keyed.keys((thread[ops], end[ops]), (thread[ops], start[ops]), (thread, start), (thread, end))
    run = np.maximum.accumulate(k_end)
    before = np.concatenate([[-1], run[:-1]])
    first = np.concatenate([[True], thread[ops][1:] != thread[ops][:-1]])
    keep = first | (k_end > before)  # (not inside an op before it on its thread)
    outer = ops[keep]
    # the outer ops of a thread end later as they start later, so those holding a row (starting at or before it and
    # ending at or after it) are a run ending at the last to start at or before it (k); the first of them (j: the first
    # to end at or after it) is the op called, as an event at the end of one op and the start of the next is held by both
    k = np.searchsorted(k_start[keep], k_row, "right") - 1
    j = np.searchsorted(k_end[keep], k_row_end, "left")
    held = (k >= 0) & (j <= k)  # (j and k then of the row's thread)
    out[held] = outer[j[held]]
    return out


def program_call_top(trace: Trace, rows: np.ndarray, span: iv.Intervals) -> str:
    """Name of the op the program called (:func:`program_calls`) whose synchronizing time inside ``span`` adds up to the
    most, of the host events ``rows``: what a sync's finding names (``aten::is_nonzero`` for ``if not
    torch.isfinite(norm)``, ``aten::item`` for ``loss.item()``)."""
    called = np.zeros(len(trace.host_events), bool)  # (the distinct calls, increasing: a mark per row, not a sort)
    called[program_calls(trace)[rows]] = True
    return top_name(trace, np.flatnonzero(called), span)


@per_trace
def _by_thread(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of ``trace.host_events`` by host thread (one stable sort): the rows, the distinct thread codes, and where
    each one's rows begin in them (one more entry than the codes: the end)."""
    thread = host_thread_codes(trace)
    order = np.argsort(thread, kind="stable")
    codes = iv.distinct(thread)
    return order, codes, np.searchsorted(thread[order], codes).tolist() + [order.size]


def thread_rows(trace: Trace, threads: tuple[int, ...]) -> np.ndarray:
    """The rows of ``trace.host_events`` on the host threads ``threads`` (codes of :func:`.busy.host_thread_codes`),
    increasing (int64); O(their rows), whatever the trace's size."""
    order, codes, bounds = _by_thread(trace)
    at = np.searchsorted(codes, np.asarray(threads, np.int64))
    parts = [order[bounds[i]:bounds[i + 1]] for i, t in zip(at.tolist(), threads) if i < codes.size and codes[i] == t]
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0, np.int64)


@per_trace
def class_spans(trace: Trace, threads: tuple[int, ...]) -> tuple[iv.Intervals, ...]:
    """Where the host threads ``threads`` (codes of :func:`.busy.host_thread_codes`) were in each host class, each
    nanosecond given to the first class of :data:`HOST_CAUSES` that holds it: the one classification the idle causes'
    host part and the dependency graph's host time per anchor read (computed once per trace and thread set).

    The classes, in order: ``graph_capture`` (inside a stream capture or a graph call, :func:`.graph_capture.graph_intervals`);
    ``sync`` to ``optimizer`` (inside a host event of that class, :func:`host_classes`; ``profiler`` the profiler's own
    work while the threads were in a host event, :func:`.warmup.profiler_spans`; ``warmup`` also holds the set-up
    before a first compile where a thread is outside any op, :func:`.warmup.setup_span`; ``optimizer`` is the optimizer's
    span outside the events in it that dispatch device work: an optimizer on the device spends its host time launching
    its kernels, which is ``launch``, and what is left is its Python and CPU work); ``launch`` (inside an event that
    dispatches device work, :func:`dispatching`); ``cpu_op`` (inside any other op). Of several threads, each
    nanosecond is the first class any of them is in; in a trace without device work, ``other_rank`` also holds the
    collectives that ran on any thread (gloo runs them on its own: :data:`_HOST_COLLECTIVE_RE`). ``host`` is what none holds: it is left to the caller, who knows
    the interval asked about.

    Returns:
        one normalised int64 ns interval set per class of ``HOST_CAUSES[:-1]``, disjoint.
    """
    host = trace.host_events
    if host.empty or not threads:
        return tuple(iv.empty() for _ in HOST_CAUSES[:-1])
    rows = thread_rows(trace, threads)  # (the threads' rows alone: a thread's spans cost its own events, not the trace's)
    start, end = host_column(trace, "start_ns")[rows], host_column(trace, "end_ns")[rows]
    thread = host_thread_codes(trace)[rows]
    on = np.ones(rows.size, bool)
    cls = host_classes(trace)[rows]
    capturing = graph_intervals(trace)

    def span(m: np.ndarray, where: np.ndarray = on) -> iv.Intervals:
        m = m & where
        return iv.union(start[m], end[m]) if m.any() else iv.empty()  # (a class the threads were never in: nothing)

    captured = [capturing[t] for t in threads if t in capturing]
    raw = [iv.coverage_at_least(captured, 1) if captured else iv.empty()]
    launching = dispatching(trace)[rows]
    raw += [span(cls == k) for k in range(_LAUNCH)]
    if (prof := profiler_spans(trace))[0].size:  # (the profiler's own work, while the threads were in a host event)
        raw[1 + _PROFILER] = iv.intersect(prof, span(cls >= 0))
    if raw[1 + _OPTIMIZER][0].size:  # (an optimizer's launches are dispatch, thread by thread)
        raw[1 + _OPTIMIZER] = iv.coverage_at_least([iv.subtract(span(cls == _OPTIMIZER, thread == t), span(launching, thread == t))
                                                    for t in threads], 1)
    if trace.device_events.empty:  # (a CPU-only job: its threads wait, outside any op, for a collective on the library's own thread)
        every = host_classes(trace) == _OTHER_RANK  # (on any thread, not only ``threads``)
        raw[1 + _OTHER_RANK] = iv.coverage_at_least([raw[1 + _OTHER_RANK], iv.union(host_column(trace, "start_ns")[every],
                                                                                     host_column(trace, "end_ns")[every])], 1)
    raw += [span(launching), span(cls >= 0)]  # (cpu_op: any op left)
    setup = setup_span(trace)  # (a thread outside any op, before a first compile: set-up, warm-up)
    if setup[0].size:
        idle = [iv.subtract(iv.subtract(setup, capturing.get(t, iv.empty())), span(cls >= 0, thread == t)) for t in threads]
        raw[1 + _WARMUP] = iv.coverage_at_least([raw[1 + _WARMUP], *idle], 1)
    out, taken = [], iv.empty()
    for s in raw:
        if s[0].size == 0:  # (nothing of this class: nothing to take or give)
            out.append(s)
            continue
        out.append(iv.subtract(s, taken) if taken[0].size else s)
        taken = iv.coverage_at_least([taken, s], 1) if taken[0].size else s
    return tuple(out)
