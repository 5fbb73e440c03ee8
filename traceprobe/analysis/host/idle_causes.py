"""Why each device was idle: the cause of every idle nanosecond, read from what the host was doing.

Definitions (quoted by docs/measures.md). For a device d and a window W, the idle time
is W minus the union of all of d's device work, *including* work set aside from
the figures (:mod:`.profiled`: work launched outside the profiled steps still
occupies the device). Each idle *gap* ends where the next device work starts;
that work was launched by a host runtime call (Kineto's correlation id) on one
host thread, the *launching thread*. Then:

- if the work was launched before the gap began, the device had the work and
  waited: the whole gap is ``dependency`` where the dependency graph binds the
  work's start to the end of another stream's work (its edge,
  :func:`..causal.dependency_graph.waited_for_rows`: a recorded event wait,
  ``cudaStreamWaitEvent``/``hipStreamWaitEvent``, or one inferred; named by that
  work's kernel), else ``queued`` (the trace does not show what it waited for:
  an event outside it, a full queue, the device's own scheduling). Each gap's
  cause is thus the first step back from the work that ended it on the critical
  path (:mod:`..causal.critical_path`): its launch, its dependency, or the host;
- otherwise the gap splits at the launch call's end. From the gap's start to
  the call's end the device waited for the host, and that part is classified by
  what the launching thread was doing, each nanosecond by the first class that
  holds it, in the order below (the launch call's own time is ``launch``, unless
  the call runs inside something of an earlier class: a first call's launch that
  loads the kernel's code for 300 ms is ``warmup``). For
  :data:`LAUNCH_LATENCY_NS` after the call's end the device waited for the launch
  itself (``launch``); after that, until the work's start, it waited on
  something else (``dependency`` or ``queued``, as above). The order:

  0. ``graph_capture``: inside a stream capture (:mod:`.graph_capture`:
     ``cudaStreamBeginCapture`` ... ``cudaStreamEndCapture``: what the host launched
     there was recorded into a graph, not run), or instantiating, uploading, updating
     or destroying a graph (``cudaGraphInstantiate*``, ``cudaGraphExecDestroy``, ...);
  1. ``sync``: a synchronizing call: a runtime or driver call whose name holds
     ``Synchronize``, a synchronous copy (:data:`.host_classes.SYNC_CALLS`: ``cudaMemcpy``,
     ``hipMemcpyWithStream``, ...), or ``aten::item``/``aten::_local_scalar_dense``
     (``.item()``, ``.cpu()`` and printing a tensor end there);
  2. ``profiler``: inside a host event while the profiler did its own work (:func:`.warmup.profiler_spans`: CUPTI's
     ``Activity Buffer Request``, its instrumentation and resources set up: the profiler's start-up and buffers);
  3. ``compile``: inside a phase of ``torch.compile``'s compilation (:func:`.warmup.compile_phases`), or an op holding
     one that launches nothing outside it (:func:`.warmup.compile_holders`: Dynamo's frame callback);
  4. ``slow_call``: inside a call that launches device work and ran far slower than its name's median
     (:func:`.warmup.slow_calls`: a new shape's cuDNN/cuBLAS plan or autotuning, recurring where shapes keep changing);
  5. ``warmup``: inside the first call of an op that took at least ten times its later calls (:mod:`.warmup`: context
     creation, lazy kernel loading, library handles: one-time work a schedule's first steps would have left out); and,
     in a trace without ``ProfilerStep`` annotations, the time outside any op before the trace's first compile phase
     (set-up: :func:`.warmup.setup_span`);
  6. ``pinned_alloc``: page-locked host allocation (:data:`.host_classes.PINNED_ALLOC_CALLS`:
     ``cudaHostAlloc``, ``cudaMallocHost``, ``hipHostMalloc``, ...);
  7. ``device_alloc``: device allocation or free (:data:`.host_classes.DEVICE_ALLOC_CALLS`);
  8. ``other_rank``: a host op that waits for other ranks (barriers, c10d waits, gloo);
  9. ``data_loading``: ``enumerate(DataLoader)#...`` (torch's DataLoader iterator);
  10. ``optimizer``: ``Optimizer.step#...`` / ``Optimizer.zero_grad#...`` on the host;
  11. ``launch``: inside any other runtime or driver call, or a ``cpu_op`` that launched device work (a launch call
      inside it on its thread, :func:`.host_classes.dispatching`): the host was busy launching (framework overhead,
      small kernels: launch-bound);
  12. ``cpu_op``: inside any other ``cpu_op``: one that launched no device work (CPU work such as an op on a CPU
      tensor: not launch-bound, the host was computing);
  13. ``host``: outside every profiled op (Python, I/O, ``time.sleep``).

Each host event's class is :func:`.host_classes.host_classes`', and each nanosecond's :func:`.host_classes.class_spans`':
the one classification the dependency graph's host time per anchor reads too.

- gaps whose next work has no launch in the trace, and the time after a device's
  last work, are ``unattributed``.

The causes' spans are disjoint and their lengths sum to the device's idle time
exactly (int64 ns). HolisticTraceAnalysis's idle-time breakdown (host wait,
kernel wait, other) is the anchor; it classifies gaps between kernels of one
stream, while we classify the gaps of the whole device, and split HTA's "host
wait" by what the host was doing. TraceLens reports idle time as one figure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..causal.dependency_graph import waited_for_rows
from ..device.busy import host_thread_codes, occupied_intervals, runtime_calls
from ..memo import device_column, host_column, per_trace
from .graph_capture import captures, graph_calls
from .host_classes import CAUSES, EVENT_CAUSES, HOST_CAUSES, class_spans, dispatching, host_classes, program_call_top, top_name
from .launch_links import launch_rows
from .python_frames import frame_holding, thread_labels
from .warmup import compile_holders, profiler_top

Intervals = iv.Intervals
_SYNC, _COMPILE, _LAUNCH = EVENT_CAUSES.index("sync"), EVENT_CAUSES.index("compile"), EVENT_CAUSES.index("launch")
_NEVER = np.iinfo(np.int64).max

QUEUED_LABEL = "queued wait"
"""How a finding and the critical path name the ``queued`` cause (:mod:`..causal.critical_path`)."""

LAUNCH_LATENCY_NS = 50_000
"""Time after a launch call returns within which the device starting the work counts as launch latency (``launch``);
work that starts later waited on something else (``queued``). 50 µs: kernel launch latency on current GPUs is a few µs
to tens of µs."""


@dataclass(frozen=True)
class DeviceIdle:
    """The idle time of one device over a window, by cause (module docstring).

    Attributes:
        device: device index.
        window: (lo, hi) in ns.
        spans: per cause of :data:`.host_classes.CAUSES`, a normalised int64 ns interval set;
            the sets are disjoint and their union is the device's idle time.
        top: per cause, the host op or call that held the most of its time on the
            launching threads (``""`` where none: ``host``, ``unattributed``).
        queued_stream: the stream whose work waited longest while queued (-1 none).
    """

    device: int
    window: tuple[int, int]
    spans: dict[str, Intervals]
    top: dict[str, str]
    queued_stream: int = -1

    def ns(self, cause: str, lo: int | None = None, hi: int | None = None) -> int:
        """Length of one cause's span in ns, within [lo, hi) if given."""
        s = self.spans[cause]
        if lo is None or hi is None:
            return iv.length(s)
        return int(iv.measure(s, np.array([lo]), np.array([hi]))[0])


def idle_causes(trace: Trace, window: tuple[int, int] | None = None) -> list[DeviceIdle]:
    """The idle time of every device with device events over ``window``, by cause (module docstring).

    Args:
        trace: the trace (its device events the figures count; the device time of
            work set aside from it still counts as occupied, see
            :func:`.busy.occupied_intervals`).
        window: (lo, hi) in ns; default the trace window.

    Returns:
        one :class:`DeviceIdle` per device, sorted by device; computed once per
        trace and window.
    """
    lo, hi = trace.window_ns if window is None else window
    return _idle_causes(trace, (int(lo), int(hi)))


@per_trace
def _idle_causes(trace: Trace, window: tuple[int, int]) -> list[DeviceIdle]:
    lo, hi = window
    if trace.device_events.empty:
        return []
    whole = (np.array([lo], np.int64), np.array([hi], np.int64))
    occupied = occupied_intervals(trace)
    dev = device_column(trace, "device")
    start, end = device_column(trace, "start_ns"), device_column(trace, "end_ns")
    stream = device_column(trace, "stream")
    rows = launch_rows(trace)
    host = trace.host_events
    h_start = host_column(trace, "start_ns") if len(host) else np.zeros(0, np.int64)
    h_end = host_column(trace, "end_ns") if len(host) else np.zeros(0, np.int64)
    thread = host_thread_codes(trace) if len(host) else np.zeros(0, np.int64)
    cls = host_classes(trace)
    runtime = runtime_calls(trace) if len(host) else np.zeros(0, bool)
    waited_for = waited_for_rows(trace)
    dispatch = dispatching(trace)
    out = []
    # each device's events of non-zero length, by one stable sort (not a mask over every event per device)
    valid = np.flatnonzero(end > start)
    by_dev = valid[np.argsort(dev[valid], kind="stable")]
    devices = iv.distinct(dev)
    first = np.searchsorted(dev[by_dev], devices, side="left").tolist()
    last = np.searchsorted(dev[by_dev], devices, side="right").tolist()
    for i, d in enumerate(devices.tolist()):
        busy = iv.intersect(occupied.get(int(d), iv.empty()), whole)
        idle = iv.subtract(whole, busy)
        spans = {c: iv.empty() for c in CAUSES}
        top: dict[str, str] = dict.fromkeys(CAUSES, "")
        q_stream = -1
        if idle[0].size:
            gs, ge = idle
            # the work that ended each gap: among d's events starting exactly at the gap's end, the earliest launched
            on = by_dev[first[i]:last[i]]
            launched = np.where(rows[on] >= 0, h_start[np.maximum(rows[on], 0)], _NEVER) if h_start.size else np.full(on.size, _NEVER)
            order = on[np.lexsort((launched, start[on]))]  # by start, then launch time
            first_start, first_idx = np.unique(start[order], return_index=True)
            pos = np.searchsorted(first_start, ge)
            hit = (pos < first_start.size) & (ge < hi)  # the gap after the device's last work in the window ends nothing
            hit[hit] = first_start[pos[hit]] == ge[hit]
            nxt = np.full(gs.size, -1, np.int64)
            nxt[hit] = order[first_idx[pos[hit]]]
            lrow = np.where(nxt >= 0, rows[np.maximum(nxt, 0)], -1)
            has = lrow >= 0
            launch_at = np.where(has, h_start[np.maximum(lrow, 0)] if h_start.size else 0, 0)
            launch_end = np.where(has, h_end[np.maximum(lrow, 0)] if h_end.size else 0, 0)
            before = has & (launch_at <= gs)  # launched before the gap began: queued throughout
            split = np.where(has & ~before, np.clip(launch_at, gs, ge), ge)
            # from the launch to its call's end plus LAUNCH_LATENCY_NS, the device waited for the launch itself
            latency_end = np.where(has & ~before, np.clip(launch_end + LAUNCH_LATENCY_NS, split, ge), ge)
            call_end = np.where(has & ~before, np.clip(launch_end, split, ge), gs)  # (the call's own time: by its class)
            spans["unattributed"] = iv.union(gs[~has], ge[~has])
            # work launched already: it waited for another stream's work where the dependency graph binds it so
            q_lo = np.concatenate([gs[before], latency_end[has & ~before]])
            q_hi = np.concatenate([ge[before], ge[has & ~before]])
            producer = np.where(nxt >= 0, waited_for[np.maximum(nxt, 0)], -1) if waited_for.size else np.full(gs.size, -1)
            q_prod = np.concatenate([producer[before], producer[has & ~before]])
            spans["dependency"] = iv.union(q_lo[q_prod >= 0], q_hi[q_prod >= 0])
            queued = iv.union(q_lo[q_prod < 0], q_hi[q_prod < 0])
            spans["queued"] = queued
            if (q_prod >= 0).any():  # (named by the producer's kernel holding the most of it)
                codes, uniq = pd.factorize(trace.device_events["name"].iloc[q_prod[q_prod >= 0]].astype(str).to_numpy())
                held_by_name = np.bincount(codes, weights=(q_hi - q_lo)[q_prod >= 0].astype(np.float64))
                top["dependency"] = str(uniq[int(np.argmax(held_by_name))])
            launching = iv.union(call_end[has & ~before], latency_end[has & ~before])
            split = np.where(before, gs, split)
            if has.any():
                qlen = np.where(has, ge - split, 0)
                q_stream = int(stream[nxt[int(np.argmax(qlen))]]) if qlen.max() > 0 else -1
            host_part_s, host_part_e, host_thread = gs[has], call_end[has], thread[lrow[has]] if thread.size else np.zeros(0, np.int64)
            parts: dict[str, list[iv.Intervals]] = {c: [spans[c]] for c in HOST_CAUSES}
            by_thread = np.argsort(host_thread, kind="stable")  # (each thread's gaps by one sort, not a mask per thread)
            cuts = np.flatnonzero(np.diff(host_thread[by_thread])) + 1
            for sel in np.split(by_thread, cuts) if by_thread.size else []:  # (each ns by the first class its thread was in)
                remaining = iv.union(host_part_s[sel], host_part_e[sel])
                for cause, held in zip(HOST_CAUSES, class_spans(trace, (int(host_thread[sel[0]]),))):
                    if remaining[0].size == 0 or held[0].size == 0:  # (nothing left, or a class the thread was never in)
                        continue
                    part = iv.intersect(remaining, held)
                    remaining = iv.subtract(remaining, part)
                    parts[cause].append(part)
                parts["host"].append(remaining)
            for cause, sets in parts.items():  # (one union per cause, not one per thread)
                spans[cause] = iv.coverage_at_least(sets, 1)
            spans["launch"] = iv.coverage_at_least([spans["launch"], launching], 1)
            launched_by = iv.distinct(host_thread)
            threads_on = np.isin(thread, launched_by) if thread.size else np.zeros(0, bool)
            for k, cause in enumerate(EVENT_CAUSES):
                # launch-bound time is named by its innermost-looking op: a cpu_op, not the runtime call inside it
                m = threads_on & ((cls == k) if k < _LAUNCH else (dispatch if k == _LAUNCH else (cls == _LAUNCH) & ~dispatch) & ~runtime)
                m &= ~compile_holders(trace) if k == _COMPILE else True  # (a compile named by its phase, not its holder)
                top[cause] = (program_call_top if k == _SYNC else top_name)(trace, np.flatnonzero(m), spans[cause])
            if spans["graph_capture"][0].size:  # the capture's begin call, else the graph call that held the most
                c = captures(trace)
                top["graph_capture"] = str(c["begin"].iloc[0]) if len(c) else top_name(
                    trace, np.flatnonzero(threads_on & graph_calls(trace)), spans["graph_capture"])
            top["profiler"] = profiler_top(trace, spans["profiler"])  # (the profiler's record, not the op it held up)
            top["queued"] = top_name(trace, np.flatnonzero(threads_on & runtime), queued)
            if not top["host"] and not trace.python_events.empty:  # (the Python function, where the trace has stacks)
                top["host"] = frame_holding(trace, spans["host"], thread_labels(trace, launched_by))
        out.append(DeviceIdle(int(d), (lo, hi), spans, top, q_stream))
    return out


TABLE_COLUMNS = ["device", "step", "cause", "ns", "top"]


def idle_cause_table(trace: Trace, steps: pd.DataFrame | None = None, window: tuple[int, int] | None = None) -> pd.DataFrame:
    """The idle causes as a table: per device over the window, and per device and step.

    Args:
        steps: DataFrame with ``step``, ``start_ns``, ``end_ns`` (int64), e.g.
            :func:`.steps.step_windows`; None or empty for the window alone.
        window: (lo, hi) in ns; default the trace window.

    Returns:
        DataFrame: ``device`` (int64), ``step`` (int64, -1 for the whole window),
        ``cause`` (str, :data:`.host_classes.CAUSES`), ``ns`` (int64), ``top`` (str, the host op
        or call that held most of it, ``""`` if none). Rows with ``ns`` = 0 are
        left out; per device and step the causes sum to its idle time.
    """
    idle = idle_causes(trace, window)
    size, nc = len(idle), len(CAUSES)
    if steps is None or steps.empty:
        lo = hi = step_ids = np.zeros(0, np.int64)
    else:
        lo, hi = steps["start_ns"].to_numpy(np.int64), steps["end_ns"].to_numpy(np.int64)
        step_ids = steps["step"].to_numpy(np.int64)
    # every device and cause at once (grouped sets keyed by device position): the window's total, each step's part
    total = np.zeros((size, nc), np.int64)
    per_step = np.zeros((size, nc, lo.size), np.int64)
    for j, c in enumerate(CAUSES):
        sets = [d.spans[c] for d in idle]
        keys = np.repeat(np.arange(size, dtype=np.int64), [x[0].size for x in sets])
        s = np.concatenate([x[0] for x in sets]) if sets else np.zeros(0, np.int64)
        e = np.concatenate([x[1] for x in sets]) if sets else np.zeros(0, np.int64)
        np.add.at(total[:, j], keys, e - s)  # (exact int64, unlike bincount's float weights)
        if lo.size:
            per_step[:, j, :] = iv.grouped_measure(keys, s, e, lo, hi, size)
    top = np.array([[d.top[c] for c in CAUSES] for d in idle], dtype=object).reshape(size, nc)
    # rows per device: the window's causes (step -1), then each cause's steps; rows of 0 ns left out
    dpos, cpos = np.meshgrid(np.arange(size), np.arange(nc), indexing="ij")
    w_keep = total > 0
    sd, sc, ss = np.meshgrid(np.arange(size), np.arange(nc), np.arange(lo.size), indexing="ij")
    s_keep = per_step > 0
    dev_ids = np.array([d.device for d in idle], dtype=np.int64)
    d_all = np.concatenate([dpos[w_keep], sd[s_keep]])
    c_all = np.concatenate([cpos[w_keep], sc[s_keep]])
    block = np.concatenate([np.zeros(int(w_keep.sum()), np.int64), np.ones(int(s_keep.sum()), np.int64)])
    st_all = np.concatenate([np.full(int(w_keep.sum()), -1, np.int64), ss[s_keep]])
    order = np.lexsort((st_all, c_all, block, d_all))
    d_all, c_all, block, st_all = d_all[order], c_all[order], block[order], st_all[order]
    ns = np.concatenate([total[w_keep], per_step[s_keep]])[order]
    return pd.DataFrame({
        "device": dev_ids[d_all] if size else np.zeros(0, np.int64),
        "step": np.where(block == 0, -1, step_ids[np.maximum(st_all, 0)] if step_ids.size else -1).astype(np.int64),
        "cause": pd.Series(np.array(CAUSES, dtype=object)[c_all], dtype=object),
        "ns": ns.astype(np.int64),
        "top": pd.Series(top[d_all, c_all] if size else np.zeros(0, object), dtype=object),
    })
