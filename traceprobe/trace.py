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
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Any, Sequence, Union

import msgspec
import numpy as np
import pandas as pd

from .errors import TraceFormatError

# --- typed decode -----------------------------------------------------------------


# Fields are typed ``Any`` where real traces disagree on types (pid as a label,
# ids as strings...): a type that cannot be used becomes -1/NaN in the columns
# and, for times, a TraceFormatError naming the event.


class _Args(msgspec.Struct, gc=False):
    device: Any = -1
    stream: Any = -1
    correlation: Any = -1
    bytes: Any = -1
    external_id: Any = msgspec.field(default=-1, name="External id")


_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):
    ph: Any = ""
    cat: Any = ""
    name: Any = ""
    pid: Any = -1
    tid: Any = -1
    ts: Any = math.nan
    dur: Any = 0.0
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
# ROCm (roctracer) names copies CopyHostToDevice, CopyDeviceToHost, CopyDeviceToDevice
_ROCM_COPY_RE = re.compile(r"^Copy(?P<src>Host|Device)To(?P<dst>Host|Device)")
_COMM_RE = re.compile(r"nccl|rccl", re.IGNORECASE)
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")

MAX_TS_US = 9.0e15
"""Largest accepted ``ts`` in µs: beyond it ns would overflow int64 (year ~2255 as epoch µs)."""
MAX_DUR_US = 7 * 24 * 3600 * 1e6
"""Largest accepted ``dur`` in µs (7 days): longer is taken as a corrupt value."""
MAX_STREAMS = 65536
"""Most distinct (device, stream) pairs accepted in one trace."""
MEMORY_FACTOR = 3
"""Peak memory of a load, as a multiple of the decompressed JSON size (an upper bound)."""


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


_LEADING_SPACE = re.compile(rb"[ \t\n\r\x0b\x0c]*")  # what bytes.strip() removes


def _decode(path: Path, raw: bytes) -> _TraceFile:
    first = _LEADING_SPACE.match(raw).end()  # (no copy of a JSON of gigabytes, unlike raw.strip())
    if first == len(raw):
        raise TraceFormatError(path, "empty file")
    try:
        if raw[first : first + 1] == b"[":
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


def _pluck(objs: Sequence[Any], attr: str) -> np.ndarray:
    """``attr`` of every struct in ``objs`` (a list or an object array) as an object array."""
    return np.fromiter(map(attrgetter(attr), objs), dtype=object, count=len(objs))


def _pluck_number(objs: Sequence[Any], attr: str, dtype: type) -> np.ndarray:
    """``_to_int(_pluck(...))`` (``dtype`` int64) or ``_to_float(_pluck(...))`` (float64).

    The values go straight into a typed array, which converts exactly as
    ``ndarray.astype`` does; the object array is built only when some value is not
    a number (None, a label...), for ``_to_int``/``_to_float``'s tolerant path.
    """
    try:
        return np.fromiter(map(attrgetter(attr), objs), dtype=dtype, count=len(objs))
    except (TypeError, ValueError, OverflowError):
        vals = _pluck(objs, attr)
        return _to_int(vals) if dtype is np.int64 else _to_float(vals)


def _pluck_numbers(objs: Sequence[Any], attrs: tuple[str, ...], dtype: type) -> list[np.ndarray]:
    """``[_pluck_number(objs, a, dtype) for a in attrs]`` in one pass over the structs when all are numbers."""
    n = len(objs)
    try:
        both = np.fromiter(chain.from_iterable(map(attrgetter(*attrs), objs)), dtype=dtype, count=len(attrs) * n)
    except (TypeError, ValueError, OverflowError):
        return [_pluck_number(objs, a, dtype) for a in attrs]
    both = both.reshape(n, len(attrs))
    return [np.ascontiguousarray(both[:, i]) for i in range(len(attrs))]


class _Codes(dict):
    """Distinct value -> small int code, computed by ``fn`` once per distinct value."""

    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def __missing__(self, key: Any) -> int:
        code = self[key] = self.fn(key)
        return code


def _codes(objs: Sequence[Any], attr: str, fn: Any) -> np.ndarray:
    """``fn(obj.attr)`` for every struct, as int8, with ``fn`` called once per distinct value.

    ``fn`` must give one code to values that compare equal (``1``, ``1.0``, ``True``).
    """
    try:
        return np.fromiter(map(_Codes(fn).__getitem__, map(attrgetter(attr), objs)), dtype=np.int8, count=len(objs))
    except TypeError:  # an unhashable value (a list, a dict): call fn on every value
        return np.fromiter(map(fn, map(attrgetter(attr), objs)), dtype=np.int8, count=len(objs))


def _args(objs: Sequence[Any]) -> np.ndarray:
    """The events' ``args`` structs, with a default struct where absent or null."""
    args = _pluck(objs, "args")
    args[np.equal(args, None)] = _NO_ARGS
    return args


def _to_int(vals: np.ndarray) -> np.ndarray:
    """Object array -> int64; anything that is not a number becomes -1."""
    try:
        return vals.astype(np.int64)
    except (TypeError, ValueError, OverflowError):
        num = pd.to_numeric(pd.Series(vals, dtype=object), errors="coerce").to_numpy(np.float64)
        ok = np.isfinite(num) & (np.abs(num) < 2.0**62)
        out = np.full(len(vals), -1, dtype=np.int64)
        out[ok] = num[ok].astype(np.int64)
        return out


def _to_float(vals: np.ndarray) -> np.ndarray:
    """Object array -> float64; non-numbers (strings, null) become NaN."""
    try:
        return vals.astype(np.float64)
    except (TypeError, ValueError, OverflowError):
        return pd.to_numeric(pd.Series(vals, dtype=object), errors="coerce").to_numpy(np.float64)


def _strings(vals: np.ndarray) -> np.ndarray:
    """Object array -> object array of str (None and non-strings made str)."""
    if pd.api.types.infer_dtype(vals, skipna=False) in ("string", "empty"):
        return vals
    out = np.empty(len(vals), dtype=object)
    out[:] = ["" if v is None else str(v) for v in vals]
    return out


def _raw(objs: Sequence[Any]) -> dict[str, np.ndarray]:
    """Columns of selected ``ph: X`` events (a list or object array of structs), before validation."""
    args = _args(objs)
    ts, dur = _pluck_numbers(objs, ("ts", "dur"), np.float64)
    n = len(objs)
    ids = np.fromiter(chain.from_iterable(map(attrgetter("pid", "tid"), objs)), dtype=object, count=2 * n).reshape(n, 2)
    return {
        "ts": ts,
        "dur": dur,
        "name": _strings(_pluck(objs, "name")),
        "pid": np.ascontiguousarray(ids[:, 0]),
        "tid": np.ascontiguousarray(ids[:, 1]),
        "args": args,
    }


def _pair_begin_end(objs: np.ndarray, is_begin: np.ndarray, warnings: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Turn ``ph: B``/``ph: E`` events into complete-event columns (vectorized).

    Per (pid, tid), in timestamp order, a B opens a slice at depth k and the next E
    at depth k closes it (the Chrome trace format's stack rule). The name and args
    come from the B event. Unmatched events are dropped and counted in ``warnings``.
    """
    raw = _raw(objs)
    n = len(objs)
    if n == 0:
        return {k: v[:0] for k, v in raw.items()}, np.zeros(0, np.int64)
    thread = pd.MultiIndex.from_arrays(
        [pd.Series(raw["pid"], dtype=object).astype(str), pd.Series(raw["tid"], dtype=object).astype(str)]
    ).factorize()[0]
    ts = raw["ts"]
    order = np.lexsort((np.arange(n), np.nan_to_num(ts, nan=-1.0), thread))
    delta = np.where(is_begin[order], 1, -1)
    depth = pd.Series(delta).groupby(thread[order]).cumsum().to_numpy()
    level = np.where(delta > 0, depth, depth + 1)
    o2 = np.lexsort((np.arange(n), level, thread[order]))
    idx = order[o2]
    b = is_begin[idx]
    same = (thread[idx][:-1] == thread[idx][1:]) & (level[o2][:-1] == level[o2][1:])
    pair = b[:-1] & ~b[1:] & same
    bi, ei = idx[:-1][pair], idx[1:][pair]
    dropped = n - 2 * len(bi)
    if dropped:
        warnings.append(f"{dropped} unmatched B/E event(s) dropped")
    out = {k: v[bi] for k, v in raw.items()}
    out["dur"] = ts[ei] - ts[bi]
    return out, bi


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    parts = [p for p in parts if len(p["ts"])]
    if not parts:
        return {k: np.empty(0, dtype=object if k not in ("ts", "dur") else np.float64) for k in ("ts", "dur", "name", "pid", "tid", "args")}
    if len(parts) == 1:
        return parts[0]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _times(path: Path, raw: dict[str, np.ndarray], what: str) -> tuple[np.ndarray, np.ndarray]:
    ts_f, dur_f = raw["ts"], raw["dur"]
    bad = ~np.isfinite(ts_f) | ~np.isfinite(dur_f) | (dur_f < 0) | (ts_f < 0) | (ts_f >= MAX_TS_US) | (dur_f > MAX_DUR_US)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TraceFormatError(
            path,
            f"{int(bad.sum())} {what} event(s) with missing, non-numeric, non-finite, negative or absurd "
            f"ts/dur (first: {raw['name'][i]!r} ts={ts_f[i]!r} dur={dur_f[i]!r})",
        )
    start = _us_to_ns(ts_f)
    return start, start + _us_to_ns(dur_f)


def _check_memory(path: Path) -> None:
    """Fail early when the decoded trace cannot fit in available memory."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            magic = f.read(2)
            if magic == b"\x1f\x8b" and size >= 18:
                f.seek(-4, 2)
                # gzip's ISIZE: uncompressed size mod 2**32; never below the compressed size
                size = max(int.from_bytes(f.read(4), "little"), size * 4)
    except OSError:
        return  # _read_bytes reports unreadable files
    need = size * MEMORY_FACTOR
    avail = _available_memory()
    if avail is not None and need > avail:
        raise TraceFormatError(
            path,
            f"needs about {need / 2**30:.1f} GiB of memory to load ({size / 2**30:.1f} GiB of JSON), "
            f"but only {avail / 2**30:.1f} GiB is available",
        )


def _available_memory() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except Exception:  # pragma: no cover - psutil is a dependency; be safe anyway
        return None


_PH_CODES = {"X": 1, "B": 2, "E": 3}


def _ph_code(v: Any) -> int:
    return _PH_CODES.get(v, 0) if isinstance(v, str) else 0


def load_trace(path: str | Path) -> Trace:
    """Read a Kineto/Chrome trace file into a :class:`Trace`.

    Complete events (``ph: X``) and begin/end pairs (``ph: B``/``E``) of Kineto's
    device and host categories are kept; flows, counters, instants, metadata and
    memory events are ignored.

    Args:
        path: a ``.json`` or ``.json.gz`` file written by ``torch.profiler``
            (``export_chrome_trace`` or ``tensorboard_trace_handler``, torch 1.13
            or later, CUDA or ROCm) or any Chrome trace whose device events
            follow Kineto's categories.

    Returns:
        the :class:`Trace`; see its docstring for columns and dtypes. Anything
        the loader had to drop is listed in ``metadata["warnings"]``.

    Raises:
        TraceFormatError: the file is unreadable, empty, not JSON, truncated,
            a corrupt gzip, not a Chrome trace, too large for available memory,
            or holds device/host events whose ``ts``/``dur`` are missing,
            non-numeric, non-finite, negative or absurd (``dur`` over 7 days), or
            absurdly many streams (over 65,536).
    """
    p = Path(path)
    _check_memory(p)
    doc = _decode(p, _read_bytes(p))
    events = doc.traceEvents
    n = len(events)
    warnings: list[str] = []

    # One pass per field over the structs; ph and cat are coded once per distinct value
    # (cat lower-cased: older torch releases wrote capitalised names). A cat code is
    # an index into kind_of: 0 unknown, then the device kinds, then the host categories.
    ph = _codes(events, "ph", _ph_code)
    tables = ((DEVICE_CATEGORIES, "device"), (HOST_CATEGORIES, "host"))
    kind_of = np.array([None] + [k for t, _ in tables for k in dict.fromkeys(t.values())], dtype=object)
    code_of = {k: i for i, k in enumerate(kind_of) if k is not None}
    by_name = {c: code_of[k] for t, _ in tables for c, k in t.items()}
    cat = _codes(events, "cat", lambda v: by_name.get(("" if v is None else str(v)).lower(), 0)).astype(np.intp)
    n_dev_kinds = len(set(DEVICE_CATEGORIES.values()))
    complete = ph == 1
    begin = ph == 2
    endev = ph == 3

    frames = []
    for _, what in tables:
        in_table = ((cat > 0) & (cat <= n_dev_kinds)) if what == "device" else (cat > n_dev_kinds)
        x = np.flatnonzero(complete & in_table)
        be = np.flatnonzero((begin | endev) & in_table)
        parts = [_raw(list(map(events.__getitem__, x.tolist())))]
        kinds = [kind_of[cat[x]]]
        if be.size:
            paired, b_idx = _pair_begin_end(list(map(events.__getitem__, be.tolist())), begin[be], warnings)
            parts.append(paired)
            kinds.append(kind_of[cat[be]][b_idx])  # a pair's kind is its B event's
        frames.append((_concat(parts), np.concatenate(kinds) if kinds else np.empty(0, object), what))

    (dev_raw, dev_kind, _), (host_raw, host_cat, _) = frames
    device_events = _device_frame(p, dev_raw, dev_kind)
    host_events = _host_frame(p, host_raw, host_cat)
    n_streams = len(device_events[["device", "stream"]].drop_duplicates()) if len(device_events) else 0
    if n_streams > MAX_STREAMS:
        raise TraceFormatError(p, f"absurd trace: {n_streams:,} distinct (device, stream) pairs (limit {MAX_STREAMS:,})")
    if n and device_events.empty and host_events.empty:
        warnings.append("no device or host activity: only metadata, flows, counters or unknown categories")

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
    metadata["warnings"] = warnings
    return Trace(
        path=str(p),
        device_events=device_events,
        host_events=host_events,
        devices=devices,
        metadata=metadata,
        steps=_steps(host_events),
    )


def _pid_tid_fallback(ids: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    miss = ids < 0
    if miss.any():
        ids = ids.copy()
        ids[miss] = _to_int(fallback[miss])
    return ids


def _device_frame(path: Path, raw: dict[str, np.ndarray], kinds: np.ndarray) -> pd.DataFrame:
    start, end = _times(path, raw, "device")
    args = raw["args"]
    device, stream, nbytes, correlation = _pluck_numbers(args, ("device", "stream", "bytes", "correlation"), np.int64)
    device = _pid_tid_fallback(device, raw["pid"])
    stream = _pid_tid_fallback(stream, raw["tid"])
    df = pd.DataFrame(
        {
            "device": device,
            "stream": stream,
            "kind": pd.Categorical(kinds, categories=["kernel", "memcpy", "memset"]),
            "name": pd.Categorical(raw["name"]),
            "start_ns": start,
            "end_ns": end,
            "bytes": nbytes,
            "correlation": correlation,
        }
    )
    # Parse memcpy names once per distinct name, then map through the categories.
    names = pd.Series(df["name"].cat.categories, dtype="object")
    parsed = names.str.extract(_MEMCPY_RE)
    rocm = names.str.extract(_ROCM_COPY_RE)
    rocm["direction"] = rocm["src"].str[0] + "to" + rocm["dst"].str[0]
    for col in ("direction", "src", "dst"):
        parsed[col] = parsed[col].fillna(rocm[col])
    codes = df["name"].cat.codes.to_numpy()
    is_copy = (df["kind"] == "memcpy").to_numpy()
    for col in ("direction", "src", "dst"):
        vals = parsed[col].to_numpy(dtype=object)[codes] if len(names) else np.empty(0, object)
        vals = np.where(is_copy, vals, None)
        out = "direction" if col == "direction" else f"{col}_kind"
        df[out] = pd.Categorical(vals)
    comm_names = names.str.contains(_COMM_RE).to_numpy(dtype=bool)
    df["is_comm"] = (df["kind"] == "kernel").to_numpy() & (comm_names[codes] if len(names) else np.zeros(0, bool))
    return df.sort_values("start_ns", kind="stable").reset_index(drop=True)


def _str_categorical(vals: np.ndarray) -> pd.Categorical:
    """``pd.Categorical(pd.Series(vals, dtype=object).astype(str))``, converting each distinct value once."""
    if pd.api.types.infer_dtype(vals, skipna=False) in ("integer", "string"):  # equal values <=> equal str forms
        codes, uniques = pd.factorize(vals)
        return pd.Categorical(pd.Series(uniques, dtype=object).astype(str)).take(codes)
    return pd.Categorical(pd.Series(vals, dtype=object).astype(str))


def _host_frame(path: Path, raw: dict[str, np.ndarray], cats: np.ndarray) -> pd.DataFrame:
    start, end = _times(path, raw, "host")
    args = raw["args"]
    correlation, external_id = _pluck_numbers(args, ("correlation", "external_id"), np.int64)
    df = pd.DataFrame(
        {
            "pid": _str_categorical(raw["pid"]),
            "tid": _str_categorical(raw["tid"]),
            "cat": pd.Categorical(cats),
            "name": pd.Categorical(raw["name"]),
            "start_ns": start,
            "end_ns": end,
            "correlation": correlation,
            "external_id": external_id,
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
