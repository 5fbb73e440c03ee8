"""The busy time explained: each kernel class against its device's roofline, the ops losing most time, and MFU.

:func:`kernel_efficiency` is the one call: a loaded :class:`~traceprobe.reading.Trace` in, an :class:`Efficiency`
out. Time and share come from every device event (classes from names where the trace has no shapes); FLOPs, bytes,
achieved TFLOP/s and TB/s, the roofline and MFU only from ops whose recorded shapes give their work
(:mod:`.op_work`), never from a guessed shape. An op's roofline time is ``max(FLOPs / peak FLOP/s of its dtype,
bytes / peak bandwidth)`` (Williams, Waterman, Patterson, "Roofline", CACM 2009); it is compute-bound where the first
term is the larger, memory-bound otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..device.busy import all_device_intervals
from ..device.steps import step_windows
from ..memo import device_column, empty_frame, per_trace
from .kernel_classes import CLASSES, kernel_classes
from .op_owners import event_owners, has_shapes
from .op_work import op_work
from .roofline import Roofline, device_name, device_roofline

SHAPES_NOTE = ("no shapes recorded: classes and times from kernel names only; record with "
               "torch.profiler.profile(record_shapes=True) or `traceprobe record --record-shapes` for FLOPs, bytes and MFU")
"""What a trace without shapes is told."""

MATRIX_CLASSES = ("gemm", "attention", "convolution")
"""The classes whose FLOPs count as model FLOPs in MFU (the matrix work; an elementwise op's FLOPs are left out)."""


@dataclass(frozen=True)
class Efficiency:
    """The kernels of one trace against their devices' rooflines.

    Attributes:
        classes: one row per (device, class) with device time: ``device`` (int64), ``klass`` (str, of
            :data:`.kernel_classes.CLASSES`), ``time_ns`` (int64, the sum of its device events' durations), ``share``
            (float, ``time_ns`` over the device's busy time; classes on concurrent streams may sum past 1), ``events``
            (int64), ``modelled_ns`` (int64, the time of its events whose op's work is known), ``flops``, ``bytes``
            (int64, of those ops), ``tflops``, ``tbps`` (float, achieved: FLOPs and bytes over ``modelled_ns``; NaN
            where none), ``roofline_ns`` (Int64, the sum of the ops' roofline times; NA without a roofline),
            ``efficiency`` (float, ``roofline_ns / modelled_ns``: the fraction of its roofline it reaches; NaN where
            unknown), ``bound`` (str, ``compute`` or ``memory`` by the larger term summed over its ops; ``""`` where
            unknown), ``lost_ns`` (Int64, ``modelled_ns - roofline_ns``, at least 0; NA where unknown).
        ops: the ops losing most time against their roofline, one row per (device, op name, recorded args), most
            lost first: ``device``, ``name``, ``klass``, ``dtype``, ``shape`` (str: ``M x N x K`` (``B x`` where
            batched) for a GEMM, else ``""``), ``count``, ``time_ns``, ``flops``, ``bytes`` (int64, totals),
            ``tflops``, ``tbps``, ``efficiency`` (float), ``bound`` (str), ``roofline_ns``, ``lost_ns`` (Int64, NA
            without a roofline).
        mfu: model and hardware FLOPs utilisation (:func:`_mfu` defines both), one row per (device, step) and a row
            ``step`` -1 for the whole window: ``device``, ``step`` (int64), ``window_ns`` (int64: the span of the
            device work the step launched, its host window where it launched none, or the trace's device window for
            step -1), ``flops`` (int64, the model FLOPs of the matrix ops (:data:`MATRIX_CLASSES`) launched in it,
            forward and backward, recomputed ops left out), ``hardware_flops`` (int64, recomputed ops included),
            ``dtype`` (str, the one with most of those FLOPs), ``peak_tflops`` (float), ``mfu`` (float, ``flops /
            window / peak``), ``hfu`` (float, ``hardware_flops / window / peak``; both NaN without a roofline).
        rooflines: each device's :class:`.roofline.Roofline`, None where unknown.
        shapes: whether the trace recorded shapes.
        notes: what the figures could not say, one sentence each (no shapes, an unknown device).
    """

    classes: pd.DataFrame
    ops: pd.DataFrame
    mfu: pd.DataFrame
    rooflines: dict[int, Roofline | None] = field(default_factory=dict)
    shapes: bool = False
    notes: tuple[str, ...] = ()


def op_rooflines(ops: pd.DataFrame, rooflines: dict[int, Roofline | None]) -> pd.DataFrame:
    """``ops`` (:func:`.op_work.op_work`'s columns) with ``compute_ns``, ``memory_ns`` (float: FLOPs over the peak of
    the op's dtype, bytes over the bandwidth, in ns; NaN where the op's work or its device's roofline is unknown) and
    ``roofline_ns`` (float, the larger)."""
    out = ops.copy()
    dev = out["device"].to_numpy(np.int64)
    dtypes = out["dtype"].to_numpy(object)
    peak, bw = np.zeros(len(out)), np.zeros(len(out))
    for v in np.unique(dev).tolist():  # (once per device and dtype)
        if (r := rooflines.get(int(v))) is None:
            continue
        on = dev == v
        bw[on] = r.tbps * 1e12
        for d in set(dtypes[on].tolist()):
            peak[on & (dtypes == d)] = r.peak_flops(str(d))
    flops, moved = out["flops"].to_numpy(np.float64), out["bytes"].to_numpy(np.float64)
    known = (flops >= 0) & (moved >= 0) & (peak > 0) & (bw > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out["compute_ns"] = np.where(known, flops / peak * 1e9, np.nan)
        out["memory_ns"] = np.where(known, moved / bw * 1e9, np.nan)
    out["roofline_ns"] = np.fmax(out["compute_ns"], out["memory_ns"])
    return out


def kernel_efficiency(trace: Trace, roofline: Roofline | None = None, top: int = 10) -> Efficiency:
    """Each kernel class of each device against its roofline, the ``top`` ops losing most time, and MFU per step.

    Args:
        trace: a loaded trace (:func:`traceprobe.reading.load_trace`); shapes (``record_shapes=True``) give FLOPs,
            bytes, the roofline and MFU, a trace without them classes and times only.
        roofline: the user's own peaks (:func:`.roofline.parse_roofline`), else each device's datasheet figures
            matched from ``deviceProperties`` (:func:`.roofline.device_roofline`).
        top: how many ops the ``ops`` table keeps.

    Returns:
        an :class:`Efficiency` (its columns in its docstring).
    """
    ev = trace.device_events
    devices = iv.distinct(device_column(trace, "device")).tolist() if len(ev) else []
    roofs = {d: device_roofline(trace.devices, d, roofline) for d in devices}
    shapes = has_shapes(trace)
    notes = [] if shapes else [SHAPES_NOTE]
    for d, r in roofs.items():
        if r is None and shapes:
            name = device_name(trace.devices, d)
            notes.append(f"{trace.device_label(d)}: no roofline known for {name or 'this device'}: achieved TFLOP/s and "
                         "TB/s only (give peaks with --roofline bf16=...,tbps=...)")
    ops = op_work(trace)
    ops = op_rooflines(ops, roofs) if len(ops) else ops  # (none without shapes: no roofline to put them against)
    return Efficiency(_classes(trace, ops), _top_ops(ops, top), _mfu(trace, ops, roofs), roofs, shapes, tuple(notes))


CLASS_COLUMNS = ("device", "klass", "time_ns", "share", "events", "modelled_ns", "flops", "bytes", "tflops", "tbps",
                 "roofline_ns", "efficiency", "bound", "lost_ns")


def _classes(trace: Trace, ops: pd.DataFrame) -> pd.DataFrame:
    """:attr:`Efficiency.classes` (its columns there): the device events grouped by (device, class) in one sort; the
    modelled ops' sums (pandas' compensated float sums, as before) only where some op's work is known."""
    dev = device_column(trace, "device").astype(np.int64)
    width = len(CLASSES)
    key = dev * width + kernel_classes(trace).astype(np.int64)  # (by device, then class: CLASSES' order)
    dur = device_column(trace, "end_ns") - device_column(trace, "start_ns")
    order = np.argsort(key, kind="stable")
    k = key[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]]) if k.size else np.zeros(0, np.int64)
    u = k[starts]
    g_dev = u // width
    time_ns = np.add.reduceat(dur[order], starts) if k.size else np.zeros(0, np.int64)
    busy = {d: iv.length(s) for d, s in all_device_intervals(trace).items()} if k.size else {}
    b = np.array([busy.get(d, np.nan) for d in g_dev.tolist()], dtype=np.float64)
    n = u.size
    modelled, flops, moved = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    roofline, compute, memory = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    known = ops[(ops["flops"] >= 0) & (ops["bytes"] >= 0)] if len(ops) else ops
    if len(known) and n:
        kg = known.groupby(["device", "klass"])
        sums = pd.DataFrame({"modelled_ns": kg["time_ns"].sum(), "flops": kg["flops"].sum(), "bytes": kg["bytes"].sum(),
                             "roofline": kg["roofline_ns"].sum(min_count=1), "compute": kg["compute_ns"].sum(min_count=1),
                             "memory": kg["memory_ns"].sum(min_count=1)}).reset_index()
        code = {c: i for i, c in enumerate(CLASSES)}
        s_key = sums["device"].to_numpy(np.int64) * width + np.array([code.get(str(c), -width) for c in sums["klass"].tolist()],
                                                                     dtype=np.int64)
        at = np.minimum(np.searchsorted(u, s_key), n - 1)
        hit = u[at] == s_key
        rows, at = np.flatnonzero(hit), at[hit]
        through = np.float64 if rows.size < n else np.int64  # (a left merge with rows unmatched made these float)
        for dst, c in ((modelled, "modelled_ns"), (flops, "flops"), (moved, "bytes")):
            dst[at] = sums[c].to_numpy(np.int64)[rows].astype(through).astype(np.int64)
        for dst, c in ((roofline, "roofline"), (compute, "compute"), (memory, "memory")):
            dst[at] = sums[c].to_numpy(np.float64)[rows]
    t = modelled.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        tflops, tbps = np.where(t > 0, flops / t / 1e3, np.nan), np.where(t > 0, moved / t / 1e3, np.nan)
        efficiency = np.where(t > 0, roofline / t, np.nan)
    has = ~np.isnan(roofline)
    roof = np.round(np.where(has, roofline, 0.0)).astype(np.int64)
    bound = np.where(~has, "", np.where(np.nan_to_num(compute, nan=0.0) >= np.nan_to_num(memory, nan=0.0), "compute", "memory"))
    lost = np.maximum(modelled - roof, 0)
    return pd.DataFrame({
        "device": g_dev, "klass": np.array(CLASSES, dtype=object)[u % width], "time_ns": time_ns,
        "share": time_ns / np.where(np.isnan(b), b, np.maximum(b, 1)), "events": np.diff(np.r_[starts, k.size]).astype(np.int64),
        "modelled_ns": modelled, "flops": flops, "bytes": moved, "tflops": tflops, "tbps": tbps,
        "roofline_ns": pd.arrays.IntegerArray(np.where(has, roof, 0), ~has), "efficiency": efficiency, "bound": bound,
        "lost_ns": pd.arrays.IntegerArray(np.where(has, lost, 0), ~has)})


def _shape(b: int, m: int, n: int, k: int) -> str:
    return "" if m <= 0 else (f"{b} x " if b > 1 else "") + f"{m} x {n} x {k}"


def _top_ops(ops: pd.DataFrame, top: int) -> pd.DataFrame:
    cols = ["device", "name", "klass", "dtype", "shape", "count", "time_ns", "flops", "bytes", "tflops", "tbps",
            "efficiency", "bound", "roofline_ns", "lost_ns"]
    known = ops[ops["roofline_ns"].notna() | (ops["flops"] >= 0)] if len(ops) else ops
    if known.empty:
        return empty_frame(dict.fromkeys(cols, object))
    g = known.groupby(["device", "name", "args"], sort=False)
    out = pd.DataFrame(g.agg(klass=("klass", "first"), dtype=("dtype", "first"), count=("time_ns", "size"), time_ns=("time_ns", "sum"),
                flops=("flops", "sum"), bytes=("bytes", "sum"), roofline=("roofline_ns", "sum"), compute=("compute_ns", "sum"),
                memory=("memory_ns", "sum"), b=("b", "first"), m=("m", "first"), n=("n", "first"), k=("k", "first"))).reset_index()
    out["shape"] = [_shape(*v) for v in zip(out["b"].tolist(), out["m"].tolist(), out["n"].tolist(), out["k"].tolist())]
    t = out["time_ns"].to_numpy(np.float64)
    out["tflops"], out["tbps"] = out["flops"] / t / 1e3, out["bytes"] / t / 1e3
    has = (g["roofline_ns"].count().to_numpy(np.int64) == out["count"].to_numpy(np.int64))  # (every op of it has a roofline)
    out["efficiency"] = np.where(has, out["roofline"] / t, np.nan)
    out["bound"] = np.where(~has, "", np.where(out["compute"] >= out["memory"], "compute", "memory"))
    roof = out["roofline"].fillna(0).round().to_numpy(np.int64)
    lost = np.where(has, np.maximum(out["time_ns"].to_numpy(np.int64) - roof, 0), -1)
    out["roofline_ns"] = pd.array(np.where(has, roof, 0), dtype="Int64")
    out["lost_ns"] = pd.array(np.maximum(lost, 0), dtype="Int64")
    out.loc[~has, ["roofline_ns", "lost_ns"]] = pd.NA
    out = out.assign(_lost=lost).sort_values(["_lost", "time_ns"], ascending=False, kind="stable").head(top)
    return out.loc[:, cols].reset_index(drop=True)


def _device_spans(trace: Trace, steps: np.ndarray, host_ns: np.ndarray) -> np.ndarray:
    """Per step of :func:`..device.steps.step_windows` (its numbers ``steps``), the span of the device work it launched
    (:func:`..device.steps.device_steps`' GPU interval, int64 ns), else its host window (``host_ns``)."""
    from ..device.profiled import launches
    from ..device.steps import device_steps

    ds = device_steps(trace, launches(trace))
    gpu = pd.Series((ds["gpu_end_ns"] - ds["gpu_start_ns"]).to_numpy(np.int64), index=ds["step"].to_numpy(np.int64))
    got = gpu.reindex(steps).to_numpy(np.float64)
    return np.where(np.isfinite(got) & (got > 0), got, host_ns).astype(np.int64)


def _mfu(trace: Trace, ops: pd.DataFrame, roofs: dict[int, Roofline | None]) -> pd.DataFrame:
    """MFU and HFU per (device, step) and over the trace window (step -1): :attr:`Efficiency.mfu`'s columns.

    Definitions (PaLM, Chowdhery et al. 2022, Appendix B): *model FLOPs utilisation* (MFU) is the FLOPs the model
    needs, forward and backward, each op counted once, over the time taken, over the device's peak FLOP/s; *hardware
    FLOPs utilisation* (HFU) counts the FLOPs the device ran, the forward ops run again in the backward pass
    (activation checkpointing's recomputation, :func:`.op_owners.recomputed`) included. Where nothing is recomputed
    the two are equal. Only the matrix ops (:data:`MATRIX_CLASSES`) count; the peak is that of the dtype holding most
    of the model FLOPs."""
    cols = {"device": np.int64, "step": np.int64, "window_ns": np.int64, "flops": np.int64, "hardware_flops": np.int64,
            "dtype": object, "peak_tflops": np.float64, "mfu": np.float64, "hfu": np.float64}
    mat = ops.loc[(ops["klass"].isin(MATRIX_CLASSES) & (ops["flops"] > 0)).to_numpy(bool)] if len(ops) else ops
    if mat.empty:
        return empty_frame(cols)
    w = step_windows(trace)
    start = mat["start_ns"].to_numpy(np.int64)
    ws, we = w["start_ns"].to_numpy(np.int64), w["end_ns"].to_numpy(np.int64)
    k = np.searchsorted(ws, start, "right") - 1  # (the step whose host window holds the op's start)
    inside = (k >= 0) & (start < we[np.maximum(k, 0)]) if len(ws) else np.zeros(len(start), bool)
    lo, hi = trace.window_ns
    steps = w["step"].to_numpy(np.int64)
    hw = mat["flops"].to_numpy(np.int64)
    per = pd.DataFrame({"device": mat["device"].to_numpy(np.int64), "dtype": mat["dtype"].to_numpy(object),
                        "flops": np.where(mat["recomputed"].to_numpy(bool), 0, hw), "hardware_flops": hw})
    whole = per.assign(step=-1, window_ns=max(hi - lo, 1))
    span = _device_spans(trace, steps, we - ws)  # (a step's device span: the host runs ahead, so its own window is short)
    stepped = per[inside].assign(step=steps[k[inside]], window_ns=span[k[inside]])
    both = pd.concat([whole, stepped], ignore_index=True)
    keys = ["device", "step", "window_ns"]
    by = pd.DataFrame(both.groupby([*keys, "dtype"], sort=True)[["flops", "hardware_flops"]].sum()).reset_index()
    top = by.sort_values(["flops", "hardware_flops"], ascending=False, kind="stable").drop_duplicates(["device", "step"])
    total = pd.DataFrame(by.groupby(keys)[["flops", "hardware_flops"]].sum()).reset_index()
    out = total.merge(top.loc[:, ["device", "step", "dtype"]], on=["device", "step"]).sort_values(["device", "step"])
    peak = [r.peak_flops(str(d)) / 1e12 if (r := roofs.get(int(v))) is not None else np.nan
            for v, d in zip(out["device"].tolist(), out["dtype"].tolist())]
    out["peak_tflops"] = np.array(peak, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_ns = out["window_ns"] * (out["peak_tflops"] * 1e3)  # (the peak's FLOPs in the window)
        out["mfu"] = np.where(out["peak_tflops"] > 0, out["flops"] / per_ns, np.nan)
        out["hfu"] = np.where(out["peak_tflops"] > 0, out["hardware_flops"] / per_ns, np.nan)
    return out.loc[:, list(cols)].astype({c: t for c, t in cols.items() if t is not object}).reset_index(drop=True)


@per_trace
def achieved_tflops(trace: Trace) -> pd.DataFrame:
    """Per device, the TFLOP/s its kernels achieved at each change, as a step function: ``device``, ``ts`` (int64 ns),
    ``value`` (float TFLOP/s from ``ts`` until the device's next row; its last row 0). Each device event of an op
    whose FLOPs are known (:func:`.op_work.op_work`, forward or backward) runs at its op's FLOPs over its op's device
    time (the op's work spread evenly over its kernels' time); events at once add. Its integral over time is the
    modelled FLOPs. Empty for a trace without shapes (nothing is computed for one)."""
    empty = empty_frame({"device": np.int64, "ts": np.int64, "value": np.float64})
    ops = op_work(trace)
    if ops.empty:
        return empty
    owner, part = event_owners(trace)
    rate = (ops["flops"].to_numpy(np.float64) / np.maximum(ops["time_ns"].to_numpy(np.float64), 1)) / 1e3  # (TFLOP/s)
    rate = np.where(ops["flops"].to_numpy(np.int64) > 0, rate, 0.0)
    pos = pd.Index(ops["op_row"].to_numpy(np.int64) * 2 + ops["backward"].to_numpy(bool)).get_indexer(owner * 2 + (part > 0))
    ev = np.flatnonzero((owner >= 0) & (pos >= 0))
    ev = ev[rate[pos[ev]] > 0]
    if ev.size == 0:
        return empty
    r, dev = rate[pos[ev]], device_column(trace, "device")[ev].astype(np.int64)
    t = np.r_[device_column(trace, "start_ns")[ev], device_column(trace, "end_ns")[ev]].astype(np.int64)
    d, step, opens = np.r_[dev, dev], np.r_[r, -r], np.r_[np.ones(ev.size, np.int64), -np.ones(ev.size, np.int64)]
    o = np.lexsort((step, t, d))  # (by device and time; at one time, ends before starts)
    d, t, step, opens = d[o], t[o], step[o], opens[o]
    first = np.r_[True, d[1:] != d[:-1]]
    group = np.cumsum(first)
    value = pd.Series(step).groupby(group).cumsum().to_numpy(np.float64)
    running = pd.Series(opens).groupby(group).cumsum().to_numpy(np.int64)
    value = np.where(running > 0, np.maximum(value, 0.0), 0.0)  # (none running: exactly 0, not a rounding residue)
    last = np.r_[(d[1:] != d[:-1]) | (t[1:] != t[:-1]), True]
    return pd.DataFrame({"device": d[last], "ts": t[last], "value": value[last]})


@per_trace
def trace_efficiency(trace: Trace) -> Efficiency:
    """:func:`kernel_efficiency` of ``trace`` with the datasheets' (or ``--roofline``'s) peaks, once per trace: what the
    report's figures ``kernel_classes``, ``kernel_ops`` and ``mfu`` show."""
    return kernel_efficiency(trace)


def window_mfu(extra: dict[str, pd.DataFrame]) -> dict[str, float]:
    """``{"mfu": ...}``: a report's MFU over its trace window (its ``mfu`` figure's step -1 row, the first device's;
    NaN where it has none: no shapes, no matrix work or no roofline). What ``traceprobe job`` distributes across ranks."""
    m = extra.get("mfu")
    rows = m.loc[(m["step"] < 0).to_numpy(bool), "mfu"].dropna() if m is not None and len(m) else pd.Series([], dtype=float)
    return {"mfu": float(rows.iloc[0]) if len(rows) else float("nan")}
