"""Columns of events: exact times, the rules that turn values into codes and ids, time checks, B/E pairing.

Helpers of :mod:`.decode` and :mod:`.trace`, on plain numpy columns (no pandas). Times are int64 ns throughout.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ..errors import TraceFormatError

OK, MISSING, INVALID = 0, 1, 2
"""Status of each value: a number, no text (the field was absent), not a usable number."""

_POW10 = 10 ** np.arange(19, dtype=np.int64)
_PLAIN = np.zeros(256, dtype=bool)
_PLAIN[[*b"0123456789", ord("."), ord("-")]] = True
_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")
_NS = Decimal(1000)
MAX_TS_US = 9.0e15
"""Largest accepted ``ts`` in µs: beyond it ns would overflow int64 (year ~2255 as epoch µs)."""
MAX_DUR_US = 7 * 24 * 3600 * 1e6
"""Largest accepted ``dur`` in µs (7 days): longer is taken as a corrupt value."""


def _one(text: bytes) -> int | None:
    """Exact ns of one value's JSON text, or None when it is not a usable number."""
    if text[:1] == b'"':
        try:
            value = msgspec.json.decode(text)
        except msgspec.DecodeError:
            return None
    else:
        value = text.decode("ascii", "replace")
    if not isinstance(value, str) or not _NUMBER.fullmatch(value):
        return None
    try:
        d = Decimal(value.strip())
    except InvalidOperation:
        return None
    if not d.is_finite() or (d.adjusted() > 18 and d != 0):
        return None
    ns = int((d * _NS).to_integral_value(ROUND_HALF_EVEN))
    return ns if -(2**63) <= ns < 2**63 else None


def parse_us(raws: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Microsecond JSON numbers -> exact int64 nanoseconds: ``ns = round_half_even(decimal_value * 1000)``.

    Kineto writes ``ts`` and ``dur`` in µs as decimal text, usually with three decimals
    (``1712195495505582.988``); a float64 holds 15-17 significant digits, so epoch-based
    times lose up to ~650 ns through it. The text is read with integer arithmetic instead,
    exact for every number whose result fits int64 (digits past the ns rounded half to
    even): plain decimals (``-?digits[.digits]``, every time Kineto writes) all at once by
    numpy's C parser, each text without its point, scaled by its number of decimals
    (:func:`_plain`); anything else (exponents, numeric strings such as ``"12"``, longer
    texts) one by one with :class:`decimal.Decimal`.

    Args:
        raws: each value's JSON text (``msgspec.Raw`` or bytes; empty when the
            field was absent).

    Returns:
        ``(ns, status)``: int64 ns (0 where not OK) and int8 status per value:
        :data:`OK`, :data:`MISSING` (empty text) or :data:`INVALID` (not a
        number, a numeric string excepted, or beyond int64 ns).
    """
    n = len(raws)
    joined = b" ".join(raws) + b" "
    plain = joined.translate(None, b"0123456789.-") == b" " * n
    if plain:  # (digits, points and minus signs only: each text ends at the next space, and its length is read from there)
        lens = np.diff(np.flatnonzero(np.frombuffer(joined, dtype=np.uint8) == 32), prepend=-1) - 1
    else:
        lens = np.fromiter(map(len, raws), dtype=np.int64, count=n)
    ns, ok = _plain(raws, lens, joined, plain)
    status = np.where(ok, OK, np.where(lens == 0, MISSING, INVALID)).astype(np.int8)
    for i in np.flatnonzero(~ok & (lens > 0)).tolist():  # exponents, strings, null, long texts: one by one
        value = _one(bytes(raws[i]))
        if value is not None:
            ns[i], status[i] = value, OK
    return ns, status


def _plain(raws: Sequence[Any], lens: np.ndarray, joined: bytes | None = None, plain: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(ns, ok)`` of texts (``lens`` bytes each) shaped ``-?digits[.digits]`` whose ns value has at most 18
    digits, or 19 led by a digit up to 8 (so it fits int64); ``ok`` is False for other texts.

    The shape is checked on the texts joined by spaces (``joined``, where the caller has it; ``plain``: whether it
    holds digits, points, minus signs and those spaces only), so that whatever the bytes, a text that passes is
    one integer to numpy's parser once its point is removed; that integer, scaled by the number of its
    decimals, is the ns value. The texts that do not pass are left out, and the others read again alone.
    """
    n = len(raws)
    ns = np.zeros(n, dtype=np.int64)
    if n == 0:
        return ns, np.zeros(0, dtype=bool)
    if joined is None:
        joined = b" ".join(raws) + b" "
    buf = np.frombuffer(joined, dtype=np.uint8)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lens[:-1] + 1, out=starts[1:])
    ok = lens > 0
    if not (plain if plain is not None else joined.translate(None, b"0123456789.-") == b" " * n):  # another byte (rare): which texts
        bad = ~_PLAIN[buf]
        bad[starts + lens] = False
        ok[np.searchsorted(starts, np.flatnonzero(bad), side="right") - 1] = False
    minus = np.flatnonzero(buf == ord("-"))
    if minus.size:  # a minus inside a text
        ok[np.searchsorted(starts, minus[np.isin(minus, starts, invert=True)], side="right") - 1] = False
    dots = np.flatnonzero(buf == ord("."))
    owner = np.searchsorted(starts, dots, side="right") - 1
    point = lens.copy()
    point[owner] = dots - starts[owner]  # (a text with two points fails below)
    neg = buf[starts] == ord("-")
    digits, k = point - neg, np.maximum(lens - point - 1, 0)  # k: decimals
    width = digits + np.maximum(k, 3)  # of the ns value, before rounding
    ok &= (np.bincount(owner, minlength=n) <= 1) & (digits >= 1) & (lens - point != 1)
    ok &= (width <= 18) | ((width == 19) & (buf[starts + neg] <= ord("8")))
    if not ok.all():
        rows = np.flatnonzero(ok)
        if rows.size:
            ns[rows], ok[rows] = _plain(list(compress(raws, ok.tolist())), lens[rows])
        return ns, ok
    value = np.fromstring(joined.replace(b".", b""), dtype=np.int64, sep=" ")
    if value.size != n:
        return ns, ~ok
    value = np.abs(value) * _POW10[np.maximum(3 - k, 0)]  # ns from 0 to 3 decimals
    if (k > 3).any():  # digits past the ns: round half to even
        long = np.flatnonzero(k > 3)
        q, r = np.divmod(value[long], _POW10[k[long] - 3])
        half = 5 * _POW10[k[long] - 4]
        value[long] = q + ((r > half) | ((r == half) & (q % 2 == 1)))
    ns[:] = np.where(neg, -value, value)
    return ns, ok


MAX_TS_NS = int(MAX_TS_US) * 1000
MAX_DUR_NS = int(MAX_DUR_US) * 1000

NO_ID = -(2**63)
"""An id (``args.device``, ``stream``, ``correlation``, ``bytes``, ``External id``) that is absent or not a number."""

DEVICE_CATEGORIES = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset", "memset": "memset",
                     "mtia_ccp_events": "mtia"}
"""Kineto ``cat`` (lower-cased) of device activity -> traceprobe ``kind``. MTIA's
``mtia_ccp_events`` hold kernels, DMA copies and stream events alike: their kind
is decided by name (:func:`mtia_kind`)."""

HOST_CATEGORIES = {"cpu_op": "cpu_op", "operator": "cpu_op", "cuda_runtime": "cuda_runtime", "runtime": "cuda_runtime",
                   "cuda_driver": "cuda_driver", "user_annotation": "user_annotation", "mtia_runtime": "cuda_runtime"}
"""Kineto ``cat`` (lower-cased) of host activity -> traceprobe ``cat``. A step annotation (:data:`STEP_NAME`) is filed
under ``user_annotation`` whatever category it was written with (:func:`is_step_name`)."""

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
"""The name of ``torch.profiler``'s step annotation, ``ProfilerStep#N`` (N its step number). Kineto writes it as a
``user_annotation``; torch 1.8 and 1.9 wrote it as an ``Operator`` (their ``cpu_op``), as it wrote every op: it
marks a step, it is no op, and is filed under ``user_annotation`` whatever its category."""


def is_step_name(name: object) -> bool:
    """Whether ``name`` is a step annotation's (:data:`STEP_NAME`, ``ProfilerStep#N``)."""
    return STEP_NAME.match(str(name)) is not None

PYTHON_CATEGORIES = {"python_function": "python_function"}
"""Kineto ``cat`` of the Python stack frames a trace recorded with ``with_stack=True`` holds (one event per call):
kept in a table of their own (``Trace.python_events``), apart from the host ops."""

SYNC_CATEGORIES = {"cuda_sync": "cuda_sync"}
"""Kineto ``cat`` of the CUDA synchronization events a trace recorded with ``enable_cuda_sync_events`` holds (``Stream
Wait Event``, ``Event Sync``, ``Stream Sync``, ``Context Sync``: what a call waited for), kept in a table of their own
(``Trace.sync_events``)."""

OVERHEAD_CATEGORIES = {"overhead": "overhead"}
"""Kineto ``cat`` of CUPTI's overhead records (``Activity Buffer Request``, ``Lazy Function Loading``, ...: where the
profiler or the driver held a thread), kept in a table of their own (``Trace.overhead_events``)."""

KINDS = np.array([None, *dict.fromkeys(DEVICE_CATEGORIES.values()), *dict.fromkeys(HOST_CATEGORIES.values()),
                  *PYTHON_CATEGORIES.values(), *SYNC_CATEGORIES.values(), *OVERHEAD_CATEGORIES.values()], dtype=object)
"""traceprobe kind/cat per category code (0: not kept): device kinds, host categories, Python frames, CUDA syncs, CUPTI's
overhead records."""
N_DEVICE_KINDS = len(set(DEVICE_CATEGORIES.values()))
N_HOST_KINDS = len(set(HOST_CATEGORIES.values()))
CAT_CODE = {c: int(np.flatnonzero(KINDS == k)[0])
            for c, k in (DEVICE_CATEGORIES | HOST_CATEGORIES | PYTHON_CATEGORIES | SYNC_CATEGORIES | OVERHEAD_CATEGORIES).items()}
PH_CODES = {"X": 1, "B": 2, "E": 3}
"""Chrome trace ``ph`` of complete events, begins and ends; every other phase is skipped."""


def cat_code(v: Any) -> int:
    """Category code: older torch releases wrote capitalised names (``Kernel``, ``Memcpy``)."""
    return CAT_CODE.get(v.lower(), 0) if isinstance(v, str) else 0


def ph_code(v: Any) -> int:
    """Code in :data:`PH_CODES` of a ``ph`` value; 0 if another."""
    return PH_CODES.get(v, 0) if isinstance(v, str) else 0


DMA_DIRECTIONS = ("", "HtoD", "DtoH", "DtoD", "HtoH")
"""Copy direction by ``dma`` code (0: none)."""
_DMA = re.compile(r"^(HOST|DEVICE|H|D)_?(?:TO|2)_?(HOST|DEVICE|H|D)$", re.IGNORECASE)


def dma_code(v: Any) -> int:
    """Code in :data:`DMA_DIRECTIONS` of an MTIA ``args.direction`` (``HOST_TO_DEVICE``, ``DEVICE_TO_HOST``, ``D2H``...); 0 if none."""
    m = _DMA.match(v) if isinstance(v, str) else None
    if m is None:
        return 0
    return DMA_DIRECTIONS.index(f"{m.group(1)[0].upper()}to{m.group(2)[0].upper()}")


_MEMCPY_RE = re.compile(r"^Memcpy\s+(?P<direction>\w+)\s*\((?P<src>\w+)\s*->\s*(?P<dst>\w+)\)")
# ROCm (roctracer) names copies CopyHostToDevice, CopyDeviceToHost, CopyDeviceToDevice
_ROCM_COPY_RE = re.compile(r"^Copy(?P<src>Host|Device)To(?P<dst>Host|Device)")
_ID_RE = re.compile(r"^\s*(-?\d+)\s*$|(?<![-\d])(\d+)\s*$")


def mtia_kind(name: Any) -> int:
    """Kind code of an MTIA ``mtia_ccp_events`` event by name: DMA requests are copies, stream
    events (``event_record``, ``event_wait``) are not work (-1), everything else runs on the device."""
    name = str(name)
    return 1 if name == "dma_request" else -1 if name.startswith("event_") else 0


def copy_parts(name: str) -> tuple[str | None, str | None, str | None]:
    """(direction, source kind, destination kind) of a memcpy name, CUDA's ``Memcpy HtoD (Pageable ->
    Device)`` or ROCm's ``CopyHostToDevice`` (direction ``HtoD``); Nones for any other name."""
    if (m := _MEMCPY_RE.search(name)) is not None:
        return m.group("direction"), m.group("src"), m.group("dst")
    if (m := _ROCM_COPY_RE.search(name)) is not None:
        return m.group("src")[0] + "to" + m.group("dst")[0], m.group("src"), m.group("dst")
    return None, None, None


def thread_ids(threads: list[Any]) -> np.ndarray:
    """Device or stream id from each distinct ``pid``/``tid`` value: numbers as they are,
    labels such as ``"stream 7"`` (torch 1.8-1.10) by their trailing number; -1 if none."""
    out = np.full(len(threads), -1, dtype=np.int64)
    for i, v in enumerate(threads):  # once per distinct value
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)) and abs(v) < 2**62:
            out[i] = int(v)
        elif isinstance(v, str) and (m := _ID_RE.search(v)):
            out[i] = int(m.group(1) or m.group(2))
    return out


ID_COLUMNS = ("device", "stream", "correlation", "bytes", "external_id")
"""Kineto ``args`` read as int64 ids: ``device``, ``stream``, ``correlation``, ``bytes``, ``External id``."""
COLLECTIVE_ARGS = ("collective", "in_nelems", "out_nelems", "group_size", "dtype", "pg_name", "correlation", "external_id",
                   "src_rank", "dst_rank")
"""Fields of :func:`collective_columns`, from Kineto's args ``Collective name``, ``In msg nelems``,
``Out msg nelems``, ``Group size``, ``dtype``, ``Process Group Name``, ``correlation``, ``External id``, and
a send's ``Dst Rank`` / a receive's ``Src Rank`` (the peer's rank in the process group, torch's ``record_param_comms``)."""
_COLLECTIVE_STR = ("collective", "dtype", "pg_name")


class Codes(dict):
    """Distinct value -> int code, computed once per distinct value: ``fn(value)``, or without ``fn`` the next
    number in order of first appearance (``values`` lists the values coded)."""

    def __init__(self, fn: Callable[[Any], int] | None = None, dtype: Any = np.int32) -> None:
        super().__init__()
        self.fn, self.dtype = fn, dtype
        self.values: list[Any] = []

    def __missing__(self, key: Any) -> int:
        if self.fn is not None:
            code = self[key] = self.fn(key)
            return code
        code = self[key] = len(self.values)
        self.values.append(key)
        return code

    def column(self, objs: list[Any], attr: str) -> np.ndarray:
        """The code of each object's ``attr``, read straight through the codes (no list of the values);
        unhashable values (lists, objects) are coded as their JSON text."""
        try:
            return np.fromiter(map(self.__getitem__, map(attrgetter(attr), objs)), self.dtype, len(objs))
        except TypeError:
            return np.fromiter(map(self.__getitem__, map(_hashable, map(attrgetter(attr), objs))), self.dtype, len(objs))


def _hashable(v: Any) -> Any:
    return v if isinstance(v, (str, int, float)) or v is None else msgspec.json.encode(v).decode()


def as_int(v: Any) -> int:
    """An id from a tolerant field: ints (and integral-looking floats/strings) as int, else NO_ID."""
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return NO_ID
    if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 2**62:
        return int(v)
    return NO_ID


def as_str(v: Any) -> str:
    return v if isinstance(v, str) else "" if v is None else str(v)


def id_column(args: Any, attr: str) -> np.ndarray:
    """One of the :data:`ID_COLUMNS` of the events' args structs as int64 (:data:`NO_ID` where absent or not a number)."""
    try:
        return np.fromiter(map(attrgetter(attr), args), np.int64, len(args))
    except (TypeError, ValueError, OverflowError):
        return np.fromiter(map(as_int, map(attrgetter(attr), args)), np.int64, len(args))


def _int_column(values: list[Any]) -> np.ndarray:
    """:func:`as_int` of each value as int64: one C-level conversion where all are ints within its bounds, else one by one."""
    if values and set(map(type, values)) == {int} and -(2**62) < min(values) and max(values) < 2**62:
        return np.array(values, np.int64)
    return np.fromiter(map(as_int, values), np.int64, len(values))


def collective_columns(args: Any) -> dict[str, np.ndarray]:
    """:data:`COLLECTIVE_ARGS` of the given args structs: numbers int64 (-1 where absent or not
    a number), names str (``""`` where absent)."""
    ints = {a: _int_column(list(map(attrgetter(a), args))) for a in COLLECTIVE_ARGS if a not in _COLLECTIVE_STR}
    strs = {a: np.fromiter(map(as_str, map(attrgetter(a), args)), object, len(args)) for a in _COLLECTIVE_STR}
    return strs | {a: np.where(v == NO_ID, -1, v) for a, v in ints.items()}


def bad_times(cols: dict[str, np.ndarray], with_dur: bool = True) -> np.ndarray:
    """Per event: its ``ts`` (and ``dur``) missing, not a number, negative or absurd (bool)."""
    ts, dur = cols["ts"], cols["dur"]
    bad = (cols["ts_status"] != 0) | (ts < 0) | (ts >= MAX_TS_NS)
    if with_dur:
        bad |= (cols["dur_status"] != 0) | (dur < 0) | (dur > MAX_DUR_NS)
    return bad


def check_times(path: str | Path, cols: dict[str, np.ndarray], what: str, names: list[Any], with_dur: bool = True) -> None:
    ts, dur = cols["ts"], cols["dur"]
    bad = bad_times(cols, with_dur)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])

        def show(v: np.ndarray, status: np.ndarray) -> str:
            return {MISSING: "missing", INVALID: "not a number"}.get(int(status[i]), f"{int(v[i]) / 1000:.3f}")

        raise TraceFormatError(
            path,
            f"{int(bad.sum())} {what} event(s) with missing, non-numeric, negative or absurd ts/dur "
            f"(first: {as_str(names[cols['name'][i]])!r} ts={show(ts, cols['ts_status'])} µs"
            + (f" dur={show(dur, cols['dur_status'])} µs)" if with_dur else ")"),
        )


def pair_begin_end(cols: dict[str, np.ndarray], warnings: list[str]) -> dict[str, np.ndarray]:
    """``ph: B``/``E`` events -> complete events (vectorized).

    Per (pid, tid), in timestamp order, a B opens a slice at depth k and the next
    E at depth k closes it (the Chrome trace format's stack rule). Name, category
    and args come from the B event. Unmatched events are dropped and counted in
    ``warnings``.
    """
    n = len(cols["ts"])
    is_begin = cols["ph"] == PH_CODES["B"]
    thread = cols["pid"].astype(np.int64) << 32 | cols["tid"].astype(np.int64)
    ts = cols["ts"]
    order = np.lexsort((np.arange(n), ts, thread))
    delta = np.where(is_begin[order], 1, -1)
    t_sorted = thread[order]
    depth = np.cumsum(delta)
    starts = np.flatnonzero(np.r_[True, t_sorted[1:] != t_sorted[:-1]])
    depth -= np.repeat(np.r_[0, depth[starts[1:] - 1]], np.diff(np.r_[starts, n]))  # per-thread running depth
    level = np.where(delta > 0, depth, depth + 1)
    o2 = np.lexsort((np.arange(n), level, t_sorted))
    idx = order[o2]
    b = is_begin[idx]
    same = (thread[idx][:-1] == thread[idx][1:]) & (level[o2][:-1] == level[o2][1:])
    pair = b[:-1] & ~b[1:] & same
    bi, ei = idx[:-1][pair], idx[1:][pair]
    dropped = n - 2 * len(bi)
    if dropped:
        warnings.append(f"{dropped} unmatched B/E event(s) dropped")
    out = {k: v[bi] for k, v in cols.items()}
    out["dur"] = ts[ei] - ts[bi]
    return out


