"""Python stack frames: which Python function the host was in, read from a trace recorded with ``with_stack=True``.

Definitions (quoted by docs/measures.md). Kineto writes one ``python_function`` event per Python call (and per call of a
built-in: ``<built-in function sleep>``), nested on its thread (:attr:`traceprobe.reading.Trace.python_events`).
Each nanosecond of a thread inside a frame belongs to its *innermost* frame: the deepest frame open on that thread
then. The frame holding a span of host time (:func:`frame_holding`) is the frame name whose innermost time inside
the span adds up to the most, across threads; a built-in is named with the Python function it was called from
(``<built-in function sleep> in train.py(47): prepare_batch``), and so is a frame of torch's own modules (:data:`TORCH_FILE`:
``torch/nn/modules/module.py(1750): _call_impl in train.py(80): train_step``): the first frame outside them, going
out, is the program's code that called into torch, where a reader can act. py-spy's and pyinstrument's self time is the same
attribution, sampled; here it is exact to the trace's ns.
"""

from __future__ import annotations

import re
from typing import cast

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..device.busy import host_thread_codes
from ..memo import per_trace

BUILTIN = "<built-in"
"""How Kineto's name of a call into C begins (``<built-in function sleep>``, ``<built-in method ...>``)."""

TORCH_FILE = re.compile(r"(?:^|/)torch/")
"""A frame of torch's own modules: its file is under a ``torch/`` folder (installed or a source checkout)."""

_FRAME = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<func>.+)$")
_BUILTIN = re.compile(r"^<built-in (?:function|method) (?P<name>[^ >]+)")


def short_frame(name: str, brief: bool = False) -> str:
    """A frame's name for a sentence: ``prepare_batch (train.py:47)`` for ``train.py(47): prepare_batch``, ``sleep in
    prepare_batch (train.py:47)`` for a built-in called from it (:func:`frame_holding`'s names); other names as given.
    ``brief``: the Python function alone (``prepare_batch``), for a line of a few words."""
    inner, _, outer = name.partition(" in ")
    m = _FRAME.match(outer or inner)
    if m is None:
        where = outer or inner
    else:
        where = m.group("func") if brief else f"{m.group('func')} ({m.group('file').rsplit('/', 1)[-1]}:{m.group('line')})"
    if not outer:
        return where
    b, f = _BUILTIN.match(inner), _FRAME.match(inner)
    return f"{b.group('name') if b else f.group('func') if f else inner} in {where}"


def _innermost(start: np.ndarray, end: np.ndarray, thread: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per thread, the stretches where each frame is the innermost one open: ``(lo, hi, frame)`` (int64; ``frame`` a
    row of the inputs). Frames of one thread nest (Kineto writes a call's frame inside its caller's)."""
    los, his, frames = [], [], []
    for t in iv.distinct(thread).tolist():
        rows = np.flatnonzero(thread == t)
        o = rows[np.lexsort((-end[rows], start[rows]))]  # (by start; a caller before the callee starting with it)
        s, e = start[o], end[o]
        ends = np.sort(e)
        depth = np.arange(o.size) - np.searchsorted(ends, s, "right")  # (frames open at each start, before it)
        bounds = iv.distinct(np.concatenate([s, e]))
        lo, hi = bounds[:-1], bounds[1:]
        open_ = np.searchsorted(s, lo, "right") - np.searchsorted(ends, lo, "right")
        frame = np.full(lo.size, -1, np.int64)
        for d in iv.distinct(depth).tolist():  # (one pass per stack depth, not per frame)
            at = np.flatnonzero(depth == d)
            q = np.flatnonzero(open_ - 1 == d)
            k = np.searchsorted(s[at], lo[q], "right") - 1
            ok = k >= 0
            frame[q[ok]] = o[at[k[ok]]]
        hit = frame >= 0
        hit[hit] = end[frame[hit]] >= hi[hit]  # (frames that do not nest cleanly name nothing there)
        los.append(lo[hit])
        his.append(hi[hit])
        frames.append(frame[hit])
    if not los:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(los), np.concatenate(his), np.concatenate(frames)


def thread_labels(trace: Trace, threads: np.ndarray) -> set[str]:
    """The ``tid`` labels of the host threads coded ``threads`` (:func:`..device.busy.host_thread_codes`)."""
    host = trace.host_events
    if host.empty or threads.size == 0:
        return set()
    rows = np.flatnonzero(np.isin(host_thread_codes(trace), threads))
    tid = host["tid"]
    if isinstance(tid.dtype, pd.CategoricalDtype):  # (the loader's: the distinct codes, not a string per row)
        cat = cast(pd.Categorical, tid.array)
        codes, labels = iv.distinct(cat.codes[rows]).tolist(), cat.categories.tolist()
        return {str(labels[c]) if c >= 0 else str(np.nan) for c in codes}
    return {str(x) for x in pd.unique(tid.to_numpy()[rows])}


@per_trace
def _frames(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray]:
    """The trace's frames: start, end, thread code, name code, names, and whether each name is a built-in's or a frame
    of torch's own modules (:data:`TORCH_FILE`): not the program's code."""
    py = trace.python_events
    names = [str(x) for x in py["name"].cat.categories]
    return (py["start_ns"].to_numpy(np.int64), py["end_ns"].to_numpy(np.int64), py["tid"].cat.codes.to_numpy().astype(np.int64),
            py["name"].cat.codes.to_numpy().astype(np.int64), names,
            np.array([n.startswith(BUILTIN) or bool((m := _FRAME.match(n)) and TORCH_FILE.search(m.group("file"))) for n in names], bool))


@per_trace
def _segments(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_innermost` of every frame, and of the program's frames (no built-in's, none of torch's: rows of the trace's
    frames), once."""
    start, end, thread, code, _, builtin = _frames(trace)
    lo, hi, frame = _innermost(start, end, thread)
    py = np.flatnonzero(~builtin[code])
    lo2, hi2, frame2 = _innermost(start[py], end[py], thread[py])
    return lo, hi, frame, lo2, hi2, py[frame2]


def frame_holding(trace: Trace, span: iv.Intervals, threads: set[str] | None = None) -> str:
    """The Python frame holding most of ``span`` (int64 ns intervals) as its innermost frame (module docstring), on
    the host threads named ``threads`` (``tid`` labels; every thread where None or where no frame is on them);
    ``""`` where the trace has no stacks or no frame is open inside the span."""
    if trace.python_events.empty or span[0].size == 0:
        return ""
    start, end, thread, code, names, builtin = _frames(trace)
    lo, hi, frame, lo2, hi2, frame2 = _segments(trace)
    if threads:
        labels = np.array([str(x) in threads for x in trace.python_events["tid"].cat.categories], bool)
        if labels.any():
            on, on2 = labels[thread[frame]], labels[thread[frame2]]
            lo, hi, frame, lo2, hi2, frame2 = lo[on], hi[on], frame[on], lo2[on2], hi2[on2], frame2[on2]
    over = iv.measure(span, lo, hi)
    if not (over > 0).any():
        return ""
    total = np.bincount(code[frame], weights=over.astype(np.float64), minlength=len(names))
    top = int(np.argmax(total))
    if not builtin[top]:
        return names[top]
    # a built-in or torch's own: the program's function it was called from, over the stretches where it was innermost
    mine = frame[code[frame] == top]
    over2 = iv.measure(iv.intersect(span, iv.union(start[mine], end[mine])), lo2, hi2)
    if not (over2 > 0).any():
        return names[top]
    caller = np.bincount(code[frame2], weights=over2.astype(np.float64), minlength=len(names))
    return f"{names[top]} in {names[int(np.argmax(caller))]}"
