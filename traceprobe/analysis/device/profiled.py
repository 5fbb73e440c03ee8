"""The profiled window: which device work belongs to the recorded steps.

A GPU runs behind its host, often by more than a step. A profiler window therefore
opens with device work launched during the unrecorded warm-up step (NCCL kernels
spin-waiting on a lagging peer, say), and may close with work launched after the
last step. Counting that work as if it were in the window skews every figure.

Each device event is placed by its *launch*: the ``cuda_runtime``/``cuda_driver``
host event with the same CUPTI correlation id (Kineto's ``args.correlation``; the
earliest one where several share it; :func:`.launch_links.launch_start_ns`). Its class:

- ``steps``: launched inside the profiled steps, from the first
  ``ProfilerStep#N``'s start to the last one's end; without step annotations,
  launched anywhere in the trace;
- ``no launch``: it carries a correlation id but no launch with that id is in the
  trace: launched before the profiler started recording (or by a thread it did
  not record);
- ``before steps``: launched in the trace but before the first step's start;
- ``after steps``: launched after the last step's end.

By default every figure, step and verdict uses the ``steps`` class only; the rest
is *set aside*, and the report says how much device time, of what, and why.
A trace that links no device event to a launch (no runtime events recorded, as in
hand-made traces) cannot be classified: all its device work is kept, and a
step's device work is then what starts inside the step's host window.

A device event without a correlation id (``args.correlation`` absent, as on MTIA,
whose ``dma_request`` events carry none) has no launch link to follow, so nothing
says it was launched before the trace: it is kept (class ``steps``) and placed by
its own start, clipped to the launch window, as in a trace that links nothing.
:func:`unlinked_notes` says how much work was placed so ("this backend records no
launch link for these events"), so the choice is visible.

HolisticTraceAnalysis is the anchor (``Trace._filter_irrelevant_gpu_kernels`` in
``hta/common/trace.py``): it keeps GPU kernels whose correlation id matches a CPU
launch starting before the last ``ProfilerStep``'s start, or before its end with
``include_last_profiler_step=True``. traceprobe differs in four ways: the last step
is kept (it was recorded in full); work launched before the first step is set
aside too; memcpys and memsets are classified as kernels are; and the rule also
applies with a single step (HTA filters only with two or more).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..host.launch_links import launch_start_ns
from ..memo import device_column, empty_frame
from .busy import ASIDE_KEY, device_intervals, per_value, runtime_calls

STEPS, NO_LAUNCH, BEFORE, AFTER = 0, 1, 2, 3
CLASSES = ("steps", "no launch", "before steps", "after steps")
"""Class names, indexed by the codes above."""
REASONS = {
    NO_LAUNCH: "launched before the trace began (no launch call in the trace)",
    BEFORE: "launched before the first recorded step",
    AFTER: "launched after the last recorded step",
}
SET_ASIDE_COLUMNS = ["reason", "device", "work", "events", "busy_ns"]


@dataclass(frozen=True)
class Launches:
    """Where each device event of a trace was launched.

    Attributes:
        launch_ns: int64 per row of ``trace.device_events``: the start of its launch
            call in ns; -1 where none is in the trace. When the trace links no event
            to a launch, the event's own start (see the module docstring).
        cls: int8 class code per row (``STEPS``, ``NO_LAUNCH``, ``BEFORE``, ``AFTER``).
        linked: whether any device event matched a launch.
        by_start: bool per row: kept without a launch link (no correlation id, in
            a linked trace), placed by its own start (module docstring).
        lo_ns, hi_ns: the launch window, [first step start, last step end]; the
            trace's first and last host or device time without steps.
    """

    launch_ns: np.ndarray
    cls: np.ndarray
    linked: bool
    lo_ns: int
    hi_ns: int
    by_start: np.ndarray | None = None

    @property
    def kept(self) -> np.ndarray:
        """Boolean mask of device events launched inside the profiled steps."""
        return self.cls == STEPS


def launches(trace: Trace) -> Launches:
    """Launch time and class of every device event (module docstring)."""
    dev = trace.device_events
    launch = launch_start_ns(trace)
    linked = bool((launch >= 0).any())
    st = trace.steps
    if not st.empty:
        lo, hi = int(st["start_ns"].min()), int(st["end_ns"].max())
    else:
        times = [df[c].to_numpy() for df in (trace.host_events, dev) for c in ("start_ns", "end_ns") if not df.empty]
        lo = int(min(t.min() for t in times)) if times else 0
        hi = int(max(t.max() for t in times)) if times else 0
    cls = np.full(len(dev), STEPS, dtype=np.int8)
    if not linked:
        # nothing to classify by: keep everything; a step's work is what starts in its window
        launch = dev["start_ns"].to_numpy(np.int64).clip(lo, hi) if len(dev) else launch
        return Launches(launch, cls, False, lo, hi)
    # no correlation id: no link to follow, so not "before the trace"; kept and placed by its own start
    by_start = (launch < 0) & (device_column(trace, "correlation") < 0)
    if by_start.any():
        launch = np.where(by_start, device_column(trace, "start_ns").clip(lo, hi), launch)
    cls[launch < 0] = NO_LAUNCH
    cls[(launch >= 0) & (launch < lo)] = BEFORE
    cls[launch > hi] = AFTER
    return Launches(launch, cls, True, lo, hi, by_start)


def keep_device_events(trace: Trace, mask: np.ndarray) -> Trace:
    """``trace`` with only the device events selected by ``mask`` (host events unchanged).

    The new trace remembers the device time of the events left out
    (:func:`.busy.set_aside_intervals`): that work still held the device.
    """
    kept = replace(trace, device_events=trace.device_events[mask].reset_index(drop=True))
    kept.derived[ASIDE_KEY] = device_intervals(trace, ~np.asarray(mask, dtype=bool))
    return kept


def _work(dev: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """``compute``, ``communication``, ``memcpy`` or ``memset`` for each of ``rows`` of ``device_events`` (object array)."""
    labels = per_value(dev["kind"], str, "nan")[rows]
    return np.where(dev["is_comm"].to_numpy()[rows], "communication", np.where(labels == "kernel", "compute", labels)).astype(object)


def set_aside(trace: Trace, la: Launches) -> pd.DataFrame:
    """Device work left out of the figures, by reason, device and kind of work.

    Returns:
        DataFrame with columns ``reason`` (str, see ``REASONS``), ``device``
        (int64), ``work`` (str: ``compute``, ``communication``, ``memcpy`` or
        ``memset``), ``events`` (int64) and ``busy_ns`` (int64, length of the union
        of those events' intervals), sorted by reason code, device and work;
        empty when nothing was set aside.
    """
    rows = np.flatnonzero(la.cls != STEPS)
    if rows.size == 0:
        return empty_frame({c: object if c in ("reason", "work") else np.int64 for c in SET_ASIDE_COLUMNS})
    dev = trace.device_events
    # one group per (reason code, device, work), numbered in that sort order
    parts = [np.unique(v, return_inverse=True) for v in (la.cls[rows].astype(np.int64), device_column(trace, "device")[rows], _work(dev, rows))]
    key = np.zeros(rows.size, dtype=np.int64)
    for uniq, inv in parts:
        key = key * len(uniq) + inv.ravel()
    groups, group, events = np.unique(key, return_inverse=True, return_counts=True)
    busy = iv.grouped_coverage(group.ravel(), device_column(trace, "start_ns")[rows], device_column(trace, "end_ns")[rows], 1, groups.size)
    (codes, _), (devices, _), (works, _) = parts
    n_dev, n_work = len(devices), len(works)
    return pd.DataFrame({
        "reason": [REASONS[int(c)] for c in codes[groups // (n_dev * n_work)].tolist()],
        "device": devices[(groups // n_work) % n_dev].astype(np.int64),
        "work": [str(w) for w in works[groups % n_work].tolist()],
        "events": events.astype(np.int64),
        "busy_ns": busy.astype(np.int64),
    })


def set_aside_notes(aside: pd.DataFrame, backend: str = "cuda") -> list[str]:
    """One sentence per reason and kind of work, e.g. ``14.2 ms of communication on cuda:0 (16 kernels) ...: left out``;
    devices named by ``backend`` (``cuda:0``, ``hip:2``, ``mtia:17``)."""
    groups: dict[tuple[str, str], tuple[list[int], list[int], list[int]]] = {}  # (reason, work) in order of appearance
    for reason, device, work, events, busy in zip(*(aside[c].tolist() for c in SET_ASIDE_COLUMNS)):
        devices, n, ns = groups.setdefault((reason, work), ([], [], []))
        devices.append(device)
        n.append(events)
        ns.append(busy)
    notes = []
    for (reason, work), (devices, n, ns) in groups.items():
        unit = "kernels" if work in ("compute", "communication") else "events"
        on = ", ".join(f"{backend}:{d}" for d in devices)
        notes.append(f"{sum(ns) / 1e6:.1f} ms of {work} on {on} ({sum(n)} {unit}) {reason}: left out")
    return notes


UNLINKED = "this backend records no launch link for these events (no correlation id)"
"""Why device work without a correlation id is placed by its start (module docstring)."""


def unlinked_notes(trace: Trace, la: Launches) -> list[str]:
    """One sentence per device and kind of work kept without a launch link (``la.by_start``), e.g.
    ``394.0 ms of memcpy on mtia:9 (22,361 events): this backend records no launch link ...: kept, placed by their start``."""
    if la.by_start is None or not la.by_start.any():
        return []
    # the same grouping by device and work as set_aside's, over these rows only
    table = set_aside(trace, replace(la, cls=np.where(la.by_start, NO_LAUNCH, STEPS).astype(np.int8)))
    notes = []
    for device, work, events, busy in zip(*(table[c].tolist() for c in ("device", "work", "events", "busy_ns"))):
        unit = "kernels" if work in ("compute", "communication") else "events"
        notes.append(f"{busy / 1e6:.1f} ms of {work} on {trace.device_label(int(device))} ({events:,} {unit}): {UNLINKED}: "
                     "kept, placed in the steps by their start")
    return notes


NOT_RECORDED = "device activity not recorded"
"""How the note of a trace that launched device work but recorded none starts (:func:`not_recorded_notes`)."""

_LAUNCH_CALL = re.compile(r"Launch|MemcpyAsync|MemsetAsync")
"""Runtime and driver calls that put work on a device: ``cudaLaunchKernel``, ``cuLaunchKernelEx``,
``hipExtModuleLaunchKernel``, ``cudaGraphLaunch``, ``cudaMemcpyAsync``, ``cudaMemsetAsync`` (and their ``hip``/``cu``
forms)."""


def not_recorded_notes(trace: Trace) -> list[str]:
    """One sentence where ``trace`` launched device work but holds no device activity: its host called the runtime to
    launch kernels or copies (:data:`_LAUNCH_CALL`, ``cuda_runtime``/``cuda_driver`` events; Kineto links each to its
    device event by correlation id and draws an ``ac2g`` flow) yet no kernel, memcpy or memset was recorded, as when
    the profiler ran without its device activity (``activities=[ProfilerActivity.CPU]``). Such a trace is no CPU-only
    run: its device work happened, unseen, so it is told how to record it, e.g. ``device activity not recorded: add
    ProfilerActivity.CUDA (4,002 launch calls, no kernel, copy or set; 2 GPUs in deviceProperties)``. Empty for a trace
    with device activity or without launch calls (a CPU-only run)."""
    host = trace.host_events
    if not trace.device_events.empty or host.empty:
        return []
    launch = runtime_calls(trace) & per_value(host["name"], lambda n: _LAUNCH_CALL.search(str(n)) is not None, False, bool)
    n = int(launch.sum())
    if n == 0:
        return []
    gpus = len(trace.devices)
    activity = "MTIA" if trace.backend == "mtia" else "CUDA"  # (ROCm's is ProfilerActivity.CUDA too)
    where = f"; {gpus} GPU{'s' if gpus != 1 else ''} in deviceProperties" if gpus else ""
    return [f"{NOT_RECORDED}: add ProfilerActivity.{activity} ({n:,} launch call{'s' if n != 1 else ''}, no kernel, copy "
            f"or set{where})"]
