"""Graph captures: where the host recorded device work into a graph instead of running it.

Between ``cudaStreamBeginCapture`` and ``cudaStreamEndCapture`` (``hipStreamBeginCapture`` /
``hipStreamEndCapture`` on ROCm, ``cuStreamBeginCapture`` / ``cuStreamEndCapture`` through the
driver) the kernels, copies and sets a host thread launches on the capturing stream are recorded
into a graph, not run: the device runs them when the graph is launched (``cudaGraphLaunch``; CUDA
Programming Guide, "CUDA Graphs", stream capture). ``torch.cuda.graph`` and ``torch.compile``'s
``mode="reduce-overhead"`` capture so, and serving engines (vLLM, SGLang) capture their decode
graphs at start-up: a trace of a capture shows the host launching and the device idle, by
construction, not because the host is slow.

A *capture* is the time of one host thread from the start of a begin call to the end of the first
end call after it on the same thread (a begin with no end in the trace is no capture). Its
*launches* are the runtime and driver calls on that thread inside it whose name holds ``Launch``
(``cudaLaunchKernel``, ``hipExtModuleLaunchKernel``, ``cuLaunchKernel``; not ``...GraphLaunch``)
or ``MemcpyAsync`` / ``MemsetAsync``. Making a graph goes on after its capture: it is instantiated
(``cudaGraphInstantiate*``), and may be uploaded or updated, then destroyed (``cudaGraphExecDestroy``,
``cudaGraphDestroy``; ``hip...`` and ``cu...`` alike). The idle time of a device while its launching
thread was in a capture or in one of those calls is the idle cause ``graph_capture``
(:mod:`.idle_causes`, :func:`graph_intervals`); launching a graph (``cudaGraphLaunch``) is not in it.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..device.busy import host_thread_codes, per_value, runtime_calls
from ..memo import empty_frame, host_column, per_trace

_BEGIN = re.compile(r"^(cuda|hip|cu)StreamBeginCapture")
_END = re.compile(r"^(cuda|hip|cu)StreamEndCapture")
_LAUNCH = re.compile(r"(?<!Graph)Launch|MemcpyAsync|MemsetAsync")
_GRAPH_CALLS = re.compile(r"^(cuda|hip|cu)Graph(Instantiate|Upload|ExecUpdate|ExecDestroy|Destroy)")
_REPLAY = re.compile(r"^(cuda|hip|cu)GraphLaunch")

COLUMNS = ["thread", "start_ns", "end_ns", "begin", "launches"]


@per_trace
def captures(trace: Trace) -> pd.DataFrame:
    """The trace's graph captures (module docstring), in order of start.

    Returns:
        DataFrame: ``thread`` (int64, :func:`.busy.host_thread_codes`), ``start_ns``,
        ``end_ns`` (int64 ns), ``begin`` (str, the begin call's name), ``launches``
        (int64, launch calls inside the capture on its thread).
    """
    host = trace.host_events
    empty = empty_frame({c: object if c == "begin" else np.int64 for c in COLUMNS})
    if host.empty:
        return empty
    runtime = runtime_calls(trace)
    kind = np.where(runtime, per_value(host["name"], lambda n: 1 if _BEGIN.match(str(n)) else 2 if _END.match(str(n)) else 0,
                                       0, np.int8), 0)
    if not (kind == 1).any():
        return empty
    thread, start, end = host_thread_codes(trace), host_column(trace, "start_ns"), host_column(trace, "end_ns")
    launch = runtime & per_value(host["name"], lambda n: _LAUNCH.search(str(n)) is not None, False, bool)
    parts: list[tuple[np.ndarray, ...]] = []
    for t in iv.distinct(thread[kind == 1]).tolist():  # once per capturing thread
        b = np.flatnonzero((kind == 1) & (thread == t))
        e = np.flatnonzero((kind == 2) & (thread == t))
        e = e[np.argsort(start[e], kind="stable")]
        k = np.searchsorted(start[e], start[b])  # the first end call starting at or after each begin
        b, k = b[k < e.size], k[k < e.size]
        s, f = start[b], end[e[k]]
        on = np.flatnonzero(launch & (thread == t))
        at = np.sort(start[on])
        n = np.searchsorted(at, f, side="left") - np.searchsorted(at, s, side="left")
        parts.append((np.full(b.size, t, np.int64), s, f, b, n.astype(np.int64)))
    thread_, s, f, b, n = (np.concatenate(c) for c in zip(*parts))
    order = np.argsort(s, kind="stable")
    begin = host["name"].iloc[b[order]].astype(str).to_numpy(dtype=object)
    return pd.DataFrame({"thread": thread_[order], "start_ns": s[order], "end_ns": f[order], "begin": begin, "launches": n[order]})


@per_trace
def graph_calls(trace: Trace) -> np.ndarray:
    """Bool array over ``trace.host_events``: the graph instantiation, upload, update and destruction calls."""
    host = trace.host_events
    if host.empty:
        return np.zeros(0, bool)
    return runtime_calls(trace) & per_value(host["name"], lambda n: _GRAPH_CALLS.match(str(n)) is not None, False, bool)


@per_trace
def replays_graphs(trace: Trace) -> bool:
    """Whether the host launched graphs (a ``cudaGraphLaunch``, ``hipGraphLaunch`` or ``cuGraphLaunch`` runtime or driver
    call): device work of the trace was replayed from graphs."""
    host = trace.host_events
    return bool((runtime_calls(trace) & per_value(host["name"], lambda n: _REPLAY.match(str(n)) is not None, False, bool)).any())


@per_trace
def graph_intervals(trace: Trace) -> dict[int, iv.Intervals]:
    """Per host thread code, where it was making or releasing graphs: the union of its captures and of its
    :func:`graph_calls` (module docstring; normalised int64 ns intervals)."""
    c, calls = captures(trace), graph_calls(trace)
    if c.empty and not calls.any():
        return {}
    t = np.concatenate([c["thread"].to_numpy(np.int64), host_thread_codes(trace)[calls]])
    s = np.concatenate([c["start_ns"].to_numpy(np.int64), host_column(trace, "start_ns")[calls]])
    e = np.concatenate([c["end_ns"].to_numpy(np.int64), host_column(trace, "end_ns")[calls]])
    return {int(x): iv.union(s[t == x], e[t == x]) for x in iv.distinct(t).tolist()}


def capture_notes(trace: Trace) -> list[str]:
    """One sentence when the trace holds graph captures, e.g. ``1 HIP graph capture on the host
    (hipStreamBeginCapture ... hipStreamEndCapture, 33.6 ms): its 546 launches were recorded into a graph,
    not run ...``; none without."""
    c = captures(trace)
    if c.empty:
        return []
    begin = str(c["begin"].iloc[0])
    api = re.match(r"^(cuda|hip|cu)", begin)
    end = f"{api.group(1) if api else ''}StreamEndCapture"
    kind = {"hip": "HIP"}.get(trace.backend, "CUDA")
    n, launches = len(c), int(c["launches"].sum())
    host_ms = iv.length(iv.union(c["start_ns"].to_numpy(np.int64), c["end_ns"].to_numpy(np.int64))) / 1e6
    one = n == 1
    return [f"{n} {kind} graph {'capture' if one else 'captures'} on the host ({begin} ... {end}, {host_ms:.1f} ms): the "
            f"{launches:,} launches inside {'it were recorded into a graph' if one else 'them were recorded into graphs'}, not "
            "run, so the device was idle meanwhile by construction (idle cause graph capture); the device work of a graph is "
            f"in a trace of its replays ({api.group(1) if api else 'cuda'}GraphLaunch)"]
