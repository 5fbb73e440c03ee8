"""The kernels against their roofline for people: what ``--detail`` shows of a trace's kernel classes, top ops and MFU.
(``kernel_classes``, ``kernel_ops``, ``mfu``: :mod:`traceprobe.analysis.work.efficiency`), as tables of strings and lines."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ..analysis.per_trace import OverlapReport
from ..analysis.work.efficiency import SHAPES_NOTE

Spec = tuple[str, pd.DataFrame, list[tuple[str, str, str]]]
"""A table as ``--detail`` draws it: title, rows, (column, header, format) with format ``ms``, ``pct``, ``int``, ``str``."""


def _num(v: Any, digits: int = 1) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{digits}f}"


def roofline_parts(r: OverlapReport) -> list[Spec | str]:
    """The tables (:data:`Spec`) and lines (str) of ``r``'s kernels against their roofline; none without device work."""
    classes = r.extra.get("kernel_classes")
    if classes is None or classes.empty:
        return []
    c = classes.assign(tflops_s=[_num(v) for v in classes["tflops"]], tbps_s=[_num(v, 2) for v in classes["tbps"]],
                       lost=classes["lost_ns"].astype("Float64").fillna(float("nan")).astype(float))
    parts: list[Spec | str] = [("kernel classes (device time; work and roofline where shapes were recorded)", c,
                                [("device", "device", "int"), ("klass", "class", "str"), ("time_ns", "time ms", "ms"),
                                 ("share", "of busy", "pct"), ("tflops_s", "TFLOP/s", "str"), ("tbps_s", "TB/s", "str"),
                                 ("efficiency", "of roofline", "pct"), ("bound", "bound", "str"), ("lost", "lost ms", "ms")])]
    ops = r.extra.get("kernel_ops")
    if ops is not None and not ops.empty:
        o = ops.assign(op=[f"{n} {s}".strip() for n, s in zip(ops["name"], ops["shape"])],
                       tflops_s=[_num(v) for v in ops["tflops"]], tbps_s=[_num(v, 2) for v in ops["tbps"]],
                       lost_ns=ops["lost_ns"].astype("Float64").fillna(float("nan")).astype(float))
        parts.append(("ops losing most time against their roofline", o,
                      [("op", "op", "str"), ("dtype", "dtype", "str"), ("count", "count", "int"), ("time_ns", "time ms", "ms"),
                       ("tflops_s", "TFLOP/s", "str"), ("tbps_s", "TB/s", "str"), ("efficiency", "of roofline", "pct"),
                       ("bound", "bound", "str"), ("lost_ns", "lost ms", "ms")]))
    mfu = r.extra.get("mfu")
    if mfu is not None and not mfu.empty:
        step, dev, value = (mfu[c].to_numpy() for c in ("step", "device", "mfu"))
        for i in map(int, (step < 0).nonzero()[0]):
            steps = value[(step >= 0) & (dev == dev[i])]
            steps = steps[~pd.isna(steps)]
            per = f"; per step {steps.min():.1%} to {steps.max():.1%}" if len(steps) else ""
            m, peak = float(value[i]), float(mfu["peak_tflops"].iloc[i])
            of = f" of {mfu['dtype'].iloc[i]}'s {_num(peak)} TFLOP/s" if not math.isnan(m) else ""
            hw = int(mfu["hardware_flops"].iloc[i]) if "hardware_flops" in mfu else int(mfu["flops"].iloc[i])
            hfu = (f"; HFU {_num(float(mfu['hfu'].iloc[i]) * 100)}% with the recomputed work ({hw / 1e12:,.2f} TFLOP: "
                   "activation checkpointing)" if hw != int(mfu["flops"].iloc[i]) else "")  # (shown where it differs)
            parts.append(f"MFU (device {dev[i]}): {_num(m * 100)}%{of} ({int(mfu['flops'].iloc[i]) / 1e12:,.2f} TFLOP of matrix work "
                         f"over the window){per}{hfu}")
    if (classes["flops"] == 0).all():
        parts.append(SHAPES_NOTE)
    elif classes["roofline_ns"].isna().all():
        parts.append("no roofline known for this device: achieved TFLOP/s and TB/s only (give peaks with --roofline bf16=...,tbps=...)")
    return parts
