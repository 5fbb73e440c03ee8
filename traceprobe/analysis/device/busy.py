"""Busy intervals: per (device, stream), per device, and the trace window.

Definitions (quoted by docs/measures.md):

- *busy intervals* of a (device, stream): the union of the [start, end) intervals
  of its kernels, memcpys and memsets; *busy time* is their total length.
- *utilization*: busy time / trace window, where the *trace window* runs from the
  first device event's start to the last device event's end (all devices).
- a *device* is busy when any of its streams is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading import Trace
from ..memo import device_column, empty_frame, per_trace

Intervals = iv.Intervals


def fraction(num: int, den: int) -> float:
    """``num / den``, NaN when ``den`` is not positive (an undefined figure)."""
    return float(num) / den if den > 0 else float("nan")


def fraction_of(df: pd.DataFrame, num: str, den: str, where: np.ndarray | None = None) -> float:
    """Sum of column ``num`` over sum of column ``den``, over the rows ``where`` selects (bool array; default all):
    NaN when there are none or the sum is not positive."""
    if df.empty:
        return float("nan")
    if where is None:
        return fraction(df[num].sum(), df[den].sum())
    return fraction(int(df[num].to_numpy()[where].sum()), int(df[den].to_numpy()[where].sum()))


def stream_busy(trace: Trace) -> pd.DataFrame:
    """Busy time per (device, stream).

    Returns:
        DataFrame with columns ``device`` (int64), ``stream`` (int64),
        ``busy_ns`` (int64, length of the union of the stream's events),
        ``utilization`` (float64, busy_ns / trace window), ``events`` (int64),
        ``kernels``, ``memcpys``, ``memsets`` (int64 counts); one row per stream
        that has device events, sorted by device and stream.
    """
    ev = trace.device_events
    cols = ["device", "stream", "busy_ns", "utilization", "events", "kernels", "memcpys", "memsets"]
    if ev.empty:
        return empty_frame({c: np.float64 if c == "utilization" else np.int64 for c in cols})
    # (device, stream) pairs: the rows are sorted at the end, so any numbering of pairs will do
    dcode, devs = pd.factorize(device_column(trace, "device"))
    scode, strs = pd.factorize(device_column(trace, "stream"))
    codes, pairs = pd.factorize(dcode * len(strs) + scode)
    n = len(pairs)
    k, s, e = iv.grouped_union(codes, device_column(trace, "start_ns"), device_column(trace, "end_ns"))
    busy = np.bincount(k, weights=(e - s), minlength=n).astype(np.int64)
    kind = ev["kind"]
    lo, hi = trace.window_ns
    device, stream = devs[pairs // len(strs)], strs[pairs % len(strs)]
    order = np.lexsort((stream, device))  # by device, then stream (each pair once)
    cols = {
        "device": device,
        "stream": stream,
        "busy_ns": busy,
        "utilization": busy / max(hi - lo, 1),
        "events": np.bincount(codes, minlength=n).astype(np.int64),
        "kernels": np.bincount(codes[(kind == "kernel").to_numpy()], minlength=n).astype(np.int64),
        "memcpys": np.bincount(codes[(kind == "memcpy").to_numpy()], minlength=n).astype(np.int64),
        "memsets": np.bincount(codes[(kind == "memset").to_numpy()], minlength=n).astype(np.int64),
    }
    return pd.DataFrame({c: v[order] for c, v in cols.items()})


def device_intervals(trace: Trace, mask: np.ndarray | None = None) -> dict[int, Intervals]:
    """Busy interval set of each device, from the device events selected by ``mask``.

    Returns:
        ``{device: (starts, ends)}`` normalised int64 ns interval sets, for every
        device that has any device event (possibly empty under ``mask``).
    """
    ev = trace.device_events
    dev, start, end = device_column(trace, "device"), device_column(trace, "start_ns"), device_column(trace, "end_ns")
    devices = iv.distinct(dev) if not ev.empty else np.zeros(0, np.int64)
    if mask is not None:  # numpy columns, not a copy of the whole frame
        dev, start, end = dev[mask], start[mask], end[mask]
    out: dict[int, Intervals] = {int(d): iv.empty() for d in devices}
    if dev.size == 0:
        return out
    k, s, e = iv.grouped_union(dev, start, end)
    if k.size == 0:  # every selected event had zero length
        return out
    bounds = np.flatnonzero(np.diff(k)) + 1
    for ks, ss, es in zip(np.split(k, bounds), np.split(s, bounds), np.split(e, bounds)):
        out[int(ks[0])] = (ss, es)
    return out


@per_trace
def all_device_intervals(trace: Trace) -> dict[int, Intervals]:
    """:func:`device_intervals` of every device event, once per trace."""
    return device_intervals(trace)


@per_trace
def any_device_busy(trace: Trace) -> Intervals:
    """Where any device runs any device event: the union of :func:`all_device_intervals`, once per trace."""
    return iv.coverage_at_least(list(all_device_intervals(trace).values()), 1)  # (no device: the empty set)


def stream_intervals(trace: Trace, device: int, mask: np.ndarray | None = None) -> list[Intervals]:
    """Busy interval sets of each stream of ``device`` (events selected by ``mask``)."""
    m = device_column(trace, "device") == device
    if mask is not None:
        m = m & mask
    if not m.any():
        return []
    k, s, e = iv.grouped_union(device_column(trace, "stream")[m], device_column(trace, "start_ns")[m], device_column(trace, "end_ns")[m])
    if k.size == 0:
        return []
    bounds = np.flatnonzero(np.diff(k)) + 1
    return list(zip(np.split(s, bounds), np.split(e, bounds)))


@per_trace
def compute_mask(trace: Trace) -> np.ndarray:
    """Rows of ``device_events`` that are compute kernels (kernels that are not communication, :func:`comm_mask`)."""
    return is_kind(trace, "kernel") & ~device_column(trace, "is_comm").astype(bool)


@per_trace
def copy_mask(trace: Trace) -> np.ndarray:
    """Rows of ``device_events`` that are memcpys."""
    return is_kind(trace, "memcpy")


@per_trace
def comm_mask(trace: Trace) -> np.ndarray:
    """Rows of ``device_events`` that are communication kernels (bool array), by what the trace says (``is_comm``,
    :mod:`traceprobe.reading.comm_kernels`): launched by a communication host op (``record_param_comms``, ``nccl:*``,
    ``c10d::*``), or carrying a ``Collective name`` arg, or named by a communication library (NCCL/RCCL by HTA's
    convention, DeepEP, NVSHMEM, the documented families)."""
    return is_kind(trace, "kernel") & device_column(trace, "is_comm").astype(bool)


def work_ns(trace: Trace) -> int:
    """*Work time*: time during which any device runs work other than communication kernels, in ns.

    The union, over all devices, of compute kernels, memcpys and memsets. NCCL
    kernels are left out because they spin while waiting for their peers: their
    time says which rank waited, not which rank had the most to do.
    """
    sets = list(device_intervals(trace, ~comm_mask(trace)).values())
    return iv.length(iv.coverage_at_least(sets, 1)) if sets else 0


RUNTIME_CATS = ("cuda_runtime", "cuda_driver")
"""Kineto categories of the host calls that launch and wait for device work (ROCm's are filed under ``cuda_runtime``)."""


def per_value(values: pd.Series | np.ndarray, fn: Callable[[Any], Any], missing: Any = None, dtype: Any = object) -> np.ndarray:
    """``fn(v)`` for every value, as an array of ``dtype``, with ``fn`` called once per distinct value:
    through a categorical column's codes (no per-row work in pandas), else through ``pandas.factorize``.
    ``missing`` stands where a value is missing (NaN, None)."""
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype):
        cat = cast(pd.Categorical, values.array)  # (the Categorical itself: its codes without a Series around them)
        codes, uniques = cat.codes, cat.categories.tolist()
    else:
        codes, uniques = pd.factorize(values if isinstance(values, pd.Series) else pd.Series(values, dtype=object))
        uniques = uniques.tolist()
    lut = np.empty(len(uniques) + 1, dtype=dtype)  # the last entry: code -1 (missing)
    lut[:-1] = [fn(u) for u in uniques]
    lut[-1] = missing
    return lut[codes.astype(np.intp)]


def equal_to(values: pd.Series | np.ndarray, value: Any) -> np.ndarray:
    """``values == value`` as a bool array, through :func:`per_value` (one comparison per distinct value: a
    categorical column's codes, no elementwise comparison in pandas); a missing value is not equal."""
    return per_value(values, lambda v: bool(v == value), False, bool)


@per_trace
def is_kind(trace: Trace, kind: str) -> np.ndarray:
    """Bool array over ``trace.device_events``: the rows of ``kind`` (``kernel``, ``memcpy``, ``memset``), once per trace."""
    return equal_to(trace.device_events["kind"], kind)


@per_trace
def runtime_calls(trace: Trace) -> np.ndarray:
    """Bool array over ``trace.host_events``: the CUDA runtime and driver calls (:data:`RUNTIME_CATS`), once per trace."""
    return per_value(trace.host_events["cat"], RUNTIME_CATS.__contains__, False, bool)


@per_trace
def cpu_ops(trace: Trace) -> np.ndarray:
    """Bool array over ``trace.host_events``: the host ops (Kineto's ``cpu_op`` category), once per trace."""
    return equal_to(trace.host_events["cat"], "cpu_op")


@per_trace
def compute_intervals(trace: Trace) -> dict[int, Intervals]:
    """:func:`device_intervals` of the compute kernels (:func:`compute_mask`), once per trace."""
    return device_intervals(trace, compute_mask(trace))


@per_trace
def copy_directions(trace: Trace) -> np.ndarray:
    """Memcpy direction of each row of ``device_events`` as str (object array): ``HtoD``, ``DtoH``,
    ``DtoD``, ``PtoP``, ``HtoH`` (or another name Kineto used), ``unknown`` where none (kernels, memsets,
    unparsed copies)."""
    return per_value(trace.device_events["direction"], str, "unknown")


@per_trace
def pageable_copies(trace: Trace) -> np.ndarray:
    """Rows of ``device_events`` that are copies from or to pageable host memory (Kineto's memcpy name)."""
    ev = trace.device_events
    if "src_kind" not in ev:
        return np.zeros(len(ev), dtype=bool)
    return equal_to(ev["src_kind"], "Pageable") | equal_to(ev["dst_kind"], "Pageable")


@per_trace
def host_name_codes(trace: Trace) -> tuple[np.ndarray, list[str]]:
    """``(codes, names)``: a code (int64, -1 missing) per row of ``trace.host_events`` for its name, once per trace."""
    name = trace.host_events["name"]
    if isinstance(name.dtype, pd.CategoricalDtype):
        return name.cat.codes.to_numpy().astype(np.int64), [str(c) for c in name.cat.categories]
    codes, uniq = pd.factorize(name.astype(str))
    return codes.astype(np.int64), [str(u) for u in uniq]


@per_trace
def host_thread_codes(trace: Trace) -> np.ndarray:
    """A code (int64) per row of ``trace.host_events`` for its host thread, (pid, tid) compared as strings."""
    host = trace.host_events
    pid, tid = host["pid"], host["tid"]
    if isinstance(pid.dtype, pd.CategoricalDtype) and isinstance(tid.dtype, pd.CategoricalDtype):
        pc, tc = pid.cat.codes.to_numpy(np.int64), tid.cat.codes.to_numpy(np.int64)
        cats = (pid.cat.categories, tid.cat.categories)
        if pc.min(initial=0) >= 0 and tc.min(initial=0) >= 0 and all(pd.api.types.is_string_dtype(c) for c in cats):
            # distinct categories are distinct strings: a pair of codes is a pair of strings
            return pd.factorize(pc * len(cats[1]) + tc)[0]
    return pd.MultiIndex.from_arrays([pid.astype(str), tid.astype(str)]).factorize()[0]


ASIDE_KEY = ("traceprobe.analysis.device.busy", "set_aside_intervals", ())
"""Where a trace derived by leaving device events out keeps the device time of the events it left out."""


def set_aside_intervals(trace: Trace) -> dict[int, Intervals]:
    """Per device, the union of the device events left out of the figures (set aside, :mod:`.profiled`).

    A trace made by :func:`.profiled.keep_device_events` (the work launched inside
    the profiled steps) carries the union of the events it left out, per device:
    that work is not attributed to the window's figures, but the device was not idle
    while it ran, and copies it hid were not exposed. Empty for any other trace.
    Returns ``{device: normalised int64 ns intervals}``.
    """
    return trace.derived.get(ASIDE_KEY, {})


def occupied_intervals(trace: Trace) -> dict[int, Intervals]:
    """Per device, the time any of its work occupied it, set aside or not: the union of
    :func:`all_device_intervals` and :func:`set_aside_intervals`. Returns
    ``{device: normalised int64 ns intervals}``."""
    aside = set_aside_intervals(trace)
    busy = all_device_intervals(trace)
    if not aside:
        return busy
    out = {}
    for d in sorted(set(busy) | set(aside)):
        sets = [x for x in (busy.get(d), aside.get(d)) if x is not None]
        out[d] = iv.coverage_at_least(sets, 1)
    return out
