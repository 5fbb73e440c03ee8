"""Loading Kineto / Chrome trace JSON into pandas DataFrames.

``load_trace(path)`` reads what ``torch.profiler``'s ``export_chrome_trace`` and
``tensorboard_trace_handler`` write (``.json`` or gzipped ``.json.gz``; gzip is
detected from the file's magic bytes, not its name). ``msgspec`` splits the
event list into one ``msgspec.Raw`` view per event, then decodes it in chunks of
``_CHUNK_EVENTS`` events into typed structs holding only the fields traceprobe
needs; each chunk's columns are built with C-level iteration
(``map``/``attrgetter``/``numpy.fromiter``) before the next chunk is decoded, so
only one chunk of structs is alive at a time (peak memory about 1.5x the JSON
size). A trace with an error to report, or with values only the whole-trace
conversions handle, is decoded at once instead (same results, same messages).
Every later step is vectorized. Reading a trace never imports torch.

Timestamps: Kineto writes ``ts`` and ``dur`` in microseconds, often with three
decimals. They are converted to int64 nanoseconds by splitting integer and
fractional microseconds, so the conversion is exact (to the nanosecond) for every
``ts`` below 2**43 µs (about 101 days of trace clock); torch's traces are relative
to ``baseTimeNanoseconds`` and stay far below that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from .errors import TraceFormatError
from .kineto import (
    COLLECTIVE_ARGS,
    EventBatches,
    _args,
    _strings,
    code_column,
    collective_columns,
    comm_structs,
    concat_columns,
    decode,
    pair_begin_end,
    pair_columns,
    ph_code,
    pluck_numbers,
    raw_columns,
    read_bytes,
    split_events,
    to_int,
    us_to_ns,
)

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
        collective_args: one row per event whose args name a collective
            (Kineto's ``Collective name``: torch's ``record_param_comms`` host
            op, and the NCCL kernels of newer torch): ``side`` (``device`` or
            ``host``), ``name`` (str), ``start_ns`` (int64), ``collective``
            (str), ``in_nelems``, ``out_nelems``, ``group_size`` (int64, -1 if
            absent), ``dtype``, ``pg_name`` (str, ``""`` if absent; from
            ``Process Group Name``), ``correlation``, ``external_id`` (int64, -1
            if absent).
        steps: ``ProfilerStep#N`` annotations: columns ``step`` (int64),
            ``start_ns``, ``end_ns`` (int64); empty if none.
    """

    path: str
    device_events: pd.DataFrame
    host_events: pd.DataFrame
    devices: pd.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    steps: pd.DataFrame = field(default_factory=pd.DataFrame)
    collective_args: pd.DataFrame = field(default_factory=pd.DataFrame)

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
    start = us_to_ns(ts_f)
    return start, start + us_to_ns(dur_f)


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
        return  # read_bytes reports unreadable files
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
    raw = read_bytes(p)
    warnings: list[str] = []
    chunked = _chunked_parts(raw)
    if chunked is not None:
        del raw
        doc, n, acc = chunked
        del chunked
        frames = _chunked_frames(acc, warnings)
    else:  # an error to report, or values the chunked pass does not take: decode all at once
        doc = decode(p, raw)
        del raw
        n = len(doc.traceEvents)
        frames = _frames(doc.traceEvents, warnings)
        doc.traceEvents = []
    (dev_raw, dev_kind), (host_raw, host_cat) = frames
    device_events = _device_frame(p, dev_raw, dev_kind)
    host_events = _host_frame(p, host_raw, host_cat)
    coll_args = _collective_args(dev_raw, host_raw)
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
        collective_args=coll_args,
    )


_TABLES = ((DEVICE_CATEGORIES, "device"), (HOST_CATEGORIES, "host"))
_KIND_OF = np.array([None] + [k for t, _ in _TABLES for k in dict.fromkeys(t.values())], dtype=object)
_CODE_OF = {k: i for i, k in enumerate(_KIND_OF) if k is not None}
_BY_NAME = {c: _CODE_OF[k] for t, _ in _TABLES for c, k in t.items()}
_N_DEV_KINDS = len(set(DEVICE_CATEGORIES.values()))
_ARG_COLUMNS = {"device": ("device", "stream", "bytes", "correlation"), "host": ("correlation", "external_id")}
_CHUNK_EVENTS = 10_000
"""Events decoded to structs at a time by the chunked load."""


def _cat_code(v: Any) -> int:
    return _BY_NAME.get(("" if v is None else str(v)).lower(), 0)


def _codes(events: Any) -> tuple[np.ndarray, np.ndarray]:
    """ph code (0 other, 1 X, 2 B, 3 E) and cat code (an index into _KIND_OF) of every event.

    cat is lower-cased: older torch releases wrote capitalised names. A cat code
    is 0 for unknown, then the device kinds, then the host categories.
    """
    ph = code_column(events, "ph", ph_code)
    cat = code_column(events, "cat", _cat_code).astype(np.intp)
    return ph, cat


def _in_table(cat: np.ndarray, what: str) -> np.ndarray:
    return ((cat > 0) & (cat <= _N_DEV_KINDS)) if what == "device" else (cat > _N_DEV_KINDS)


def _frames(events: list[Any], warnings: list[str]) -> list[tuple[dict[str, np.ndarray], np.ndarray]]:
    """Device and host columns (with ``args`` structs) and kinds from all decoded events."""
    # One pass per field over the structs; ph and cat are coded once per distinct value.
    ph, cat = _codes(events)
    complete = ph == 1
    begin = ph == 2
    endev = ph == 3

    frames = []
    for _, what in _TABLES:
        in_table = _in_table(cat, what)
        x = np.flatnonzero(complete & in_table)
        be = np.flatnonzero((begin | endev) & in_table)
        parts = [raw_columns(list(map(events.__getitem__, x.tolist())))]
        kinds = [_KIND_OF[cat[x]]]
        if be.size:
            paired, b_idx = pair_begin_end(list(map(events.__getitem__, be.tolist())), begin[be], warnings)
            parts.append(paired)
            kinds.append(_KIND_OF[cat[be]][b_idx])  # a pair's kind is its B event's
        frames.append((concat_columns(parts), np.concatenate(kinds) if kinds else np.empty(0, object)))
    return frames


class _Fallback(Exception):
    """A value the chunked load cannot convert chunk by chunk exactly as the whole-trace load does."""


def _interned(vals: np.ndarray, pool: dict) -> np.ndarray:
    """``vals`` with equal str (or equal int) values sharing one object, to save memory."""
    if len(vals) and pd.api.types.infer_dtype(vals, skipna=False) in ("string", "integer"):
        return np.fromiter(map(pool.setdefault, vals, vals), dtype=object, count=len(vals))
    return vals


def _chunk_columns(objs: list[Any], what: str, pools: tuple[dict, dict]) -> dict[str, np.ndarray]:
    """Columns of some events of one table: numbers converted, names/pid/tid as objects.

    Numbers take only the fast path of ``pluck_numbers`` (each value converted on
    its own, so chunk by chunk gives what the whole trace gives); a value needing
    the tolerant path raises _Fallback.
    """
    n = len(objs)
    try:
        both = np.fromiter(chain.from_iterable(map(attrgetter("ts", "dur"), objs)), dtype=np.float64, count=2 * n).reshape(n, 2)
        attrs = _ARG_COLUMNS[what]
        arg_structs = _args(objs)
        args = np.fromiter(chain.from_iterable(map(attrgetter(*attrs), arg_structs)), dtype=np.int64, count=len(attrs) * n)
    except (TypeError, ValueError, OverflowError):
        raise _Fallback from None
    args = args.reshape(n, len(attrs))
    ids = np.fromiter(chain.from_iterable(map(attrgetter("pid", "tid"), objs)), dtype=object, count=2 * n).reshape(n, 2)
    names, ids_pool = pools
    out = {
        "ts": np.ascontiguousarray(both[:, 0]),
        "dur": np.ascontiguousarray(both[:, 1]),
        "name": _interned(np.fromiter(map(attrgetter("name"), objs), dtype=object, count=n), names),
        "pid": _interned(np.ascontiguousarray(ids[:, 0]), ids_pool),
        "tid": _interned(np.ascontiguousarray(ids[:, 1]), ids_pool),
    }
    for i, a in enumerate(attrs):
        out[a] = np.ascontiguousarray(args[:, i])
    out["comm"] = comm_structs(arg_structs)
    return out


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _chunked_parts(raw: bytes) -> tuple[Any, int, dict] | None:
    """Columns of the trace's events, decoding ``_CHUNK_EVENTS`` events at a time.

    Only one chunk of structs is alive at a time. None when the trace has an
    error to report (the whole-trace decode reports it, with its messages) or a
    value that only the whole-trace conversions handle exactly. Put together by
    :func:`_chunked_frames` once ``raw`` is freed.
    """
    try:
        head, items = split_events(raw)
    except (msgspec.MsgspecError, ValueError):
        return None
    n = len(items)
    batches = EventBatches(raw, items, _CHUNK_EVENTS)
    del items
    pools: tuple[dict, dict] = ({}, {})
    acc: dict[str, dict[str, list]] = {what: {"x": [], "x_cat": [], "be": [], "be_cat": [], "be_begin": []} for _, what in _TABLES}
    try:
        for i in range(len(batches)):
            events = batches.decode(i)
            ph, cat = _codes(events)
            cat = cat.astype(np.int8)
            begin = ph == 2
            be_any = begin | (ph == 3)
            for _, what in _TABLES:
                a = acc[what]
                in_table = _in_table(cat, what)
                x = np.flatnonzero((ph == 1) & in_table)
                a["x"].append(_chunk_columns(list(map(events.__getitem__, x.tolist())), what, pools))
                a["x_cat"].append(cat[x])
                be = np.flatnonzero(be_any & in_table)
                if be.size:
                    a["be"].append(_chunk_columns(list(map(events.__getitem__, be.tolist())), what, pools))
                    a["be_cat"].append(cat[be])
                    a["be_begin"].append(begin[be])
            del events
    except (msgspec.MsgspecError, _Fallback):
        return None
    return head, n, acc


def _chunked_frames(acc: dict, warnings: list[str]) -> list[tuple[dict[str, np.ndarray], np.ndarray]]:
    """What :func:`_frames` gives, from :func:`_chunked_parts`' columns (emptied on the way)."""
    frames = []
    for _, what in _TABLES:
        a = acc.pop(what)
        cols = _concat(a.pop("x"))
        cols["name"] = _strings(cols["name"])
        parts = [cols]
        kinds = [_KIND_OF[np.concatenate(a.pop("x_cat"))]]
        if a["be"]:
            cols = _concat(a.pop("be"))
            cols["name"] = _strings(cols["name"])
            paired, b_idx = pair_columns(cols, np.concatenate(a["be_begin"]), warnings)
            del cols
            parts.append(paired)
            kinds.append(_KIND_OF[np.concatenate(a["be_cat"])][b_idx])
        frames.append((_concat(parts) if len(parts) > 1 else parts[0], np.concatenate(kinds)))
    return frames

def _collective_args(dev_raw: dict[str, np.ndarray], host_raw: dict[str, np.ndarray]) -> pd.DataFrame:
    """``Trace.collective_args`` from the device and host columns (their ``comm`` structs, or their ``args``)."""
    parts = []
    for side, raw in (("device", dev_raw), ("host", host_raw)):
        comm = raw["comm"] if "comm" in raw else comm_structs(raw["args"])
        cols = collective_columns(comm)
        rows = cols.pop("row")
        part = pd.DataFrame({"side": side, "name": _strings(raw["name"][rows]), "start_ns": us_to_ns(raw["ts"][rows]), **cols})
        parts.append(part)
    return pd.concat(parts, ignore_index=True).reindex(columns=["side", "name", "start_ns", *COLLECTIVE_ARGS])


def _pid_tid_fallback(ids: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Device or stream ids from pid/tid where ``args`` lacks them.

    Numbers are taken as they are; labels such as ``"stream 7"`` (torch 1.8-1.10
    traces) give their trailing number.
    """
    miss = ids < 0
    if miss.any():
        ids = ids.copy()
        fb = to_int(fallback[miss])
        bad = fb < 0
        if bad.any():
            digits = pd.Series(fallback[miss][bad], dtype=object).astype(str).str.extract(r"(\d+)\s*$")[0]
            fb[bad] = pd.to_numeric(digits, errors="coerce").fillna(-1).to_numpy(np.int64)
        ids[miss] = fb
    return ids


def _device_frame(path: Path, raw: dict[str, np.ndarray], kinds: np.ndarray) -> pd.DataFrame:
    start, end = _times(path, raw, "device")
    if "args" in raw:
        device, stream, nbytes, correlation = pluck_numbers(raw["args"], _ARG_COLUMNS["device"], np.int64)
    else:  # the chunked load converted them
        device, stream, nbytes, correlation = (raw[a] for a in _ARG_COLUMNS["device"])
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
    if "args" in raw:
        correlation, external_id = pluck_numbers(raw["args"], _ARG_COLUMNS["host"], np.int64)
    else:  # the chunked load converted them
        correlation, external_id = (raw[a] for a in _ARG_COLUMNS["host"])
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
