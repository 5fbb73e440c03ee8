"""Warm-up: the one-time work of a process's first calls, caught in the profiled window.

The first call of an operation does work its later calls do not: the CUDA runtime creates the
device's context at the first runtime call (CUDA Programming Guide, "Initialization"), kernels are
loaded on their first launch (CUDA's lazy loading, the default since CUDA 12.2), cuDNN and cuBLAS
create their handles and pick algorithms on first use, ``torch.compile`` compiles on the first call,
NCCL creates a communicator at a process group's first collective, an optimizer creates its state
at its first step, a DataLoader starts its workers at its first ``next``. A trace recorded from the
process's start (``with torch.profiler.profile(...)`` around a whole script, with no
``schedule``) holds all of it: torch.profiler's ``schedule(wait, warmup, active)`` exists to leave
the first steps out.

Two kinds of host events hold warm-up (:func:`warmup_calls`):

- a *first call*: the first host event of its name in the trace (``cpu_op``, runtime or driver
  call, user annotation), when the same name is called at least :data:`MIN_LATER_CALLS` more times,
  and the first call lasted at least :data:`MIN_FIRST_NS` and at least :data:`FACTOR` times the
  median of the later ones (:func:`first_calls`). A name called once (``ProfilerStep#N``, a
  script's one ``forward``) says nothing about warm-up: it has no later calls to compare with;
- a *first launch*: the launch call (runtime or driver) of a kernel name's first launch in the trace, where it
  lasted at least :data:`LAUNCH_FACTOR` times the median of its call name's launches (:func:`first_launches`): the
  runtime loads a kernel's module at its first launch (CUDA's lazy loading; HIP loads code objects the same way), a
  one-time cost of a kind no fixed floor catches (HTA's ``mi250_minitoy`` trace: one ``hipLaunchKernel`` of 6.5 ms
  among launches of 6 µs);
- a phase of ``torch.compile``'s compilation: an op named ``<phase> (dynamo_timed)``, which
  ``torch._dynamo.utils.dynamo_timed`` records for every compile phase while a profiler runs
  (``_compile.compile_inner``, ``compile_fx_inner``, ``backward._backward_impl``, ...; PyTorch's
  ``test/dynamo/test_profiler.py`` checks that naming). A compilation after the first steps is a
  recompilation, one-time per new guard, still compile time; and an op holding such a phase that launches no device
  work outside the phases (Dynamo's frame callback ``dynamo``, ``entire_frame_compile``: :func:`compile_holders`), whose
  own time around the phases (recompile bookkeeping, installing the new cache entry) is there only because it compiled.

Each call is judged by its own time, less the profiler's (:func:`own_ns`): CUPTI's records of its own work
(:data:`PROFILER_OVERHEAD`: its activity buffers requested, its instrumentation set up at start) that lie inside a
call are the profiler's start-up, host class ``profiler`` (:func:`profiler_spans`), never the program's warm-up; the
first launches after the profiler starts wait for them (``sample_traces/h200-4gpu/branches.synchronized``: a 721 µs
``Activity Buffer Request`` inside its first ``aten::addmm``, recorded after the workload had run four times).

The idle time of a device while its launching thread was inside either is the idle cause
``warmup`` (:mod:`.idle_causes`), except where it was in a synchronizing call, which stays ``sync``.
So is, in a trace without ``ProfilerStep`` annotations (a whole script profiled), the launching
thread's time outside any op before the trace's first compile phase (:func:`setup_span`): nothing has
run a step yet, the model is being built and ``torch.compile`` set up (its first use imports Dynamo
and Inductor: 3.2 s outside any op in ``sample_traces/causes/compile-startup``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ... import intervals as iv
from ... import keyed
from ...reading import Trace
from ..device.busy import cpu_ops, host_name_codes, host_thread_codes, per_value, runtime_calls
from ..memo import host_column, per_trace
from .launch_links import launch_rows

MIN_LATER_CALLS = 2
"""Later calls of a name needed to judge its first call."""
MIN_FIRST_NS = 10_000_000
"""Shortest first call taken as warm-up (10 ms): steady calls that run longer on their own (a large copy) are rarer."""
FACTOR = 10
"""How many times the median of its later calls a first call must last to be warm-up."""
LAUNCH_FACTOR = 100
"""How many times the median of its call name's launches a kernel's first launch must last to be warm-up (module
docstring): a launch that waits for a slot in a full queue lasts about one kernel, and is no first launch of its
kernel in a steady loop."""
PROFILER_OVERHEAD = frozenset({"Activity Buffer Request", "Buffer Flush", "Instrumentation", "Resource", "UVM Activity Init"})
"""The names of CUPTI's overhead records (Kineto ``cat`` ``overhead``, CUPTI's ``CUpti_ActivityOverheadKind``) that are the
profiler's own work: its activity buffers requested and flushed, its instrumentation, resources and unified-memory
tracking set up. The others are the program's, profiled or not: ``Lazy Function Loading`` and ``Runtime Triggered
Module Loading`` (the driver loading a kernel's code at its first launch: warm-up), ``Command Buffer Full`` (the
launch queue full), ``Driver Compiler`` (JIT compilation)."""
COMPILE_SUFFIX = " (dynamo_timed)"
"""The end of the name of every phase of ``torch.compile``'s compilation in a trace (module docstring)."""


@per_trace
def profiler_spans(trace: Trace) -> iv.Intervals:
    """Where the profiler did its own work: the union of the trace's overhead records named in
    :data:`PROFILER_OVERHEAD` (``trace.overhead_events``), a normalised int64 ns interval set; empty without them."""
    ov = trace.overhead_events
    if ov.empty:
        return iv.empty()
    own = per_value(ov["name"], PROFILER_OVERHEAD.__contains__, False, bool)
    return iv.union(ov["start_ns"].to_numpy(np.int64)[own], ov["end_ns"].to_numpy(np.int64)[own])


@per_trace
def own_ns(trace: Trace) -> np.ndarray:
    """Per row of ``trace.host_events``: its duration less the profiler's own work inside it (:func:`profiler_spans`),
    int64 ns: what the call itself took."""
    start, end = host_column(trace, "start_ns"), host_column(trace, "end_ns")
    spans = profiler_spans(trace)
    return end - start - (iv.measure(spans, start, end) if spans[0].size else 0)


def profiler_top(trace: Trace, span: iv.Intervals) -> str:
    """The name of the profiler's overhead records (:data:`PROFILER_OVERHEAD`) holding most of ``span`` (a normalised
    interval set), e.g. ``Activity Buffer Request``; ``""`` where none is in it."""
    ov = trace.overhead_events
    if ov.empty or span[0].size == 0:
        return ""
    own = np.flatnonzero(per_value(ov["name"], PROFILER_OVERHEAD.__contains__, False, bool))
    held = iv.measure(span, ov["start_ns"].to_numpy(np.int64)[own], ov["end_ns"].to_numpy(np.int64)[own])
    if not (held > 0).any():
        return ""
    names = ov["name"].astype(str).to_numpy()[own]
    kinds, at = np.unique(names, return_inverse=True)
    return str(kinds[int(np.argmax(np.bincount(at, weights=held.astype(np.float64))))])


@per_trace
def warmup_calls(trace: Trace) -> np.ndarray:
    """Boolean mask over the rows of ``trace.host_events``: first calls, compile phases and the ops holding them (module
    docstring)."""
    return first_calls(trace) | first_launches(trace) | compile_phases(trace) | compile_holders(trace)


@per_trace
def first_launches(trace: Trace) -> np.ndarray:
    """Boolean mask over the rows of ``trace.host_events``: the launch calls of a kernel name's first launch in the
    trace that lasted at least :data:`LAUNCH_FACTOR` times the median launch of their call name, which is called at
    least :data:`MIN_LATER_CALLS` more times (module docstring)."""
    host, ev = trace.host_events, trace.device_events
    out = np.zeros(len(host), dtype=bool)
    if host.empty or ev.empty:
        return out
    rows = launch_rows(trace)
    linked = np.flatnonzero(rows >= 0)
    if linked.size == 0:
        return out
    kernel = pd.factorize(ev["name"].astype(str))[0][linked] if not isinstance(ev["name"].dtype, pd.CategoricalDtype) else \
        ev["name"].cat.codes.to_numpy(np.int64)[linked]
    call = rows[linked]
    start = host_column(trace, "start_ns")
    order = np.lexsort((start[call], kernel))
    k = kernel[order]
    at = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])  # (where each kernel name's launches begin)
    firsts = iv.distinct(call[order][at])  # (the call of each kernel name's earliest launch)
    code = host_name_codes(trace)[0]
    dur = own_ns(trace)  # (less the profiler's own work inside the call)
    calls = iv.distinct(call)
    c, d = code[calls], dur[calls]
    o = np.lexsort((d, c))
    first = np.flatnonzero(np.r_[True, c[o][1:] != c[o][:-1]])  # (each call name's calls, by duration: sorted runs)
    names, count = c[o][first], np.diff(np.r_[first, o.size])
    sd = d[o]
    median = (sd[first + (count - 1) // 2] + sd[first + count // 2]) / 2
    pos = np.searchsorted(names, code[firsts])
    hit = (count[pos] > MIN_LATER_CALLS) & (dur[firsts] >= LAUNCH_FACTOR * median[pos])
    out[firsts[hit]] = True
    return out


@per_trace
def compile_phases(trace: Trace) -> np.ndarray:
    """Boolean mask over the rows of ``trace.host_events``: the phases of ``torch.compile``'s compilation."""
    if trace.host_events.empty:
        return np.zeros(0, dtype=bool)
    return per_value(trace.host_events["name"], lambda n: str(n).endswith(COMPILE_SUFFIX), False, bool)


@per_trace
def compile_holders(trace: Trace) -> np.ndarray:
    """Boolean mask over the rows of ``trace.host_events``: the ops (``cpu_op``) that hold a compile phase on their thread
    and launch no device work outside compile phases (Dynamo's frame callback, ``dynamo``, and ``entire_frame_compile``
    around ``_compile.compile_inner``): their own time around the phases (Dynamo's recompile bookkeeping before
    ``compile_inner``, installing the new cache entry, compile metrics after it) exists only because the frame
    compiled, and is compilation too. An op that also runs work (a ``Torch-Compiled Region`` whose frame calls a
    nested frame that recompiles) launches outside the phases and is not one."""
    host = trace.host_events
    out = np.zeros(len(host), dtype=bool)
    phases = compile_phases(trace)
    if not phases.any():
        return out
    start, end = host_column(trace, "start_ns"), host_column(trace, "end_ns")
    thread = host_thread_codes(trace)
    op = cpu_ops(trace) & ~phases
    rows = launch_rows(trace)
    launching = np.zeros(len(host), bool)
    launching[rows[rows >= 0]] = True
    launching &= runtime_calls(trace)
    for t in iv.distinct(thread[phases]).tolist():
        ph = phases & (thread == t)
        ps = np.sort(start[ph])
        inside = iv.union(start[ph], end[ph])
        calls = np.flatnonzero(launching & (thread == t))
        at = start[calls]
        j = np.searchsorted(inside[0], at, "right") - 1  # (a launch inside a phase: autotuning's benchmarks)
        outside = np.sort(at[(j < 0) | (at >= inside[1][np.maximum(j, 0)])]) if inside[0].size else np.sort(at)  # (phases of 0 ns)
        sel = np.flatnonzero(op & (thread == t))
        holds = np.searchsorted(ps, end[sel], "right") > np.searchsorted(ps, start[sel], "left")
        runs = np.searchsorted(outside, end[sel], "right") > np.searchsorted(outside, start[sel], "left")
        out[sel[holds & ~runs]] = True
    return out


@per_trace
def setup_span(trace: Trace) -> iv.Intervals:
    """From 0 ns to the start of the trace's first compile phase (:func:`compile_phases`), where the trace has no
    ``ProfilerStep`` annotations (module docstring); empty where it has steps or no compile phase."""
    phases = compile_phases(trace)
    if not phases.any() or not trace.steps.empty:
        return iv.empty()
    return np.array([0], np.int64), np.array([host_column(trace, "start_ns")[phases].min()], np.int64)


@per_trace
def first_calls(trace: Trace) -> np.ndarray:
    """Boolean mask over the rows of ``trace.host_events``: the first calls holding warm-up (module docstring)."""
    host = trace.host_events
    out = np.zeros(len(host), dtype=bool)
    if host.empty:
        return out
    code = host_name_codes(trace)[0]
    dur = own_ns(trace)  # (less the profiler's own work inside the call)
    rows = np.flatnonzero(np.isin(code, code[dur >= MIN_FIRST_NS]) & (code >= 0))  # every call of a name called long once
    code, dur = code[rows], dur[rows]
    _, first = np.unique(code, return_index=True)  # (rows are sorted by start: the earliest call of each name)
    later = np.ones(rows.size, dtype=bool)
    later[first] = False
    order = np.lexsort((dur[later], code[later]))  # later calls by name, then duration
    lc, ld = code[later][order], dur[later][order]
    names, at, count = np.unique(lc, return_index=True, return_counts=True)
    median = (ld[at + (count - 1) // 2] + ld[at + count // 2]) / 2
    row = first[np.searchsorted(code[first], names)]  # the first call of each name that has later calls
    hit = (count >= MIN_LATER_CALLS) & (dur[row] >= MIN_FIRST_NS) & (dur[row] >= FACTOR * median)
    out[rows[row[hit]]] = True
    return out



SLOW_CALL_NS = 5_000_000
"""Shortest later call taken as a slow call (5 ms)."""


@per_trace
def slow_calls(trace: Trace) -> np.ndarray:
    """Boolean mask over the rows of ``trace.host_events``: *slow calls*, the calls far slower than their name's median
    (:func:`varying_calls`) of ops that launch device work (a launch call inside them on their thread,
    :func:`launching_ops`): the first call of a new shape, for which cuDNN and cuBLAS build a plan or autotune. Unlike
    warm-up it recurs where shapes keep changing. An op that launches nothing is left out, however slow: its host time
    is its own computation on the CPU, which grows with its input (a wider first layer than the later ones of one
    ``aten::linear``: ``sample_traces/h200-4gpu/branches.synchronized``'s CPU branch), where an op that launches
    spends about the same host time whatever its input's size; it is CPU work (``cpu_op``)."""
    return varying_calls(trace) & launching_ops(trace)


@per_trace
def launching_ops(trace: Trace) -> np.ndarray:
    """Boolean mask over the rows of ``trace.host_events``: the ops (``cpu_op``) with a launch call (Kineto's correlation
    id, :func:`.launch_links.launch_rows`) inside them on their thread."""
    host = trace.host_events
    if host.empty or trace.device_events.empty:
        return np.zeros(len(host), bool)
    start, end = host_column(trace, "start_ns"), host_column(trace, "end_ns")
    thread = host_thread_codes(trace)
    launching = np.zeros(len(host), bool)
    rows = launch_rows(trace)
    launching[rows[rows >= 0]] = True
    launching &= runtime_calls(trace)
    out = np.zeros(len(host), bool)
    sel = np.flatnonzero(cpu_ops(trace))
    out[sel] = keyed.count_between(thread[launching], start[launching], thread[sel], start[sel], end[sel]) > 0
    return out


@per_trace
def varying_calls(trace: Trace) -> np.ndarray:
    """Boolean mask over the rows of ``trace.host_events``: the calls of an op (``cpu_op``) called at least three times
    that lasted at least :data:`SLOW_CALL_NS` and :data:`FACTOR` times the median of all its calls (each less the
    profiler's own work inside it, :func:`own_ns`), other than a first call (:func:`first_calls`) unless a later call
    of its name is slow too: the first call of a new shape, or an input of another size. Such a first call is no
    warm-up (:func:`.host_classes.host_classes`)."""
    host = trace.host_events
    out = np.zeros(len(host), dtype=bool)
    if host.empty:
        return out
    code = host_name_codes(trace)[0]
    op = cpu_ops(trace)
    dur = own_ns(trace)  # (less the profiler's own work inside the call)
    rows = np.flatnonzero(op & (code >= 0) & np.isin(code, code[op & (dur >= SLOW_CALL_NS)]))
    if rows.size == 0:
        return out
    c, d = code[rows], dur[rows]
    order = np.lexsort((d, c))
    sc, sd = c[order], d[order]
    names, at, count = np.unique(sc, return_index=True, return_counts=True)
    median = (sd[at + (count - 1) // 2] + sd[at + count // 2]) / 2
    pos = np.searchsorted(names, c)
    hit = (count[pos] >= 3) & (d >= SLOW_CALL_NS) & (d >= FACTOR * median[pos])
    out[rows[hit]] = True
    first = first_calls(trace)
    later = out & ~first
    return later | (first & np.isin(code, code[later]))  # a first call of a name slow again later is one of them
