"""What a timeline picture draws of one trace, and the traces of one window put on one clock.

:func:`timeline_lanes` runs where the trace is analysed (in a worker process, as the ``then`` of
:func:`traceprobe.collect.analyze_paths`) and returns a small result that travels back: the lanes, the
slices to draw, where copies or communication ran under compute, where two or more devices were busy,
and the steps. The picture is drawn from it in the command's own process
(:mod:`traceprobe.report.plot`), which computes nothing. No figure is defined here: each set is one of
the analysis (:func:`.timeline.under_compute`, :func:`.busy.device_intervals`, the steps' GPU intervals
of :func:`.steps.device_steps`), kept as intervals.

:func:`shared_clock_groups` groups the traces of one profiler window of two or more ranks, whose
timestamps share a clock (Kineto's host clock, in ns): where the window's clock estimate says the
ranks' clocks differ beyond its uncertainty (:attr:`.clocks.ClockEstimate.differ`), each rank's times
are put on the reference rank's clock, t - x_r(t), as the merged Perfetto export does
(:mod:`traceprobe.report.perfetto_ranks`); elsewhere they are drawn as recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..job.clocks import ClockEstimate, shift_times
from ..memo import device_column
from ..per_trace import OverlapReport
from ..work.kernel_classes import CLASSES, kernel_classes
from .busy import comm_mask, copy_mask, device_intervals
from .timeline import under_compute

if TYPE_CHECKING:
    from ..summary import Summary

KINDS = CLASSES
"""The kinds of slice, by their code in :attr:`TimelineLanes.slices` (``kind``): the kernel classes
(:mod:`traceprobe.analysis.work.kernel_classes`: GEMM, attention, convolution, elementwise, reduction/norm, copy,
communication, other; memcpys and memsets are copies)."""
PIXELS = 1400
"""Width in pixels the slices are merged for: events of one lane and kind less than a quarter of
``window / PIXELS`` apart become one slice, so a million kernels travel and draw as fast as a thousand."""


def _frame(**cols: Any) -> pd.DataFrame:
    return pd.DataFrame({k: np.asarray(v, dtype=np.int64) for k, v in cols.items()})


@dataclass(frozen=True)
class TimelineLanes:
    """One trace as a timeline picture draws it (module doc). Times are int64 ns on the trace's clock,
    or on its window's reference clock once :func:`shared_clock_groups` has put them there.

    Attributes:
        window_ns: the report's window (first start, last end of the device work counted).
        lanes: one row per (device, stream), sorted: ``device``, ``stream`` (int64), ``label`` (str,
            ``cuda:0 stream 7``).
        slices: ``lane`` (int64, row of ``lanes``), ``kind`` (int64, index into :data:`KINDS`: the kernel class),
            ``start_ns``, ``end_ns`` (int64): the device events of each lane and kind, merged where less
            than a quarter of ``window / PIXELS`` apart (``merge_ns``).
        under_compute: ``device``, ``start_ns``, ``end_ns`` (int64): where copies or communication
            kernels ran while a compute kernel did, per device (:func:`.timeline.under_compute`).
        multi_device: ``start_ns``, ``end_ns`` (int64): where two or more devices were busy (empty with one).
        steps: ``step``, ``start_ns``, ``end_ns`` (int64): each step's GPU interval (the report's
            ``steps``, ``gpu_start_ns``/``gpu_end_ns``); steps that ran no device work left out.
        events: device events in the trace.
        merge_ns: the gap below which events were merged into one slice.
        clock: how the times were placed on a shared clock (empty: the trace's own, as recorded).
    """

    window_ns: tuple[int, int]
    lanes: pd.DataFrame
    slices: pd.DataFrame
    under_compute: pd.DataFrame
    multi_device: pd.DataFrame
    steps: pd.DataFrame
    events: int
    merge_ns: int
    clock: str = ""

    @property
    def devices(self) -> int:
        """Devices with a lane."""
        return int(self.lanes["device"].nunique())

    def present(self) -> list[bool]:
        """Which of :data:`KINDS` have a slice."""
        k = set(self.slices["kind"].tolist())
        return [i in k for i in range(len(KINDS))]


def timeline_lanes(trace: Trace, report: OverlapReport, pixels: int = PIXELS) -> TimelineLanes:
    """What a picture draws of ``trace`` (module doc), with its ``report`` (the window and the steps)."""
    ev = trace.device_events
    lo, hi = report.window_ns
    merge = max(int((hi - lo) / max(pixels, 1) / 4), 0)
    dev, stream = device_column(trace, "device").astype(np.int64), device_column(trace, "stream").astype(np.int64)
    pairs = np.unique(np.stack([dev, stream], 1), axis=0) if len(ev) else np.zeros((0, 2), np.int64)
    lanes = pd.DataFrame({"device": pairs[:, 0], "stream": pairs[:, 1],
                          "label": [f"{trace.device_label(int(d))} stream {int(s)}" for d, s in pairs.tolist()]})
    lane = pd.MultiIndex.from_arrays([pairs[:, 0], pairs[:, 1]]).get_indexer(pd.MultiIndex.from_arrays([dev, stream]))
    kind = kernel_classes(trace).astype(np.int64)  # (the report's classes: computed once per trace)
    k, s, e = iv.grouped_union(lane * len(KINDS) + kind, device_column(trace, "start_ns"), device_column(trace, "end_ns") + merge)
    slices = _frame(lane=k // len(KINDS), kind=k % len(KINDS), start_ns=s, end_ns=np.maximum(e - merge, s))
    shade = under_compute(trace, copy_mask(trace))
    for d, ivs in under_compute(trace, comm_mask(trace)).items():
        shade[d] = iv.union(np.r_[shade[d][0], ivs[0]], np.r_[shade[d][1], ivs[1]]) if d in shade else ivs
    parts = [_frame(device=np.full(len(a), d), start_ns=a, end_ns=b) for d, (a, b) in sorted(shade.items())]
    under = pd.concat(parts, ignore_index=True) if parts else _frame(device=[], start_ns=[], end_ns=[])
    busy = list(device_intervals(trace).values())
    two = iv.coverage_at_least(busy, 2) if len(busy) > 1 else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    st = report.steps
    if len(st) and "gpu_start_ns" in st:
        worked = (st["gpu_end_ns"] > st["gpu_start_ns"]).to_numpy(bool)
        steps = _frame(step=st["step"].to_numpy()[worked], start_ns=st["gpu_start_ns"].to_numpy()[worked],
                       end_ns=st["gpu_end_ns"].to_numpy()[worked])
    else:
        steps = _frame(step=[], start_ns=[], end_ns=[])
    return TimelineLanes((int(lo), int(hi)), lanes, slices, under, _frame(start_ns=two[0], end_ns=two[1]), steps, len(ev), merge)


def on_clock(lanes: TimelineLanes, est: ClockEstimate, rank: int) -> TimelineLanes:
    """``lanes`` with every time of rank ``rank`` read on ``est``'s reference clock: t - x_r(t)
    (:func:`.clocks.shift_times`)."""
    lo, hi = shift_times(_frame(start_ns=[lanes.window_ns[0]], end_ns=[lanes.window_ns[1]]), est, rank).iloc[0]
    return replace(lanes, window_ns=(int(lo), int(hi)), slices=shift_times(lanes.slices, est, rank),
                   under_compute=shift_times(lanes.under_compute, est, rank), multi_device=shift_times(lanes.multi_device, est, rank),
                   steps=shift_times(lanes.steps, est, rank), clock=f"on rank {est.reference}'s clock ({est.describe()})")


def shared_clock_groups(summary: Summary, lanes: dict[str, TimelineLanes]) -> list[list[tuple[OverlapReport, TimelineLanes]]]:
    """The traces drawn, grouped by the clock they share (module doc).

    Args:
        summary: the analysed traces (their runs, windows and clock estimates).
        lanes: each drawn trace's :class:`TimelineLanes`, by report path.

    Returns:
        groups in run and window order: the ranks of a window of two or more known ranks, by rank, their
        times on one clock (put on the reference rank's where the estimate says the clocks differ);
        every other trace alone. A report without lanes is left out.
    """
    clocks = {(c.run, c.window): c for c in summary.clocks}
    groups: list[list[tuple[OverlapReport, TimelineLanes]]] = []
    for run in summary.runs:
        for w in run.windows:
            drawn = [(rank, r) for rank, r in zip(w.ranks, w.reports) if r.path in lanes]
            ranked = sorted(((rank, r) for rank, r in drawn if rank is not None), key=lambda x: x[0])
            if len({rank for rank, _ in ranked}) < 2 or len(ranked) != len(drawn):
                groups += [[(r, lanes[r.path])] for _, r in drawn]
                continue
            est = clocks.get((run.name, w.label))
            shift = est is not None and est.differ
            groups.append([(r, on_clock(lanes[r.path], est, rank) if shift and est is not None else lanes[r.path])
                           for rank, r in ranked])
    return groups
