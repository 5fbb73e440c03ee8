"""Loading Kineto / Chrome trace JSON into pandas DataFrames.

``load_trace(path)`` reads what ``torch.profiler``'s ``export_chrome_trace`` and
``tensorboard_trace_handler`` write (``.json`` or gzipped ``.json.gz``; gzip is
detected from the file's magic bytes, not its name). The file is decoded once by
``msgspec`` into typed structs holding only the fields traceprobe needs; columns
are then built with C-level iteration (``map``/``attrgetter``/``numpy.fromiter``)
and every later step is vectorized. Reading a trace never imports torch.

Timestamps: Kineto writes ``ts`` and ``dur`` in microseconds, often with three
decimals. They are converted to int64 nanoseconds by splitting integer and
fractional microseconds, so the conversion is exact (to the nanosecond) for every
``ts`` below 2**43 µs (about 101 days of trace clock); torch's traces are relative
to ``baseTimeNanoseconds`` and stay far below that.
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, Union

import msgspec
import numpy as np
import pandas as pd

from .errors import TraceFormatError

# --- typed decode -----------------------------------------------------------------


class _Args(msgspec.Struct, gc=False):
    device: Union[int, None] = -1
    stream: Union[int, None] = -1
    correlation: Union[int, None] = -1
    bytes: Union[int, None] = -1
    external_id: Union[int, None] = msgspec.field(default=-1, name="External id")


_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: Union[int, str] = -1
    tid: Union[int, str] = -1
    ts: Union[float, None] = math.nan
    dur: Union[float, None] = 0.0
    args: Union[_Args, None] = None


class _TraceFile(msgspec.Struct):
    traceEvents: list[_Event]
    schemaVersion: Any = None
    deviceProperties: Union[list[dict[str, Any]], None] = None
    distributedInfo: Union[dict[str, Any], None] = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    cupti_version: Any = None
    trace_id: Any = None
    displayTimeUnit: Any = None
    baseTimeNanoseconds: Any = None
    traceName: Any = None


_DECODER = msgspec.json.Decoder(_TraceFile)
_LIST_DECODER = msgspec.json.Decoder(list[_Event])

# Kineto categories, lower-cased; older torch releases wrote capitalised names.
DEVICE_CATEGORIES = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
}
"""Kineto ``cat`` (lower-cased) of device activity -> traceprobe ``kind``."""

HOST_CATEGORIES = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "cuda_runtime": "cuda_runtime",
    "runtime": "cuda_runtime",
    "cuda_driver": "cuda_driver",
    "user_annotation": "user_annotation",
}
"""Kineto ``cat`` (lower-cased) of host activity -> traceprobe ``cat``."""

_MEMCPY_RE = re.compile(r"^Memcpy\s+(?P<direction>\w+)\s*\((?P<src>\w+)\s*->\s*(?P<dst>\w+)\)")
_COMM_RE = re.compile(r"nccl|rccl", re.IGNORECASE)
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")

MAX_TS_US = 2.0**43


@dataclass(frozen=True)
class Trace:
    """One loaded trace.

    Attributes:
        path: the file read.
        device_events: one row per device activity (Kineto ``cat`` kernel,
            gpu_memcpy or gpu_memset), sorted by ``start_ns``. Columns:

            - ``device`` (int64): GPU index, from ``args.device`` (else ``pid``).
            - ``stream`` (int64): CUDA stream id, from ``args.stream`` (else ``tid``).
            - ``kind`` (category): ``kernel``, ``memcpy`` or ``memset``.
            - ``name`` (category): kernel or copy name as Kineto wrote it.
            - ``start_ns``, ``end_ns`` (int64): [start, end) in ns.
            - ``bytes`` (int64): bytes moved or set; -1 where not given (kernels).
            - ``correlation`` (int64): CUPTI correlation id linking the event to the
              host runtime call that launched it; -1 where absent.
            - ``direction`` (category): memcpy direction from the name: HtoD, DtoH,
              DtoD, PtoP or HtoH; NaN for kernels and memsets.
            - ``src_kind``, ``dst_kind`` (category): memory kinds from the memcpy
              name (Pageable, Pinned, Device, ...); NaN where not a memcpy.
            - ``is_comm`` (bool): a communication kernel, by HTA's convention: a
              ``kernel`` whose name contains ``nccl`` or ``rccl`` (any case).
              Every other kernel is compute.
        host_events: one row per host activity (``cpu_op``, ``cuda_runtime``,
            ``cuda_driver``, ``user_annotation``), sorted by ``start_ns``. Columns
            ``pid`` and ``tid`` (str: Kineto may write either numbers or labels),
            ``cat`` (category), ``name`` (category), ``start_ns``, ``end_ns``
            (int64 ns), ``correlation`` and ``external_id`` (int64, -1 if absent).
        devices: ``deviceProperties`` as a DataFrame (one row per GPU, Kineto's
            keys as columns: ``id``, ``name``, ``totalGlobalMem`` in bytes, ...);
            empty if the trace has none.
        metadata: other top-level fields (``distributedInfo``, ``schemaVersion``,
            ``cuda_runtime_version``, ``baseTimeNanoseconds``, ``traceName``, ...).
        steps: ``ProfilerStep#N`` annotations: columns ``step`` (int64),
            ``start_ns``, ``end_ns`` (int64); empty if none.
    """

    path: str
    device_events: pd.DataFrame
    host_events: pd.DataFrame
    devices: pd.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    steps: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def window_ns(self) -> tuple[int, int]:
        """(first device event start, last device event end) in ns; (0, 0) if none."""
        ev = self.device_events
        if ev.empty:
            return (0, 0)
        return int(ev["start_ns"].min()), int(ev["end_ns"].max())

    @property
    def rank(self) -> int | None:
        """The distributed rank from ``distributedInfo.rank``, if the trace has it."""
        info = self.metadata.get("distributedInfo") or {}
        r = info.get("rank")
        return int(r) if isinstance(r, (int, float)) else None


def _read_bytes(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise TraceFormatError(path, "is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceFormatError(path, f"corrupt or truncated gzip data ({exc})") from None
    return raw


def _decode(path: Path, raw: bytes) -> _TraceFile:
    if not raw.strip():
        raise TraceFormatError(path, "empty file")
    try:
        if raw.lstrip()[:1] == b"[":
            # Chrome's "JSON Array Format": a bare list of events
            return _TraceFile(traceEvents=_LIST_DECODER.decode(raw))
        return _DECODER.decode(raw)
    except msgspec.ValidationError as exc:
        msg = str(exc)
        if "missing required field `traceEvents`" in msg:
            raise TraceFormatError(path, "not a Chrome trace: no 'traceEvents' list") from None
        raise TraceFormatError(path, f"unexpected trace content: {msg}") from None
    except msgspec.DecodeError as exc:
        msg = str(exc)
        if "truncated" in msg.lower():
            raise TraceFormatError(path, f"truncated JSON ({msg})") from None
        raise TraceFormatError(path, f"not valid JSON ({msg})") from None


def _us_to_ns(values: np.ndarray) -> np.ndarray:
    """float64 µs -> int64 ns, exact to the ns below 2**43 µs (see module doc)."""
    whole = np.floor(values)
    frac_ns = np.rint((values - whole) * 1000.0)
    return whole.astype(np.int64) * 1000 + frac_ns.astype(np.int64)


def _column(objs: np.ndarray, attr: str, dtype: Any) -> np.ndarray:
    getter = attrgetter(attr)
    if dtype is object:
        out = np.empty(len(objs), dtype=object)
        out[:] = list(map(getter, objs))
        return out
    return np.fromiter(map(getter, objs), dtype=dtype, count=len(objs))


def _args(objs: np.ndarray) -> np.ndarray:
    """The events' ``args`` structs, with a default struct where absent or null."""
    args = _column(objs, "args", object)
    args[np.equal(args, None)] = _NO_ARGS
    return args


def _int_column(objs: np.ndarray, attr: str) -> np.ndarray:
    vals = _column(objs, attr, object)
    try:
        return vals.astype(np.int64)
    except (TypeError, ValueError):  # nulls
        return pd.array(vals, dtype="Int64").fillna(-1).to_numpy(dtype=np.int64)


def _times(path: Path, objs: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    ts = _column(objs, "ts", object)
    dur = _column(objs, "dur", object)
    try:
        ts_f = ts.astype(np.float64)
        dur_f = dur.astype(np.float64)
    except (TypeError, ValueError):
        ts_f = pd.to_numeric(pd.Series(ts), errors="coerce").to_numpy(np.float64)
        dur_f = pd.to_numeric(pd.Series(dur), errors="coerce").to_numpy(np.float64)
    bad = ~np.isfinite(ts_f) | ~np.isfinite(dur_f) | (dur_f < 0) | (ts_f < 0) | (ts_f >= MAX_TS_US)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TraceFormatError(
            path,
            f"{int(bad.sum())} {what} event(s) with missing, non-finite, negative or absurd "
            f"ts/dur (first: {objs[i].name!r} ts={ts[i]!r} dur={dur[i]!r})",
        )
    start = _us_to_ns(ts_f)
    return start, start + _us_to_ns(dur_f)


def _frame(
    path: Path, objs: np.ndarray, kinds: np.ndarray, kind_col: str, what: str
) -> dict[str, Any]:
    start, end = _times(path, objs, what)
    return {
        kind_col: kinds,
        "name": pd.Categorical(_column(objs, "name", object)),
        "start_ns": start,
        "end_ns": end,
    }


def load_trace(path: str | Path) -> Trace:
    """Read a Kineto/Chrome trace file into a :class:`Trace`.

    Args:
        path: a ``.json`` or ``.json.gz`` file written by ``torch.profiler``
            (``export_chrome_trace`` or ``tensorboard_trace_handler``) or any
            Chrome trace whose device events follow Kineto's categories.

    Returns:
        the :class:`Trace`; see its docstring for columns and dtypes.

    Raises:
        TraceFormatError: the file is unreadable, empty, not JSON, truncated,
            a corrupt gzip, not a Chrome trace, or holds device/host events whose
            ``ts``/``dur`` are missing, non-finite, negative or absurd.
    """
    p = Path(path)
    doc = _decode(p, _read_bytes(p))
    events = doc.traceEvents
    n = len(events)
    objs = np.empty(n, dtype=object)
    objs[:] = events

    ph = pd.Categorical(_column(objs, "ph", object)) if n else pd.Categorical([])
    cat_raw = pd.Categorical(_column(objs, "cat", object)) if n else pd.Categorical([])
    cat_lower = cat_raw.rename_categories([str(c).lower() for c in cat_raw.categories]) if n else cat_raw
    complete = np.asarray(ph == "X") if n else np.zeros(0, bool)

    dev_kind = pd.Series(cat_lower, dtype="object").map(DEVICE_CATEGORIES) if n else pd.Series([], dtype=object)
    dev_mask = complete & dev_kind.notna().to_numpy()
    host_cat = pd.Series(cat_lower, dtype="object").map(HOST_CATEGORIES) if n else pd.Series([], dtype=object)
    host_mask = complete & host_cat.notna().to_numpy()

    device_events = _device_frame(p, objs[dev_mask], dev_kind.to_numpy()[dev_mask])
    host_events = _host_frame(p, objs[host_mask], host_cat.to_numpy()[host_mask])

    devices = pd.DataFrame(doc.deviceProperties or [])
    metadata = {
        k: getattr(doc, k)
        for k in (
            "schemaVersion",
            "distributedInfo",
            "cuda_runtime_version",
            "cuda_driver_version",
            "cupti_version",
            "trace_id",
            "displayTimeUnit",
            "baseTimeNanoseconds",
            "traceName",
        )
        if getattr(doc, k) is not None
    }
    metadata["event_count"] = n
    return Trace(
        path=str(p),
        device_events=device_events,
        host_events=host_events,
        devices=devices,
        metadata=metadata,
        steps=_steps(host_events),
    )


def _device_frame(path: Path, objs: np.ndarray, kinds: np.ndarray) -> pd.DataFrame:
    cols = _frame(path, objs, kinds, "kind", "device")
    args = _args(objs)
    device = _int_column(args, "device")
    stream = _int_column(args, "stream")
    if len(objs):
        pid = _column(objs, "pid", object)
        tid = _column(objs, "tid", object)
        miss = device < 0
        if miss.any():
            device[miss] = pd.to_numeric(pd.Series(pid[miss]), errors="coerce").fillna(-1).astype(np.int64)
        miss = stream < 0
        if miss.any():
            stream[miss] = pd.to_numeric(pd.Series(tid[miss]), errors="coerce").fillna(-1).astype(np.int64)
    df = pd.DataFrame(
        {
            "device": device,
            "stream": stream,
            "kind": pd.Categorical(cols["kind"], categories=["kernel", "memcpy", "memset"]),
            "name": cols["name"],
            "start_ns": cols["start_ns"],
            "end_ns": cols["end_ns"],
            "bytes": _int_column(args, "bytes"),
            "correlation": _int_column(args, "correlation"),
        }
    )
    # Parse memcpy names once per distinct name, then map through the categories.
    names = df["name"].cat.categories
    parsed = pd.Series(names, dtype="object").str.extract(_MEMCPY_RE)
    codes = df["name"].cat.codes.to_numpy()
    is_copy = (df["kind"] == "memcpy").to_numpy()
    for col in ("direction", "src", "dst"):
        vals = parsed[col].to_numpy(dtype=object)[codes] if len(names) else np.empty(0, object)
        vals = np.where(is_copy, vals, None)
        out = "direction" if col == "direction" else f"{col}_kind"
        df[out] = pd.Categorical(vals)
    comm_names = pd.Series(names, dtype="object").str.contains(_COMM_RE).to_numpy(dtype=bool)
    df["is_comm"] = (df["kind"] == "kernel").to_numpy() & (comm_names[codes] if len(names) else np.zeros(0, bool))
    return df.sort_values("start_ns", kind="stable").reset_index(drop=True)


def _host_frame(path: Path, objs: np.ndarray, cats: np.ndarray) -> pd.DataFrame:
    cols = _frame(path, objs, cats, "cat", "host")
    args = _args(objs)
    df = pd.DataFrame(
        {
            "pid": pd.Categorical(_column(objs, "pid", object).astype(str)),
            "tid": pd.Categorical(_column(objs, "tid", object).astype(str)),
            "cat": pd.Categorical(cols["cat"]),
            "name": cols["name"],
            "start_ns": cols["start_ns"],
            "end_ns": cols["end_ns"],
            "correlation": _int_column(args, "correlation"),
            "external_id": _int_column(args, "external_id"),
        }
    )
    return df.sort_values("start_ns", kind="stable").reset_index(drop=True)


def _steps(host: pd.DataFrame) -> pd.DataFrame:
    names = host["name"].cat.categories
    step_no = pd.Series(names, dtype="object").str.extract(_STEP_RE)[0]
    if step_no.isna().all():
        return pd.DataFrame({"step": pd.Series([], dtype=np.int64), "start_ns": pd.Series([], dtype=np.int64), "end_ns": pd.Series([], dtype=np.int64)})
    codes = host["name"].cat.codes.to_numpy()
    nums = step_no.to_numpy(dtype=object)[codes]
    mask = pd.notna(nums)
    steps = pd.DataFrame(
        {"step": nums[mask].astype(np.int64), "start_ns": host["start_ns"].to_numpy()[mask], "end_ns": host["end_ns"].to_numpy()[mask]}
    )
    # The same step may appear as cpu_op and user_annotation: keep the widest span.
    steps = steps.groupby("step", as_index=False).agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max"))
    return steps.sort_values("step").reset_index(drop=True)
