"""The work of each op: FLOPs and bytes of every host op that launched device work, beside its device time.

Each device event belongs to the outermost modelled op (:data:`.op_models.OP_FAMILY`) that holds the call which
launched it (:func:`traceprobe.analysis.host.launch_links.launch_rows`) on that call's thread: an
``aten::convolution`` owns its cuDNN kernels, memsets and layout transposes, an ``aten::addmm`` its GEMM (as
TraceLens's op tree gives an op its subtree's kernels). The op's FLOPs and bytes come from its recorded shapes
(:func:`.op_models.op_parameters`, once per distinct (op, args) pair), never from a guess: a trace recorded without
``record_shapes=True`` has no modelled op. An op Kineto counted (``with_flops=True``) is modelled by that count.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...reading import Trace
from ..device.busy import host_thread_codes, per_value
from ..host.launch_links import launch_rows
from ..memo import device_column, host_column, per_trace
from .op_models import OP_FAMILY, class_of_name, op_class, op_parameters

OP_COLUMNS = ("op_row", "name", "args", "family", "klass", "dtype", "device", "start_ns", "time_ns", "kernels",
              "kernel_name", "flops", "bytes", "b", "m", "n", "k")


def has_shapes(trace: Trace) -> bool:
    """Whether the trace's host ops carry recorded shapes (``record_shapes=True``)."""
    return "args" in trace.host_events and bool(len(trace.op_args)) and bool((trace.op_args["dims"] != "").any())


@per_trace
def op_of_event(trace: Trace) -> np.ndarray:
    """Row in ``trace.host_events`` of the modelled op owning each device event (module docstring), int64 aligned with
    ``trace.device_events``; -1 where the trace has no shapes, the event no launching call, or no modelled op holds it.
    Modelled ops nested in another one (``aten::native_layer_norm`` in ``aten::layer_norm``) give way to the outer."""
    n = len(trace.device_events)
    out = np.full(n, -1, dtype=np.int64)
    if not has_shapes(trace):
        return out
    host = trace.host_events
    args = host_column(trace, "args")
    kineto = np.r_[trace.op_args["flops"].to_numpy(np.int64), -1][args] >= 0  # (an op Kineto counted, with_flops=True)
    known = (per_value(host["name"], lambda v: str(v) in OP_FAMILY, False, bool) | kineto) & (args >= 0)
    call = launch_rows(trace)
    if not known.any() or not (call >= 0).any():
        return out
    thread = host_thread_codes(trace).astype(np.int64)
    start, end = host_column(trace, "start_ns"), host_column(trace, "end_ns")
    ops = np.flatnonzero(known)
    ops = ops[np.lexsort((-end[ops], start[ops], thread[ops]))]  # by thread, start, the outer op first
    t, e = thread[ops], end[ops]
    first = np.r_[True, t[1:] != t[:-1]]
    reach = pd.Series(e).groupby(np.cumsum(first)).cummax().to_numpy(np.int64)  # (the furthest end so far, per thread)
    before = np.r_[np.iinfo(np.int64).min, reach[:-1]]
    top = ops[first | (e > before)]  # ops no earlier op of their thread holds
    top = top[np.lexsort((start[top], thread[top]))]  # (by thread, then start: top-level ops of a thread do not nest)
    has = np.flatnonzero(call >= 0)
    at, th = start[call[has]], thread[call[has]]
    t0 = int(min(start[top].min(), at.min()))
    span = int(max(end.max(), at.max())) - t0 + 1  # (threads apart on one axis: thread * span + time since t0)
    if span * (int(thread.max()) + 1) >= 1 << 62:
        return out
    k = np.searchsorted(thread[top] * span + (start[top] - t0), th * span + (at - t0), "right") - 1
    ok = k >= 0
    cand = top[np.maximum(k, 0)]
    ok &= (thread[cand] == th) & (start[cand] <= at) & (end[cand] > at)
    out[has[ok]] = cand[ok]
    return out


@per_trace
def op_work(trace: Trace) -> pd.DataFrame:
    """One row per modelled host op that launched device work, with its work and device time.

    Returns:
        columns ``op_row`` (int64, the op's row of ``trace.host_events``), ``name`` (str), ``args`` (int64, its row of
        ``trace.op_args``), ``family`` (str, :data:`.op_models.OP_FAMILY`; ``""`` where its shapes fit no model),
        ``klass`` (str, the kernel class: :data:`.kernel_classes.CLASSES`), ``dtype`` (str: ``fp32``, ``tf32``
        (fp32 whose kernels' names say TF32), ``bf16``, ``fp16``, ``fp8``; ``""`` where unknown), ``device``
        (int64, of its first device event), ``start_ns`` (int64, its host start), ``time_ns`` (int64, the sum of
        its device events' durations), ``kernels`` (int64, how many), ``kernel_name`` (str, its longest one's name),
        ``flops``, ``bytes`` (int64, -1 where unmodelled), ``b``, ``m``, ``n``, ``k`` (int64, a GEMM's batch and
        shape; 0 for other ops). Empty (those columns) for a trace without shapes.
    """
    owner = op_of_event(trace)
    has = np.flatnonzero(owner >= 0)
    if has.size == 0:
        return pd.DataFrame({c: pd.Series([], dtype=object if c in ("name", "family", "klass", "dtype", "kernel_name")
                                          else np.int64) for c in OP_COLUMNS})
    dur = device_column(trace, "end_ns") - device_column(trace, "start_ns")
    order = has[np.lexsort((has, dur[has], owner[has]))]  # (events by op, the longest last)
    op = owner[order]
    starts = np.flatnonzero(np.r_[True, op[1:] != op[:-1]])
    rows = op[starts]
    longest = order[np.r_[starts[1:], order.size] - 1]
    host, dev = trace.host_events, trace.device_events
    name_code = host["name"].cat.codes.to_numpy(np.int64)[rows]
    op_names = np.asarray(host["name"].cat.categories, dtype=object)
    args = host_column(trace, "args")[rows].astype(np.int64)
    key = name_code * (len(trace.op_args) + 1) + args
    uniq, inv = np.unique(key, return_inverse=True)  # (each distinct (op, args) pair read once)
    u_name, u_args = uniq // (len(trace.op_args) + 1), uniq % (len(trace.op_args) + 1)
    oa = trace.op_args.iloc[u_args]
    params = op_parameters(pd.Series(op_names[u_name]), pd.Series(oa["dims"].to_numpy()), pd.Series(oa["types"].to_numpy()),
                           pd.Series(oa["concrete"].to_numpy()))
    k_code = dev["name"].cat.codes.to_numpy(np.int64)[longest]
    k_names = np.asarray(dev["name"].cat.categories, dtype=object)
    tf32_name = np.array([*("tf32" in str(n).lower() for n in k_names), False], dtype=bool)  # (once per kernel name)
    dtype = params["dtype"].to_numpy(object)[inv]
    dtype = np.where((dtype == "fp32") & tf32_name[k_code], "tf32", dtype)
    flops = params["flops"].to_numpy(np.int64)[inv]
    kineto = trace.op_args["flops"].to_numpy(np.int64)[args]  # (Kineto's own count, with_flops=True, where no model)
    flops = np.where((flops < 0) & (kineto >= 0), kineto, flops)
    klass = np.array([op_class(str(n)) for n in op_names], dtype=object)[name_code]  # (once per op name)
    by_kernel = np.array([class_of_name(str(n)) for n in k_names], dtype=object)  # (an unmodelled op: its kernel's name says)
    klass = np.where(klass == "", by_kernel[k_code], klass)
    return pd.DataFrame({
        "op_row": rows, "name": op_names[name_code], "args": args, "family": params["family"].to_numpy(object)[inv],
        "klass": klass, "dtype": dtype, "device": device_column(trace, "device")[order[starts]],
        "start_ns": host_column(trace, "start_ns")[rows], "time_ns": np.add.reduceat(dur[order], starts),
        "kernels": np.diff(np.r_[starts, order.size]), "kernel_name": k_names[k_code], "flops": flops,
        **{c: params[c].to_numpy(np.int64)[inv] for c in ("bytes", "b", "m", "n", "k")},
    })
