"""The warm-up note: one sentence when a trace holds warm-up (first calls far longer than their later ones,
``torch.compile``'s phases, the set-up before them), with its evidence (:mod:`.warmup`, :mod:`.idle_causes`); a trace
recorded after the program had run (:func:`runs_before`: its first step is not step 0, as ``torch.profiler.schedule``
records, or its manifest says ``record`` warmed it up) has its first calls named as a new shape's or a recompile's,
not start-up to be scheduled away."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ... import intervals as iv
from ...reading import Trace
from ..device.busy import host_name_codes, host_thread_codes
from ..memo import host_column
from .host_classes import EVENT_CAUSES, host_classes
from .warmup import compile_phases, first_calls, setup_span

_WARMUP, _COMPILE = EVENT_CAUSES.index("warmup"), EVENT_CAUSES.index("compile")


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms" if ns >= 1e6 else f"{ns / 1e6:.3f} ms"


def first_step(steps: Any) -> int:
    """The number of the first step of a steps table (``step`` column, :attr:`traceprobe.reading.Trace.steps`), -1 where
    it has none."""
    return int(steps["step"].min()) if steps is not None and len(steps) and "step" in steps else -1


def runs_before(first: int, info: Mapping[str, Any] | None = None) -> int:
    """How many steps or runs of the program the evidence says ran before the profiled window: ``first``, the number of
    the window's first ``ProfilerStep#N`` (torch.profiler counts the steps since it was made, so ``ProfilerStep#2`` of
    ``schedule(wait=1, warmup=1, ...)`` follows two steps run); else, without steps (``first`` -1), the manifest's
    ``runs_before`` in ``info`` (:func:`traceprobe.manifest.info_for`: ``record`` profiles a built-in workload after a
    warm-up run and its timed runs), or, where an older manifest does not name it, the timed runs ``wall_runs_s`` and the
    warm-up run before them (``record`` has always run both before it profiled); 0 where nothing says so (a window from
    ``ProfilerStep#0``, or no steps and no manifest): its first calls may be the process's start-up."""
    if first >= 0:
        return first
    info = info or {}
    if isinstance(info.get("runs_before"), int) and not isinstance(info.get("runs_before"), bool):
        return max(int(info["runs_before"]), 0)
    runs = info.get("wall_runs_s")
    return 1 + len(runs) if isinstance(runs, list) and runs and info.get("workload") else 0


def warmup_notes(trace: Trace, info: Mapping[str, Any] | None = None) -> list[str]:
    """One sentence when the trace holds warm-up (:mod:`.warmup`; synchronizing calls left out, as they are ``sync``),
    worded by what ran before it (:func:`runs_before`, ``info`` the manifest's facts), with its evidence: the two
    longest outermost first calls against the median of their later calls, the host time of ``torch.compile``'s phases
    and of the set-up before them (:func:`.warmup.setup_span`), e.g. ``warm-up in the trace: the first aten::conv2d took
    473.6 ms, 2,254x the median of its 15 later calls (0.210 ms); 37 more first calls like these (or inside them):
    ...``; none without."""
    cls = host_classes(trace)  # (a synchronizing first call is a sync, not warm-up; a slow one a new shape's)
    first, compiling = first_calls(trace) & (cls == _WARMUP), compile_phases(trace) & (cls == _COMPILE)
    if not (first.any() or compiling.any()):
        return []
    host = trace.host_events
    start, end = host_column(trace, "start_ns"), host_column(trace, "end_ns")
    dur = end - start
    parts = []
    rows = np.flatnonzero(first)
    if rows.size:
        rows = rows[np.argsort(-dur[rows], kind="stable")][:50]  # the longest; nested ones (aten::convolution in aten::conv2d) left out
        s, e, t = start[rows], end[rows], host_thread_codes(trace)[rows]
        inside = (s[:, None] >= s[None, :]) & (e[:, None] <= e[None, :]) & (t[:, None] == t[None, :])  # [i, j]: i inside j
        outer = rows[~np.tril(inside, -1).any(axis=1)]  # (inside a longer one, or an equal one listed first)
        code = host_name_codes(trace)[0]
        for r in outer[:2].tolist():
            later = np.flatnonzero(code == code[r])
            later = later[later != r]
            median = float(np.median(dur[later]))
            than = f"{dur[r] / median:,.0f}x the median of its {later.size:,} later calls ({_ms(median)})" if median > 0 else \
                f"its {later.size:,} later calls 0 ns (median)"
            parts.append(f"the first {host['name'].iat[r]} took {_ms(float(dur[r]))}, {than}")
        if (more := int(first.sum()) - min(2, outer.size)) > 0:
            parts.append(f"{more:,} more first call{'s' if more > 1 else ''} like these (or inside them)")
    if compiling.any():
        parts.append(f"torch.compile compiled for {_ms(iv.length(iv.union(start[compiling], end[compiling])))} of host time (its "
                     "dynamo_timed phases)")
    setup = setup_span(trace)
    if setup[0].size:  # the set-up: on the thread that compiled first, outside its ops, in the device window
        thread = host_thread_codes(trace)
        on = thread == thread[np.flatnonzero(compile_phases(trace))[0]]
        lo, hi = trace.window_ns
        before = int(iv.measure(iv.subtract(setup, iv.union(start[on], end[on])), np.array([lo]), np.array([hi]))[0])
        if before > 0:
            parts.append(f"{_ms(before)} outside any op before the first compile phase, in the device window (set-up: "
                         "building the model, torch.compile's first use importing Dynamo and Inductor)")
    first = first_step(trace.steps)
    before = runs_before(first, info)
    if before >= 1:  # (recorded after the program had run, as torch.profiler.schedule and record do: not start-up)
        where = f"first calls in ProfilerStep#{first}, recorded after {before} step{'s' if before > 1 else ''}" if first >= 1 else \
            f"recorded after {before} run{'s' if before > 1 else ''} of the program (its manifest)"
        return [f"warm-up in the trace: {'; '.join(parts)}: {where} had run: not start-up but a first call of a new shape or a "
                "recompile (TORCH_LOGS=recompiles says why)"]
    return [f"warm-up in the trace: {'; '.join(parts)}: one-time work, idle cause warm-up; torch.profiler.schedule's first "
            "steps leave it out"]
