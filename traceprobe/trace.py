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

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .errors import TraceFormatError
from .kineto import (
    code_column,
    concat_columns,
    decode,
    pair_begin_end,
    ph_code,
    pluck_numbers,
    raw_columns,
    read_bytes,
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
    doc = decode(p, read_bytes(p))
    events = doc.traceEvents
    n = len(events)
    warnings: list[str] = []

    # One pass per field over the structs; ph and cat are coded once per distinct value
    # (cat lower-cased: older torch releases wrote capitalised names). A cat code is
    # an index into kind_of: 0 unknown, then the device kinds, then the host categories.
    ph = code_column(events, "ph", ph_code)
    tables = ((DEVICE_CATEGORIES, "device"), (HOST_CATEGORIES, "host"))
    kind_of = np.array([None] + [k for t, _ in tables for k in dict.fromkeys(t.values())], dtype=object)
    code_of = {k: i for i, k in enumerate(kind_of) if k is not None}
    by_name = {c: code_of[k] for t, _ in tables for c, k in t.items()}
    cat = code_column(events, "cat", lambda v: by_name.get(("" if v is None else str(v)).lower(), 0)).astype(np.intp)
    n_dev_kinds = len(set(DEVICE_CATEGORIES.values()))
    complete = ph == 1
    begin = ph == 2
    endev = ph == 3

    frames = []
    for _, what in tables:
        in_table = ((cat > 0) & (cat <= n_dev_kinds)) if what == "device" else (cat > n_dev_kinds)
        x = np.flatnonzero(complete & in_table)
        be = np.flatnonzero((begin | endev) & in_table)
        parts = [raw_columns(list(map(events.__getitem__, x.tolist())))]
        kinds = [kind_of[cat[x]]]
        if be.size:
            paired, b_idx = pair_begin_end(list(map(events.__getitem__, be.tolist())), begin[be], warnings)
            parts.append(paired)
            kinds.append(kind_of[cat[be]][b_idx])  # a pair's kind is its B event's
        frames.append((concat_columns(parts), np.concatenate(kinds) if kinds else np.empty(0, object), what))

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
        ids[miss] = to_int(fallback[miss])
    return ids


def _device_frame(path: Path, raw: dict[str, np.ndarray], kinds: np.ndarray) -> pd.DataFrame:
    start, end = _times(path, raw, "device")
    args = raw["args"]
    device, stream, nbytes, correlation = pluck_numbers(args, ("device", "stream", "bytes", "correlation"), np.int64)
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
    correlation, external_id = pluck_numbers(args, ("correlation", "external_id"), np.int64)
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
