"""Overlap figures: copy/compute, communication/compute, and CPU/GPU.

Definitions (quoted by docs/measures.md):

- *copy/compute overlap* of device d and memcpy direction x:
  |union(memcpy on d, direction x) ∩ union(compute kernels on d, any stream)|
  / |union(memcpy on d, direction x)|. An ``all`` row does the same for every
  memcpy of the device. Compute kernels are the kernels that are not
  communication (``is_comm``, below).
- *communication/compute overlap* of device d:
  |union(comm kernels on d) ∩ union(compute kernels on d)| / |union(comm kernels on d)|,
  the definition of HTA's ``get_comm_comp_overlap``
  (``hta/analyzers/communication_analysis.py``), where communication kernels
  are those of ``is_comm`` (:mod:`traceprobe.reading.comm_kernels`: launched by a
  communication host op, ``record_param_comms``, ``nccl:*``, ``c10d::*``; or carrying
  a ``Collective name`` arg; or named by a communication library, NCCL/RCCL as in
  HTA, DeepEP, NVSHMEM and the other documented families).
- *CPU/GPU overlap*: host compute time during which any device is busy, given
  two ways: as a fraction of host compute time (``fraction``) and as a fraction
  of the shorter side, min(host compute, device busy) (``fraction_of_shorter``,
  the one the verdict judges: full overlap of the shorter side is all the overlap
  there can be). *Host compute* is the union, over all host threads, of ``cpu_op``
  events that launch no device work and wait on none: ops with no
  ``cuda_runtime``/``cuda_driver`` call inside them on their thread. An op that
  only launches kernels or synchronizes is the host *waiting for* or *feeding*
  the GPU, not computing beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ... import intervals as iv
from ... import keyed
from ...reading import Trace
from ..memo import device_column, empty_frame, host_column
from .busy import (
    any_device_busy,
    comm_mask,
    compute_intervals,
    copy_directions,
    copy_mask,
    cpu_ops,
    device_intervals,
    fraction,
    host_thread_codes,
    runtime_calls,
)

DIRECTIONS = ("HtoD", "DtoH", "DtoD", "PtoP", "HtoH")


def copy_overlap(trace: Trace) -> pd.DataFrame:
    """Copy/compute overlap per device and memcpy direction.

    Returns:
        DataFrame with columns ``device`` (int64), ``direction`` (str: HtoD, DtoH,
        DtoD, PtoP, HtoH, another name Kineto used, or ``all``), ``copies`` (int64
        count), ``bytes`` (int64, -1 entries ignored), ``copy_ns`` (int64, union of
        the copies), ``overlapped_ns`` (int64, part of it under compute kernels),
        ``fraction`` (float64, overlapped_ns / copy_ns). Only devices with memcpys.
    """
    is_copy = copy_mask(trace)
    if not is_copy.any():
        return empty_frame(dict.fromkeys(("device", "direction", "copies", "bytes", "copy_ns", "overlapped_ns", "fraction"), object))
    compute = compute_intervals(trace)
    # every (device, direction) group at once, no loop over devices: a group per direction of each device and one
    # for all its copies; each group's copies unioned (grouped_union), the union's part under its device's compute
    # kernels the time two of the group's two sets cover (grouped_coverage)
    dev = device_column(trace, "device")[is_copy]
    dirs = copy_directions(trace)[is_copy]
    start, end, nbytes = (device_column(trace, c)[is_copy] for c in ("start_ns", "end_ns", "bytes"))
    devices = iv.distinct(dev)
    d_pos = np.searchsorted(devices, dev)
    codes, names = pd.factorize(pd.Series(dirs, dtype=object))
    nd = len(names) + 1  # (the last: all directions)
    per_dir = d_pos * nd + codes.astype(np.int64)
    all_key = d_pos * nd + (nd - 1)
    keys = np.concatenate([per_dir, all_key])
    size = devices.size * nd
    uk, us, ue = iv.grouped_union(keys, np.concatenate([start, start]), np.concatenate([end, end]))
    copy_ns = np.zeros(size, np.int64)
    np.add.at(copy_ns, uk, ue - us)
    comp = [compute.get(int(d), iv.empty()) for d in devices.tolist()]
    ck = np.repeat(np.arange(devices.size, dtype=np.int64), [c[0].size for c in comp])
    cs, ce = (np.concatenate([c[i] for c in comp]).astype(np.int64) for i in (0, 1))
    present = iv.distinct(uk)  # the groups with copies of non-zero length (their compute, once each)
    reps = np.isin(ck[:, None] * nd + np.arange(nd)[None, :], present)
    ok, os_, oe = (np.concatenate([x, y]) for x, y in ((uk, (ck[:, None] * nd + np.arange(nd)[None, :])[reps]),
                                                       (us, np.broadcast_to(cs[:, None], reps.shape)[reps]),
                                                       (ue, np.broadcast_to(ce[:, None], reps.shape)[reps])))
    over = iv.grouped_coverage(ok, os_, oe, 2, size)
    copies = np.bincount(keys, minlength=size)
    b = np.concatenate([nbytes, nbytes])
    total_bytes = np.zeros(size, np.int64)
    np.add.at(total_bytes, keys[b >= 0], b[b >= 0])
    # rows: by device; its directions in DIRECTIONS order, others in order of first appearance, then all
    groups = iv.distinct(keys)
    g_dev, g_dir = groups // nd, groups % nd
    first = np.full(size, len(dirs), np.int64)
    np.minimum.at(first, per_dir, np.arange(per_dir.size))
    label = np.array([*map(str, names), "all"], dtype=object)
    rank = np.array([DIRECTIONS.index(x) if x in DIRECTIONS else len(DIRECTIONS) for x in label[:-1]] + [len(DIRECTIONS) + 1])
    groups = groups[np.lexsort((first[groups], rank[g_dir], g_dev))]
    g_dev, g_dir = groups // nd, groups % nd
    num, den = over[groups], copy_ns[groups]
    return pd.DataFrame({
        "device": devices[g_dev].astype(np.int64),
        "direction": label[g_dir],
        "copies": copies[groups].astype(np.int64),
        "bytes": total_bytes[groups],
        "copy_ns": den,
        "overlapped_ns": num,
        "fraction": np.divide(num, den, out=np.full(groups.size, np.nan), where=den > 0),
    })


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
        return empty_frame(dict.fromkeys(cols, object))
    comm = device_intervals(trace, cmask)
    comp = compute_intervals(trace)
    dev = np.sort(device_column(trace, "device")[cmask])
    first = np.flatnonzero(np.r_[True, dev[1:] != dev[:-1]])  # (each device's comm kernels: a run of the sorted devices)
    counts = dict(zip(dev[first].tolist(), np.diff(np.r_[first, dev.size]).tolist()))
    devices = [d for d in comm if d in counts]
    comm_ns = [iv.length(comm[d]) for d in devices]
    over = [iv.length(iv.intersect(comm[d], comp.get(d, iv.empty()))) for d in devices]
    return pd.DataFrame({"device": np.array(devices, np.int64), "rank": pd.array([trace.rank] * len(devices), dtype="Int64"),
                         "comm_kernels": np.array([counts[d] for d in devices], np.int64), "comm_ns": np.array(comm_ns, np.int64),
                         "overlapped_ns": np.array(over, np.int64),
                         "fraction": np.array([fraction(o, c) for o, c in zip(over, comm_ns)], np.float64)})


def host_compute_intervals(trace: Trace) -> iv.Intervals:
    """Union of host compute ops (``cpu_op`` with no runtime/driver call inside; module doc)."""
    host = trace.host_events
    if host.empty:
        return iv.empty()
    is_op = cpu_ops(trace)
    is_rt = runtime_calls(trace)
    if not is_op.any():
        return iv.empty()
    # a runtime call belongs to an op when it starts inside the op on the same
    # thread; every thread in one sort (:mod:`traceprobe.keyed`)
    thread = host_thread_codes(trace)
    start = host_column(trace, "start_ns")
    end = host_column(trace, "end_ns")
    op_idx = np.flatnonzero(is_op)
    inside = keyed.count_between(thread[is_rt], start[is_rt], thread[op_idx], start[op_idx], end[op_idx], hi_side="left")
    pure = inside == 0
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
        fraction_of_shorter: overlapped_ns / min(host_compute_ns, device_busy_ns)
            (NaN when either is zero); the figure the verdict judges.
    """

    host_compute_ns: int
    device_busy_ns: int
    overlapped_ns: int
    fraction: float
    fraction_of_device: float
    fraction_of_shorter: float


def cpu_gpu_overlap(trace: Trace) -> CpuGpuOverlap:
    """CPU/GPU overlap (see :class:`CpuGpuOverlap` and the module docstring)."""
    host = host_compute_intervals(trace)
    gpu = any_device_busy(trace)
    host_ns, gpu_ns = iv.length(host), iv.length(gpu)
    over = iv.length(iv.intersect(host, gpu))
    return CpuGpuOverlap(host_ns, gpu_ns, over, fraction(over, host_ns), fraction(over, gpu_ns), fraction(over, min(host_ns, gpu_ns)))
