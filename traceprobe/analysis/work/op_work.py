"""The work of each op: FLOPs and bytes of every host op that launched device work, beside its device time.

Each device event belongs to a modelled op (:data:`.op_models.OP_FAMILY`), forward or backward, as
:mod:`.op_owners` links it: the outermost modelled op around its launch, or the modelled op whose forward made the
autograd node that launched it. The op's FLOPs and bytes come from its recorded shapes
(:func:`.op_models.op_parameters`, once per distinct (op, args, backward) triple), never from a guess: a trace recorded
without ``record_shapes=True`` has no modelled op. An op Kineto counted (``with_flops=True``) is modelled by that
count (its forward only).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...reading import Trace
from ..host.launch_links import launch_start_ns
from ..memo import device_column, empty_frame, host_column, per_trace
from .op_models import class_of_name, op_class, op_parameters
from .op_owners import BACKWARD, BACKWARD_TIME, FORWARD, event_owners, recomputed

OP_COLUMNS = ("op_row", "backward", "recomputed", "name", "args", "family", "klass", "dtype", "device", "start_ns",
              "time_ns", "kernels", "kernel_name", "flops", "bytes", "b", "m", "n", "k")
BACKWARD_SUFFIX = " (backward)"
"""What an op's backward row adds to its name."""


@per_trace
def op_work(trace: Trace) -> pd.DataFrame:
    """One row per modelled host op that launched device work, and per modelled op whose backward did (:mod:`.op_owners`),
    with its work and device time.

    Returns:
        columns ``op_row`` (int64, the op's row of ``trace.host_events``), ``backward`` (bool: the row is the op's
        backward, its kernels launched by the autograd nodes its forward made), ``recomputed`` (bool: a forward op
        run again in the backward pass, :func:`.op_owners.recomputed`), ``name`` (str; a backward's ends with
        :data:`BACKWARD_SUFFIX`), ``args`` (int64, the op's row of ``trace.op_args``), ``family`` (str,
        :data:`.op_models.OP_FAMILY`, or a backward's :data:`.op_models.BACKWARD_FAMILY`; ``""`` where unmodelled),
        ``klass`` (str, the kernel class: :data:`.kernel_classes.CLASSES`; a backward's is its op's), ``dtype`` (str:
        ``fp32``, ``tf32`` (fp32 whose kernels' names say TF32), ``bf16``, ``fp16``, ``fp8``; ``""`` where unknown),
        ``device`` (int64, of its first device event), ``start_ns`` (int64, its host start; a backward's, its
        earliest launch), ``time_ns`` (int64, the sum of its device events' durations), ``kernels`` (int64, how
        many), ``kernel_name`` (str, its longest one's name), ``flops``, ``bytes`` (int64, -1 where unmodelled: a
        backward counted in time only), ``b``, ``m``, ``n``, ``k`` (int64, a GEMM's batch and shape; 0 for other
        ops). Empty (those columns) for a trace without shapes.
    """
    owner, part = event_owners(trace)
    has = np.flatnonzero(owner >= 0)
    if has.size == 0:
        return empty_frame({c: object if c in ("name", "family", "klass", "dtype", "kernel_name")
                            else bool if c in ("backward", "recomputed") else np.int64 for c in OP_COLUMNS})
    dur = device_column(trace, "end_ns") - device_column(trace, "start_ns")
    key = owner * 3 + part  # (an op, or its backward)
    order = has[np.lexsort((has, dur[has], key[has]))]  # (events by op, the longest last)
    op = key[order]
    starts = np.flatnonzero(np.r_[True, op[1:] != op[:-1]])
    rows, parts = op[starts] // 3, op[starts] % 3
    longest = order[np.r_[starts[1:], order.size] - 1]
    host, dev = trace.host_events, trace.device_events
    name_code = host["name"].cat.codes.to_numpy(np.int64)[rows]
    op_names = np.asarray(host["name"].cat.categories, dtype=object)
    args = host_column(trace, "args")[rows].astype(np.int64)
    width = len(trace.op_args) + 1
    pair = (name_code * width + args) * 2 + (parts == BACKWARD)
    uniq, inv = np.unique(pair, return_inverse=True)  # (each distinct (op, args, backward) triple read once)
    u_name, u_args, u_back = uniq // 2 // width, uniq // 2 % width, uniq % 2 == 1
    oa = trace.op_args.iloc[u_args]
    params = op_parameters(pd.Series(op_names[u_name]), pd.Series(oa["dims"].to_numpy()), pd.Series(oa["types"].to_numpy()),
                           pd.Series(oa["concrete"].to_numpy()), pd.Series(u_back))
    k_code = dev["name"].cat.codes.to_numpy(np.int64)[longest]
    k_names = np.asarray(dev["name"].cat.categories, dtype=object)
    tf32_name = np.array([*("tf32" in str(n).lower() for n in k_names), False], dtype=bool)  # (once per kernel name)
    dtype = params["dtype"].to_numpy(object)[inv]
    dtype = np.where((dtype == "fp32") & tf32_name[k_code], "tf32", dtype)
    counted = parts != BACKWARD_TIME  # (a backward counted in time only has no work)
    flops = np.where(counted, params["flops"].to_numpy(np.int64)[inv], -1)
    kineto = trace.op_args["flops"].to_numpy(np.int64)[args]  # (Kineto's own count, with_flops=True, where no model)
    flops = np.where((flops < 0) & (kineto >= 0) & (parts == FORWARD), kineto, flops)
    klass = np.array([op_class(str(n)) for n in op_names], dtype=object)[name_code]  # (once per op name)
    by_kernel = np.array([class_of_name(str(n)) for n in k_names], dtype=object)  # (an unmodelled op: its kernel's name says)
    klass = np.where(klass == "", by_kernel[k_code], klass)
    back = parts != FORWARD
    first_launch = np.minimum.reduceat(np.where(launch_start_ns(trace) >= 0, launch_start_ns(trace), np.iinfo(np.int64).max)[order],
                                       starts)
    return pd.DataFrame({
        "op_row": rows, "backward": back, "recomputed": recomputed(trace)[rows] & ~back,
        "name": np.where(back, op_names[name_code] + BACKWARD_SUFFIX, op_names[name_code]), "args": args,
        "family": np.where(counted, params["family"].to_numpy(object)[inv], ""),
        "klass": klass, "dtype": dtype, "device": device_column(trace, "device")[order[starts]],
        "start_ns": np.where(back, first_launch, host_column(trace, "start_ns")[rows]), "time_ns": np.add.reduceat(dur[order], starts),
        "kernels": np.diff(np.r_[starts, order.size]), "kernel_name": k_names[k_code], "flops": flops,
        **{c: np.where(counted, params[c].to_numpy(np.int64)[inv], -1 if c == "bytes" else 0) for c in ("bytes", "b", "m", "n", "k")},
    })
