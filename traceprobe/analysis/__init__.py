"""Analyses: a :class:`~traceprobe.reading.Trace` in, DataFrames and dataclasses out.

Nothing here prints, reads files, or imports typer or rich.
"""

from .advice.verdicts import Verdict
from .device.busy import stream_busy
from .device.concurrency import DeviceConcurrency, device_concurrency, stream_concurrency
from .device.overlap import CpuGpuOverlap, comm_overlap, copy_overlap, cpu_gpu_overlap
from .per_trace import OverlapReport, overlap_report

__all__ = [
    "CpuGpuOverlap",
    "DeviceConcurrency",
    "OverlapReport",
    "Verdict",
    "comm_overlap",
    "copy_overlap",
    "cpu_gpu_overlap",
    "device_concurrency",
    "overlap_report",
    "stream_busy",
    "stream_concurrency",
]
