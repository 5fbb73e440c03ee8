"""Columns of events: value codes, ids, time checks and B/E pairing.

Helpers of :mod:`.decode`, on plain numpy columns: no JSON here.
Times are int64 ns throughout.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ..errors import TraceFormatError
from .timestamps import INVALID, MISSING

NO_ID = -(2**63)
"""An id (``args.device``, ``stream``, ``correlation``, ``bytes``, ``External id``) that is absent or not a number."""

DEVICE_CATEGORIES = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "mtia_ccp_events": "mtia",
}
"""Kineto ``cat`` (lower-cased) of device activity -> traceprobe ``kind``. MTIA's
``mtia_ccp_events`` hold kernels, DMA copies and stream events alike: their kind
is decided by name in :mod:`.frames`."""

HOST_CATEGORIES = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "cuda_runtime": "cuda_runtime",
    "runtime": "cuda_runtime",
    "cuda_driver": "cuda_driver",
    "user_annotation": "user_annotation",
    "mtia_runtime": "cuda_runtime",
}
"""Kineto ``cat`` (lower-cased) of host activity -> traceprobe ``cat``."""

KINDS = np.array([None, *dict.fromkeys(DEVICE_CATEGORIES.values()), *dict.fromkeys(HOST_CATEGORIES.values())], dtype=object)
"""traceprobe kind/cat per category code (0: not kept)."""
N_DEVICE_KINDS = len(set(DEVICE_CATEGORIES.values()))
CAT_CODE = {c: int(np.flatnonzero(KINDS == k)[0]) for c, k in (DEVICE_CATEGORIES | HOST_CATEGORIES).items()}
PH_CODES = {"X": 1, "B": 2, "E": 3}
"""Chrome trace ``ph`` of complete events, begins and ends; every other phase is skipped."""
ID_COLUMNS = ("device", "stream", "correlation", "bytes", "external_id")
"""Kineto ``args`` read as int64 ids: ``device``, ``stream``, ``correlation``, ``bytes``, ``External id``."""
TABLE_IDS = {"device": ("device", "stream", "correlation", "bytes"), "host": ("correlation", "external_id")}
"""The :data:`ID_COLUMNS` read for each table: the ones its frame holds (:mod:`.frames`). The others
are :data:`NO_ID` in that table (collectives read their ids apart: :func:`collective_columns`)."""

COLLECTIVE_ARGS = ("collective", "in_nelems", "out_nelems", "group_size", "dtype", "pg_name", "correlation", "external_id")
"""Fields of :func:`collective_columns`, from Kineto's args ``Collective name``, ``In msg nelems``,
``Out msg nelems``, ``Group size``, ``dtype``, ``Process Group Name``, ``correlation``, ``External id``."""
_COLLECTIVE_STR = ("collective", "dtype", "pg_name")


MAX_TS_US = 9.0e15
"""Largest accepted ``ts`` in µs: beyond it ns would overflow int64 (year ~2255 as epoch µs)."""
MAX_DUR_US = 7 * 24 * 3600 * 1e6
"""Largest accepted ``dur`` in µs (7 days): longer is taken as a corrupt value."""
MAX_TS_NS = int(MAX_TS_US) * 1000
MAX_DUR_NS = int(MAX_DUR_US) * 1000


class Codes(dict):
    """Distinct value -> small int code, in order of first appearance; ``values`` lists them."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[Any] = []

    def __missing__(self, key: Any) -> int:
        code = self[key] = len(self.values)
        self.values.append(key)
        return code

    def code(self, values: list[Any]) -> np.ndarray:
        """int32 code of every value (unhashable values are made str first)."""
        try:
            return np.fromiter(map(self.__getitem__, values), np.int32, len(values))
        except TypeError:
            return np.fromiter(map(self.__getitem__, map(hashable, values)), np.int32, len(values))

    def code_field(self, objs: list[Any], attr: str) -> np.ndarray:
        """:meth:`code` of each object's ``attr``, read straight into the codes (no list of the values:
        the pid and tid of HTA's 216k-event trace 14.4 -> 10.0 ms, its names 8.2 -> 6.9 ms)."""
        return _field_through(self, self.code, objs, attr, np.int32)


def hashable(v: Any) -> Any:
    return v if isinstance(v, (str, int, float)) or v is None else msgspec.json.encode(v).decode()


class Lookup(dict):
    """Distinct value -> ``fn(value)``, computed once per distinct value."""

    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def __missing__(self, key: Any) -> int:
        code = self[key] = self.fn(key)
        return code

    def column(self, values: list[Any]) -> np.ndarray:
        try:
            return np.fromiter(map(self.__getitem__, values), np.int8, len(values))
        except TypeError:  # an unhashable value (a list, a dict)
            return np.fromiter(map(self.fn, values), np.int8, len(values))

    def column_field(self, objs: list[Any], attr: str) -> np.ndarray:
        """:meth:`column` of each object's ``attr``, with no list of the values."""
        return _field_through(self, self.column, objs, attr, np.int8)


def _field_through(table: dict[Any, Any], of_list: Callable[[list[Any]], np.ndarray], objs: list[Any], attr: str,
                   dtype: Any) -> np.ndarray:
    """``table[o.attr]`` of every object ``o``, as ``dtype``, read straight through the table (a :class:`Codes` or
    :class:`Lookup`, whose ``__missing__`` fills it); ``of_list`` (its list method) where a value is unhashable."""
    try:
        return np.fromiter(map(table.__getitem__, map(attrgetter(attr), objs)), dtype, len(objs))
    except TypeError:
        return of_list(list(map(attrgetter(attr), objs)))


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


def id_columns(args: Any, fields: tuple[str, ...] = ID_COLUMNS) -> list[np.ndarray]:
    """The ``fields`` (of :data:`ID_COLUMNS`) of the events' args structs as int64 (NO_ID where absent or not a number)."""
    return [_id_column(args, a) for a in fields]


def _id_column(args: Any, attr: str) -> np.ndarray:
    try:
        return np.fromiter(map(attrgetter(attr), args), np.int64, len(args))
    except (TypeError, ValueError, OverflowError):
        return np.fromiter(map(as_int, map(attrgetter(attr), args)), np.int64, len(args))


def collective_columns(args: Any) -> dict[str, np.ndarray]:
    """:data:`COLLECTIVE_ARGS` of the given args structs: numbers int64 (-1 where absent or not
    a number), names str (``""`` where absent)."""
    n = len(args)
    out: dict[str, np.ndarray] = {}
    for a in COLLECTIVE_ARGS:
        vals = map(attrgetter(a), args)
        if a in _COLLECTIVE_STR:
            out[a] = np.fromiter(map(as_str, vals), object, n)
        else:
            v = np.fromiter(map(as_int, vals), np.int64, n)
            out[a] = np.where(v == NO_ID, -1, v)
    return out


def empty_columns() -> dict[str, np.ndarray]:
    cols = {k: np.zeros(0, np.int64) for k in (*ID_COLUMNS, "ts", "dur", "comm")}
    return cols | {k: np.zeros(0, np.int8) for k in ("ph", "cat", "ts_status", "dur_status", "dma")} | {k: np.zeros(0, np.int32) for k in ("name", "pid", "tid")}


def check_times(path: str | Path, cols: dict[str, np.ndarray], what: str, names: list[Any], with_dur: bool = True) -> None:
    ts, dur = cols["ts"], cols["dur"]
    bad = (cols["ts_status"] != 0) | (ts < 0) | (ts >= MAX_TS_NS)
    if with_dur:
        bad |= (cols["dur_status"] != 0) | (dur < 0) | (dur > MAX_DUR_NS)
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


