"""Overlap figures: copy/compute, communication/compute, and CPU/GPU.

Definitions (quoted by the README):

- *copy/compute overlap* of device d and memcpy direction x:
  |union(memcpy on d, direction x) ∩ union(compute kernels on d, any stream)|
  / |union(memcpy on d, direction x)|. An ``all`` row does the same for every
  memcpy of the device. Compute kernels are kernels whose name has neither
  ``nccl`` nor ``rccl`` (HTA's convention).
- *communication/compute overlap* of device d:
  |union(comm kernels on d) ∩ union(compute kernels on d)| / |union(comm kernels on d)|,
  the definition of HTA's ``get_comm_comp_overlap``
  (``hta/analyzers/communication_analysis.py``), where communication kernels
  are NCCL/RCCL kernels.
- *CPU/GPU overlap*: host compute time during which any device is busy / host
  compute time. *Host compute* is the union, over all host threads, of ``cpu_op``
  events that launch no device work and wait on none: ops with no
  ``cuda_runtime``/``cuda_driver`` call inside them on their thread. An op that
  only launches kernels or synchronizes is the host *waiting for* or *feeding*
  the GPU, not computing beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import intervals as iv
from ..trace import Trace
from .busy import comm_mask, compute_mask, device_intervals

DIRECTIONS = ("HtoD", "DtoH", "DtoD", "PtoP", "HtoH")


def _fraction(num: int, den: int) -> float:
    return float(num) / den if den > 0 else float("nan")


def copy_overlap(trace: Trace) -> pd.DataFrame:
    """Copy/compute overlap per device and memcpy direction.

    Returns:
        DataFrame with columns ``device`` (int64), ``direction`` (str: HtoD, DtoH,
        DtoD, PtoP, HtoH, another name Kineto used, or ``all``), ``copies`` (int64
        count), ``bytes`` (int64, -1 entries ignored), ``copy_ns`` (int64, union of
        the copies), ``overlapped_ns`` (int64, part of it under compute kernels),
        ``fraction`` (float64, overlapped_ns / copy_ns). Only devices with memcpys.
    """
    ev = trace.device_events
    rows = []
    copies = ev[(ev["kind"] == "memcpy").to_numpy()]
    if copies.empty:
        return pd.DataFrame(columns=["device", "direction", "copies", "bytes", "copy_ns", "overlapped_ns", "fraction"])
    compute = device_intervals(trace, compute_mask(trace))
    for device, per_dev in copies.groupby("device", sort=True):
        comp = compute.get(int(device), iv.empty())
        groups = [(str(d), g) for d, g in per_dev.groupby(per_dev["direction"].astype(object).fillna("unknown"), sort=False)]
        groups.sort(key=lambda t: DIRECTIONS.index(t[0]) if t[0] in DIRECTIONS else len(DIRECTIONS))
        for direction, g in groups + [("all", per_dev)]:
            u = iv.union(g["start_ns"].to_numpy(), g["end_ns"].to_numpy())
            copy_ns = iv.length(u)
            over = iv.length(iv.intersect(u, comp))
            b = g["bytes"].to_numpy()
            rows.append(
                {
                    "device": int(device),
                    "direction": direction,
                    "copies": len(g),
                    "bytes": int(b[b >= 0].sum()),
                    "copy_ns": copy_ns,
                    "overlapped_ns": over,
                    "fraction": _fraction(over, copy_ns),
                }
            )
    return pd.DataFrame(rows)


def comm_overlap(trace: Trace) -> pd.DataFrame:
    """Communication/compute overlap per device (HTA's definition; see module doc).

    Returns:
        DataFrame with columns ``device`` (int64), ``rank`` (Int64, from
        ``distributedInfo``; NA if absent), ``comm_kernels`` (int64), ``comm_ns``
        (int64), ``overlapped_ns`` (int64), ``fraction`` (float64). Only devices
        that ran communication kernels.
    """
    cmask = comm_mask(trace)
    cols = ["device", "rank", "comm_kernels", "comm_ns", "overlapped_ns", "fraction"]
    if not cmask.any():
        return pd.DataFrame(columns=cols)
    comm = device_intervals(trace, cmask)
    comp = device_intervals(trace, compute_mask(trace))
    counts = trace.device_events[cmask].groupby("device").size()
    rows = []
    for device, u in comm.items():
        if device not in counts.index:
            continue
        comm_ns = iv.length(u)
        over = iv.length(iv.intersect(u, comp.get(device, iv.empty())))
        rows.append(
            {
                "device": device,
                "rank": trace.rank,
                "comm_kernels": int(counts[device]),
                "comm_ns": comm_ns,
                "overlapped_ns": over,
                "fraction": _fraction(over, comm_ns),
            }
        )
    out = pd.DataFrame(rows, columns=cols)
    out["rank"] = out["rank"].astype("Int64")
    return out


def host_compute_intervals(trace: Trace) -> iv.Intervals:
    """Union of host compute ops (``cpu_op`` with no runtime/driver call inside; module doc)."""
    host = trace.host_events
    if host.empty:
        return iv.empty()
    is_op = (host["cat"] == "cpu_op").to_numpy()
    is_rt = host["cat"].isin(["cuda_runtime", "cuda_driver"]).to_numpy()
    if not is_op.any():
        return iv.empty()
    # a runtime call belongs to an op when it starts inside the op on the same
    # thread; one searchsorted per thread (threads are few, events many)
    thread = pd.MultiIndex.from_arrays([host["pid"].astype(str), host["tid"].astype(str)]).factorize()[0]
    start = host["start_ns"].to_numpy()
    end = host["end_ns"].to_numpy()
    pure = np.ones(int(is_op.sum()), dtype=bool)
    op_idx = np.flatnonzero(is_op)
    op_thread = thread[op_idx]
    for t in np.unique(op_thread):
        rt = np.sort(start[is_rt & (thread == t)])
        if rt.size == 0:
            continue
        sel = op_thread == t
        ops = op_idx[sel]
        inside = np.searchsorted(rt, end[ops], side="left") - np.searchsorted(rt, start[ops], side="left")
        pure[sel] = inside == 0
    op_s, op_e = start[op_idx], end[op_idx]
    return iv.union(op_s[pure], op_e[pure])


@dataclass(frozen=True)
class CpuGpuOverlap:
    """CPU/GPU overlap of one trace (definition in the module docstring).

    Attributes:
        host_compute_ns: length of host compute (union over threads), ns.
        device_busy_ns: length of the union of all devices' busy intervals, ns.
        overlapped_ns: host compute time during which some device was busy, ns.
        fraction: overlapped_ns / host_compute_ns (NaN when no host compute).
        fraction_of_device: overlapped_ns / device_busy_ns (NaN when no device work).
    """

    host_compute_ns: int
    device_busy_ns: int
    overlapped_ns: int
    fraction: float
    fraction_of_device: float


def cpu_gpu_overlap(trace: Trace) -> CpuGpuOverlap:
    """CPU/GPU overlap (see :class:`CpuGpuOverlap` and the module docstring)."""
    host = host_compute_intervals(trace)
    devs = list(device_intervals(trace).values())
    gpu = iv.coverage_at_least(devs, 1) if devs else iv.empty()
    host_ns, gpu_ns = iv.length(host), iv.length(gpu)
    over = iv.length(iv.intersect(host, gpu))
    return CpuGpuOverlap(host_ns, gpu_ns, over, _fraction(over, host_ns), _fraction(over, gpu_ns))
