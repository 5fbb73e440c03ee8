"""Decoding Kineto / Chrome trace JSON into columns of numpy arrays.

The low layer under :func:`traceprobe.trace.load_trace`: read (and gunzip) the
bytes, decode them with ``msgspec`` (all at once, or in batches of events split
by :func:`split_events`) into typed structs holding only the
fields traceprobe needs, and pull columns out of the structs with C-level
iteration (``map``/``attrgetter``/``numpy.fromiter``), never a Python loop per
event. ``ph: B``/``E`` pairs become complete events here too.
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from collections.abc import Sequence
from itertools import chain
from operator import attrgetter
from pathlib import Path
from typing import Any

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
    # collectives (torch's record_param_comms, and NCCL kernels of newer torch)
    collective: Any = msgspec.field(default=None, name="Collective name")
    in_nelems: Any = msgspec.field(default=-1, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=-1, name="Out msg nelems")
    group_size: Any = msgspec.field(default=-1, name="Group size")
    dtype: Any = None
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")


_NO_ARGS = _Args()

COLLECTIVE_ARGS = ("collective", "in_nelems", "out_nelems", "group_size", "dtype", "pg_name", "correlation", "external_id")
"""Fields of :func:`collective_columns`, from Kineto's args ``Collective name``, ``In msg nelems``,
``Out msg nelems``, ``Group size``, ``dtype``, ``Process Group Name``, ``correlation``, ``External id``."""


def comm_structs(args: Any) -> np.ndarray:
    """The ``args`` structs (from :func:`_args`) of events naming a collective; None for every other event."""
    names = _pluck(args, "collective")
    out = np.full(len(args), None, dtype=object)
    has = pd.notna(names)
    out[has] = args[has]
    return out


def collective_columns(comm: Any) -> dict[str, np.ndarray]:
    """Row positions (``row``) and :data:`COLLECTIVE_ARGS` columns of the events whose ``comm`` struct is set.

    Numbers are int64 (-1 where absent or not a number); names are str (``""`` where absent).
    """
    rows = np.flatnonzero(pd.notna(comm))
    structs = comm[rows]
    out: dict[str, np.ndarray] = {"row": rows}
    for a in COLLECTIVE_ARGS:
        vals = _pluck(structs, a)
        out[a] = _strings(np.where(pd.notna(vals), vals, "")) if a in ("collective", "dtype", "pg_name") else to_int(vals)
    return out


class _Event(msgspec.Struct, gc=False):
    ph: Any = ""
    cat: Any = ""
    name: Any = ""
    pid: Any = -1
    tid: Any = -1
    ts: Any = math.nan
    dur: Any = 0.0
    args: _Args | None = None


class _TraceFile(msgspec.Struct):
    traceEvents: list[_Event]
    schemaVersion: Any = None
    deviceProperties: list[dict[str, Any]] | None = None
    distributedInfo: dict[str, Any] | None = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    cupti_version: Any = None
    trace_id: Any = None
    displayTimeUnit: Any = None
    baseTimeNanoseconds: Any = None
    traceName: Any = None


_DECODER = msgspec.json.Decoder(_TraceFile)
_LIST_DECODER = msgspec.json.Decoder(list[_Event])


class _TraceHead(_TraceFile):
    """``_TraceFile`` with each event left undecoded (for :func:`split_events`)."""

    traceEvents: list[msgspec.Raw]


_HEAD_DECODER = msgspec.json.Decoder(_TraceHead)
_RAW_LIST_DECODER = msgspec.json.Decoder(list[msgspec.Raw])


def split_events(raw: bytes) -> tuple[_TraceFile, list[msgspec.Raw]]:
    """The trace's top-level fields (``traceEvents`` empty) and one ``msgspec.Raw`` per event.

    The Raw objects are views into ``raw``: decoding them in batches
    (:func:`EventBatches`) holds only one batch of structs at a time. Any
    msgspec error propagates: callers fall back to :func:`decode`, whose messages
    are the ones users see.
    """
    first = _LEADING_SPACE.match(raw).end()
    if raw[first : first + 1] == b"[":
        return _TraceFile(traceEvents=[]), _RAW_LIST_DECODER.decode(raw)
    head = _HEAD_DECODER.decode(raw)
    items = head.traceEvents
    head.traceEvents = []
    return head, items


def _address(buf: Any) -> int:
    return np.frombuffer(buf, dtype=np.uint8).ctypes.data


class EventBatches:
    """Decode, in order, batches of ``size`` events split by :func:`split_events` from ``raw``.

    A batch of consecutive events is one stretch of ``raw`` (events, commas and
    white space), decoded as a JSON list after one copy; so only the stretches'
    bounds are kept, not the Raw objects. Where the Raw objects are not views
    into ``raw``, they are kept and joined instead.
    """

    def __init__(self, raw: bytes, items: list[msgspec.Raw], size: int) -> None:
        self.raw = raw
        self.n = len(items)
        base = _address(raw) if len(raw) else 0
        bounds = []
        for lo in range(0, self.n, size):
            first, last = items[lo], items[min(lo + size, self.n) - 1]
            start = _address(first) - base
            end = _address(last) - base + len(last)
            if not 0 <= start < end <= len(raw):
                bounds = None
                break
            bounds.append((start, end))
        self.bounds = bounds
        self.items = items if bounds is None else None
        self.size = size

    def __len__(self) -> int:
        return max(1, -(-self.n // self.size))

    def decode(self, i: int) -> list[_Event]:
        """The ``i``-th batch (the only one, empty, when there are no events)."""
        if self.n == 0:
            return []
        if self.bounds is None:
            return _LIST_DECODER.decode(b"[" + b",".join(self.items[i * self.size : (i + 1) * self.size]) + b"]")
        start, end = self.bounds[i]
        return _LIST_DECODER.decode(b"".join((b"[", memoryview(self.raw)[start:end], b"]")))


def read_bytes(path: Path) -> bytes:
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


def decode(path: Path, raw: bytes) -> _TraceFile:
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


def us_to_ns(values: np.ndarray) -> np.ndarray:
    """float64 µs -> int64 ns, exact to the ns below 2**43 µs (see module doc)."""
    whole = np.floor(values)
    frac_ns = np.rint((values - whole) * 1000.0)
    return whole.astype(np.int64) * 1000 + frac_ns.astype(np.int64)


def _pluck(objs: Sequence[Any], attr: str) -> np.ndarray:
    """``attr`` of every struct in ``objs`` (a list or an object array) as an object array."""
    return np.fromiter(map(attrgetter(attr), objs), dtype=object, count=len(objs))


def _pluck_number(objs: Sequence[Any], attr: str, dtype: type) -> np.ndarray:
    """``to_int(_pluck(...))`` (``dtype`` int64) or ``_to_float(_pluck(...))`` (float64).

    The values go straight into a typed array, which converts exactly as
    ``ndarray.astype`` does; the object array is built only when some value is not
    a number (None, a label...), for ``to_int``/``_to_float``'s tolerant path.
    """
    try:
        return np.fromiter(map(attrgetter(attr), objs), dtype=dtype, count=len(objs))
    except (TypeError, ValueError, OverflowError):
        vals = _pluck(objs, attr)
        return to_int(vals) if dtype is np.int64 else _to_float(vals)


def pluck_numbers(objs: Sequence[Any], attrs: tuple[str, ...], dtype: type) -> list[np.ndarray]:
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


def code_column(objs: Sequence[Any], attr: str, fn: Any) -> np.ndarray:
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


def to_int(vals: np.ndarray) -> np.ndarray:
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


def raw_columns(objs: Sequence[Any]) -> dict[str, np.ndarray]:
    """Columns of selected ``ph: X`` events (a list or object array of structs), before validation."""
    args = _args(objs)
    ts, dur = pluck_numbers(objs, ("ts", "dur"), np.float64)
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


def pair_begin_end(objs: np.ndarray, is_begin: np.ndarray, warnings: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Turn ``ph: B``/``ph: E`` events into complete-event columns (vectorized).

    Per (pid, tid), in timestamp order, a B opens a slice at depth k and the next E
    at depth k closes it (the Chrome trace format's stack rule). The name and args
    come from the B event. Unmatched events are dropped and counted in ``warnings``.
    """
    return pair_columns(raw_columns(objs), is_begin, warnings)


def pair_columns(raw: dict[str, np.ndarray], is_begin: np.ndarray, warnings: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """:func:`pair_begin_end` on the events' columns (``raw_columns`` or the like, any extra keys)."""
    n = len(raw["ts"])
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


def concat_columns(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    parts = [p for p in parts if len(p["ts"])]
    if not parts:
        return {k: np.empty(0, dtype=object if k not in ("ts", "dur") else np.float64) for k in ("ts", "dur", "name", "pid", "tid", "args")}
    if len(parts) == 1:
        return parts[0]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


_PH_CODES = {"X": 1, "B": 2, "E": 3}


def ph_code(v: Any) -> int:
    return _PH_CODES.get(v, 0) if isinstance(v, str) else 0
