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
from ...reading import Trace
from ..device.busy import host_name_codes, host_thread_codes, per_value, runtime_calls
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
COMPILE_SUFFIX = " (dynamo_timed)"
"""The end of the name of every phase of ``torch.compile``'s compilation in a trace (module docstring)."""


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
    _, at = np.unique(kernel[order], return_index=True)
    firsts = np.unique(call[order][at])  # (the call of each kernel name's earliest launch)
    code = host_name_codes(trace)[0]
    dur = host_column(trace, "end_ns") - start
    calls = np.unique(call)
    c, d = code[calls], dur[calls]
    o = np.lexsort((d, c))
    names, first, count = np.unique(c[o], return_index=True, return_counts=True)
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
    op = per_value(host["cat"], lambda c: c == "cpu_op", False, bool) & ~phases
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
    dur = host_column(trace, "end_ns") - host_column(trace, "start_ns")
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
    """Boolean mask over the rows of ``trace.host_events``: *slow calls*, the calls of an op (``cpu_op``) called at least
    three times that lasted at least :data:`SLOW_CALL_NS` and :data:`FACTOR` times the median of all its calls, other
    than a first call (:func:`first_calls`) unless a later call of its name is slow too: the first call of a new shape
    (cuDNN and cuBLAS build a plan or autotune per shape) or an input of another size. Unlike warm-up it recurs where
    shapes keep changing."""
    host = trace.host_events
    out = np.zeros(len(host), dtype=bool)
    if host.empty:
        return out
    code = host_name_codes(trace)[0]
    op = per_value(host["cat"], lambda c: c == "cpu_op", False, bool)
    dur = host_column(trace, "end_ns") - host_column(trace, "start_ns")
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
