"""The warm-up note: one sentence when a trace holds warm-up (first calls far longer than their later ones,
``torch.compile``'s phases, the set-up before them), with its evidence (:mod:`.warmup`, :mod:`.idle_causes`); a trace
whose first step is not step 0 was recorded after steps had run (``torch.profiler.schedule``), so its first calls are
named as a new shape's or a recompile's, not start-up to be scheduled away."""

from __future__ import annotations

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


def warmup_notes(trace: Trace) -> list[str]:
    """One sentence when the trace holds warm-up (:mod:`.warmup`; synchronizing calls left out, as they are ``sync``),
    with its evidence: the two longest outermost first calls against the median of their later calls, the host
    time of ``torch.compile``'s phases and of the set-up before them (:func:`.warmup.setup_span`), e.g. ``warm-up in
    the trace: the first aten::conv2d took 473.6 ms, 2,254x the median of its 15 later calls (0.210 ms); 37 more first
    calls like these (or inside them): ...``; none without."""
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
    first_step = int(trace.steps["step"].min()) if not trace.steps.empty else -1
    if first_step >= 1:  # (recorded after its first steps already, as torch.profiler.schedule does: not start-up)
        return [f"warm-up in the trace: {'; '.join(parts)}: first calls in ProfilerStep#{first_step}, recorded after "
                f"{first_step} step{'s' if first_step > 1 else ''} had run: not start-up but a first call of a new shape or a "
                "recompile (TORCH_LOGS=recompiles says why)"]
    return [f"warm-up in the trace: {'; '.join(parts)}: one-time work, idle cause warm-up; torch.profiler.schedule's first "
            "steps leave it out"]
