"""The overlap report: every figure of one trace, and its verdicts.

This is the facade a notebook user calls: ``overlap_report(load_trace(path))``.
Each figure is defined once, in the docstring of the function computing it
(:mod:`.busy`, :mod:`.overlap`, :mod:`.concurrency`, :mod:`.steps`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from ..trace import Trace
from . import verdicts as vd
from .breakdown import gpu_breakdown, step_breakdown
from .busy import compute_mask, fraction_of, stream_busy
from .collectives import collective_table
from .concurrency import DeviceConcurrency, device_concurrency, stream_concurrency
from .findings import findings
from .kernels import kernel_table, queue_times
from .overlap import CpuGpuOverlap, comm_overlap, copy_overlap, cpu_gpu_overlap
from .steps import clip_trace, step_windows


@dataclass(frozen=True)
class OverlapReport:
    """Every figure of one trace.

    Attributes:
        path: the trace file.
        window_ns: (start, end) of the trace window in ns (first device event
            start, last device event end); (0, 0) without device events.
        streams: per (device, stream) busy time, see :func:`.busy.stream_busy`.
        copy_overlap: copy/compute overlap, see :func:`.overlap.copy_overlap`.
        devices: cross-device concurrency and per-device busy/idle time.
        stream_concurrency: per device, see :func:`.concurrency.stream_concurrency`.
        comm_overlap: comm/compute overlap, see :func:`.overlap.comm_overlap`.
        cpu_gpu: CPU/GPU overlap, see :class:`.overlap.CpuGpuOverlap`.
        steps: per ``ProfilerStep``: ``step``, ``start_ns``, ``end_ns``,
            ``duration_ns`` (int64), ``device_concurrency``, ``copy_overlap``,
            ``comm_overlap``, ``stream_concurrency`` (float64 fractions, NaN where
            undefined); empty without step annotations.
        throughput: steps per second over the step windows (NaN without steps).
        verdicts: the plain-English statements, see :mod:`.verdicts`.
        rank: distributed rank from the trace's ``distributedInfo``, if any.
        info: manifest facts about the run (workload, variant, wall_s, ...).
        event_count: number of events in the file.
        warnings: what the loader dropped or could not use (one line each).
        breakdown: GPU time breakdown per device, see :func:`.breakdown.gpu_breakdown`.
        breakdown_steps: the same per step window, see :func:`.breakdown.step_breakdown`.
        findings: ranked headroom, see :func:`.findings.findings`.
        kernels: device time per kernel name, see :func:`.kernels.kernel_table`.
        queue: launch-to-start delay, see :func:`.kernels.queue_times`.
        collectives: the collective kernels launched in the trace, see
            :func:`.collectives.collective_table` (matched across ranks in the Summary).

    A report is small and picklable (it travels between worker processes): it
    holds figures, never the :class:`~traceprobe.trace.Trace`.
    """

    path: str
    window_ns: tuple[int, int]
    streams: pd.DataFrame
    copy_overlap: pd.DataFrame
    devices: DeviceConcurrency
    stream_concurrency: pd.DataFrame
    comm_overlap: pd.DataFrame
    cpu_gpu: CpuGpuOverlap
    steps: pd.DataFrame
    throughput: float
    verdicts: list[vd.Verdict]
    rank: int | None = None
    info: dict[str, Any] = field(default_factory=dict)
    event_count: int = 0
    warnings: tuple[str, ...] = ()
    breakdown: pd.DataFrame = field(default_factory=pd.DataFrame)
    breakdown_steps: pd.DataFrame = field(default_factory=pd.DataFrame)
    findings: pd.DataFrame = field(default_factory=pd.DataFrame)
    kernels: pd.DataFrame = field(default_factory=pd.DataFrame)
    queue: pd.DataFrame = field(default_factory=pd.DataFrame)
    collectives: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def parallelism(self) -> bool:
        """True when any verdict confirms parallelism."""
        return any(v.level == "confirmed" for v in self.verdicts)


def _copy_context(trace: Trace) -> tuple[dict[int, bool], dict[tuple[int, str], bool]]:
    ev = trace.device_events
    copies = ev[(ev["kind"] == "memcpy").to_numpy()]
    comp = ev[compute_mask(trace)]
    same: dict[int, bool] = {}
    for d, g in copies.groupby("device"):
        comp_streams = set(comp.loc[comp["device"] == d, "stream"].unique().tolist())
        same[int(d)] = bool(comp_streams) and set(g["stream"].unique().tolist()) <= comp_streams
    pageable: dict[tuple[int, str], bool] = {}
    for (d, direction), g in copies.groupby(["device", copies["direction"].astype(object).fillna("unknown")]):
        kinds = set(g["src_kind"].astype(object).dropna()) | set(g["dst_kind"].astype(object).dropna())
        pageable[(int(d), str(direction))] = "Pageable" in kinds
    return same, pageable


def _figures(trace: Trace) -> dict[str, Any]:
    copy = copy_overlap(trace)
    dev = device_concurrency(trace)
    streams = stream_concurrency(trace)
    comm = comm_overlap(trace)
    return {"copy": copy, "dev": dev, "streams": streams, "comm": comm}


def _step_figures(trace: Trace) -> pd.DataFrame:
    windows = step_windows(trace)
    device_only = replace(trace, host_events=trace.host_events.iloc[:0])  # _figures reads device events only
    rows = []
    for w in windows.itertuples(index=False):
        f = _figures(clip_trace(device_only, int(w.start_ns), int(w.end_ns)))
        copy_all = f["copy"][f["copy"]["direction"] == "all"] if not f["copy"].empty else f["copy"]
        rows.append(
            {
                "device_concurrency": f["dev"].concurrency,
                "copy_overlap": fraction_of(copy_all, "overlapped_ns", "copy_ns"),
                "comm_overlap": fraction_of(f["comm"], "overlapped_ns", "comm_ns"),
                "stream_concurrency": fraction_of(f["streams"], "multi_stream_ns", "busy_ns"),
            }
        )
    figs = pd.DataFrame(rows, columns=["device_concurrency", "copy_overlap", "comm_overlap", "stream_concurrency"], dtype=np.float64)
    return pd.concat([windows.reset_index(drop=True), figs], axis=1)


def overlap_report(trace: Trace, info: dict[str, Any] | None = None) -> OverlapReport:
    """Compute every figure and verdict of ``trace``.

    Args:
        trace: a loaded :class:`~traceprobe.trace.Trace`.
        info: optional facts about the run (from a manifest) carried into the report.

    Returns:
        an :class:`OverlapReport`.
    """
    f = _figures(trace)
    cpu = cpu_gpu_overlap(trace)
    steps = _step_figures(trace)
    total = steps["duration_ns"].sum() if not steps.empty else 0
    throughput = float(len(steps) / (total / 1e9)) if total > 0 else float("nan")
    same, pageable = _copy_context(trace)
    dev = f["dev"]
    duration = trace.window_ns[1] - trace.window_ns[0]
    verdicts = (
        vd.copy_verdicts(f["copy"], same, pageable, duration)
        + vd.device_verdict(dev.any_busy_ns, dev.concurrent_ns, dev.concurrency, dev.device_count)
        + vd.stream_verdicts(f["streams"])
        + vd.comm_verdicts(f["comm"], duration)
        + vd.cpu_gpu_verdict(cpu)
    )
    return OverlapReport(
        path=trace.path,
        window_ns=trace.window_ns,
        streams=stream_busy(trace),
        copy_overlap=f["copy"],
        devices=dev,
        stream_concurrency=f["streams"],
        comm_overlap=f["comm"],
        cpu_gpu=cpu,
        steps=steps,
        throughput=throughput,
        verdicts=verdicts,
        rank=trace.rank,
        info=dict(info or {}),
        event_count=int(trace.metadata.get("event_count", 0)),
        warnings=tuple(trace.metadata.get("warnings") or ()),
        breakdown=gpu_breakdown(trace),
        breakdown_steps=step_breakdown(trace, steps),
        findings=findings(trace),
        kernels=kernel_table(trace),
        queue=queue_times(trace),
        collectives=collective_table(trace),
    )
