"""Decoding Kineto / Chrome trace JSON into columns of numpy arrays: the one decode path.

The low layer under :func:`traceprobe.trace.load_trace`. :func:`read_events`
reads a trace file and returns, per table (device activity, host activity),
columns of complete events, B/E pairs already joined:

1. The JSON streams in chunks (:func:`traceprobe.tracefile.read_trace_chunks`:
   read, or inflated, a few MiB at a time, within the size limit) through a
   :class:`traceprobe.splitter.Splitter`, which cuts the ``traceEvents`` list into
   pieces of about :data:`PIECE_BYTES` at event boundaries (``}`` ``,`` ``{``) and
   keeps the head fields written before and after the list. Each piece is
   decoded by ``msgspec`` into typed structs holding only the fields traceprobe
   needs. ``ph`` is a tagged union: flow, instant, counter and metadata events
   decode to empty structs. Columns are pulled out of each piece's structs with
   C-level iteration (``map``/``attrgetter``/``numpy.fromiter``) before the next
   chunk is read, so only a piece or two of JSON, one piece of structs and the
   columns are alive at a time: never the whole JSON. (The streaming, and the
   sharing of the pieces among processes, are in :mod:`traceprobe.shares`; the
   structs and the column builder are here.)
2. Where that strict reading fails (a cut inside an event, an unknown ``ph``, a
   float or a label where an id should be, invalid JSON, a layout the splitter
   does not recognise...), the columns so far are dropped and the whole trace
   is read again and decoded at once with tolerant types, through the same
   column builder. Its messages are the ones users see for broken files.
   Errors of the file itself (unreadable, too large, corrupt gzip) stop the
   stream where they show, with the same messages as a whole read.

``ts`` and ``dur`` are kept as their JSON text and converted to int64 ns exactly
by :func:`traceprobe.timestamps.parse_us`. Traces that write them as integer
microseconds (Kineto before torch 2.1; HTA's test data) are first decoded with
integer times, which need no text (``ns = µs * 1000``, exact); the first piece
with another number, or an absent time, is decoded again with the text, as is
every piece after it (:meth:`_Builder.add_piece`). On HTA's 216k-event trace the
decode went 0.25 -> 0.215 s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import reduce
from itertools import chain, compress
from operator import attrgetter, or_
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from .columns import (
    CAT_CODE,
    ID_COLUMNS,
    N_DEVICE_KINDS,
    NO_ID,
    PH_CODES,
    TABLE_IDS,
    Codes,
    Lookup,
    check_times,
    collective_columns,
    empty_columns,
    id_columns,
    pair_begin_end,
)
from .errors import TraceFormatError
from .splitter import Head, skip_space
from .timestamps import INVALID, MISSING, OK, parse_us
from .tracefile import NOT_A_TRACE, not_kineto_reason

PIECE_BYTES = 1 << 20
"""Stretch of ``traceEvents`` decoded to structs at a time (bytes): a piece ends at the first event boundary after it.
Small pieces keep a piece's structs and columns in the CPU's caches, and deal a trace out evenly among
decoding processes: decoding HTA's 216k-event trace in one process took 167 ms with 16 MiB pieces, 144
with 8, 132 with 1 (135 with 0.5, 138 with 0.25); synthetic 10^6 events 1255 -> 879 ms (16 -> 1 MiB).
With 16 MiB pieces dealt round-robin to 2 processes, one got 129 ms of the real trace's work and the other 81."""

class _Args(msgspec.Struct, gc=False):
    # ids are ints; a label (ROCm's runtime "stream": "0x0") is read as no id
    device: int | str = NO_ID
    stream: int | str = NO_ID
    correlation: int | str = NO_ID
    bytes: int | str = NO_ID
    external_id: int | str = msgspec.field(default=NO_ID, name="External id")
    # collectives (torch's record_param_comms, and NCCL kernels of newer torch)
    collective: str | None = msgspec.field(default=None, name="Collective name")
    in_nelems: int = msgspec.field(default=NO_ID, name="In msg nelems")
    out_nelems: int = msgspec.field(default=NO_ID, name="Out msg nelems")
    group_size: int = msgspec.field(default=NO_ID, name="Group size")
    dtype: str | None = None
    pg_name: str | None = msgspec.field(default=None, name="Process Group Name")


_EMPTY_RAW = msgspec.Raw(b"")


def _event_struct(tag: str, name: str, times: Any = msgspec.Raw, no_time: Any = _EMPTY_RAW) -> type:
    """The strict struct of one ``ph`` (X, B or E): every field traceprobe reads; ``ts``/``dur``
    as their JSON text (``times`` Raw) or as integers (``times`` int, :data:`NO_ID` when absent)."""
    return msgspec.defstruct(
        name,
        [
            ("cat", str, ""),
            ("name", str, ""),
            ("pid", "int | str", -1),
            ("tid", "int | str", -1),
            ("ts", times, no_time),
            ("dur", times, no_time),
            ("args", "_Args | None", None),
        ],
        tag_field="ph",
        tag=tag,
        gc=False,
        namespace={"_Args": _Args},
    )


_KEPT = {ph: _event_struct(ph, f"_Event{ph}") for ph in PH_CODES}
_KEPT_INT = {ph: _event_struct(ph, f"_IntEvent{ph}", int, NO_ID) for ph in PH_CODES}
# Every other phase of the Chrome trace format: decoded to an empty struct, skipped.
_SKIPPED = {
    ph: msgspec.defstruct(f"_Skip{i}", [], tag_field="ph", tag=ph, gc=False)
    for i, ph in enumerate(["i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "O", "N", "D", "M", "R", "(", ")", "c", "S", "T", "F", "p", "a"])
}
_PH_OF_TYPE = {t: PH_CODES[ph] for kept in (_KEPT, _KEPT_INT) for ph, t in kept.items()} | {t: 0 for t in _SKIPPED.values()}
_PIECE_DECODER = msgspec.json.Decoder(list[reduce(or_, [*_KEPT.values(), *_SKIPPED.values()])])  # type: ignore[misc]
_INT_PIECE_DECODER = msgspec.json.Decoder(list[reduce(or_, [*_KEPT_INT.values(), *_SKIPPED.values()])])  # type: ignore[misc]
"""For traces whose ``ts``/``dur`` are integer microseconds (Kineto before torch 2.1, HTA's test data): the
times come out as ints, with no text to parse; any other number fails the piece (see :meth:`_Builder.add_piece`)."""
_INT_TYPES = frozenset(_KEPT_INT.values())
_US_BOUND = (2**63 - 1) // 1000
"""Largest integer µs magnitude whose ns fits in int64 (beyond it: :data:`~traceprobe.timestamps.INVALID`, as
:func:`~traceprobe.timestamps.parse_us` says)."""


class _NotIntegerTimes(Exception):
    """A piece decoded with integer times has an absent or out-of-range one: it is decoded again with their text."""


def _integer_us(values: Iterable[Any], n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` integer microseconds -> exact int64 ns and status, as :func:`~traceprobe.timestamps.parse_us` gives
    them for the same numbers written as text.

    Raises:
        _NotIntegerTimes: a value is absent (:data:`NO_ID`, which is also how an explicit
            ``-9223372036854775808`` would read) or beyond int64.
    """
    try:
        v = np.fromiter(values, np.int64, n)
    except OverflowError:
        raise _NotIntegerTimes from None
    if (v == NO_ID).any():
        raise _NotIntegerTimes
    ok = (v >= -_US_BOUND) & (v <= _US_BOUND)
    return np.where(ok, v * 1000, 0), np.where(ok, OK, INVALID).astype(np.int8)


class _AnyArgs(msgspec.Struct, gc=False):
    device: Any = NO_ID
    stream: Any = NO_ID
    correlation: Any = NO_ID
    bytes: Any = NO_ID
    external_id: Any = msgspec.field(default=NO_ID, name="External id")
    collective: Any = msgspec.field(default=None, name="Collective name")
    in_nelems: Any = msgspec.field(default=NO_ID, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=NO_ID, name="Out msg nelems")
    group_size: Any = msgspec.field(default=NO_ID, name="Group size")
    dtype: Any = None
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")


class _AnyEvent(msgspec.Struct, gc=False):
    """Tolerant struct of any event: types checked later, column by column."""

    ph: Any = ""
    cat: Any = ""
    name: Any = ""
    pid: Any = -1
    tid: Any = -1
    ts: msgspec.Raw = _EMPTY_RAW
    dur: msgspec.Raw = _EMPTY_RAW
    args: _AnyArgs | None = None


class _WholeTrace(Head, kw_only=True):
    traceEvents: list[_AnyEvent]


_WHOLE = msgspec.json.Decoder(_WholeTrace)
_WHOLE_LIST = msgspec.json.Decoder(list[_AnyEvent])


@dataclass
class Decoded:
    """What :func:`decode_events` read.

    Attributes:
        head: the top-level fields (``deviceProperties``, ``distributedInfo``...).
        event_count: length of ``traceEvents``.
        tables: ``{"device": columns, "host": columns}``, see :func:`decode_events`.
        names: event name per ``name`` code, as written (str, or another JSON
            value in odd traces).
        threads: ``pid``/``tid`` value (int or str as written) per code.
        collectives: the :data:`COLLECTIVE_ARGS` of events whose args name a
            collective (Kineto's ``Collective name``), one row per such event;
            a table's int64 ``comm`` column indexes them (-1: none).
        warnings: what was dropped or guessed, one line each.
    """

    head: Head
    event_count: int
    tables: dict[str, dict[str, np.ndarray]]
    names: list[str]
    threads: list[Any]
    collectives: dict[str, np.ndarray]
    warnings: list[str] = field(default_factory=list)



def _cat_code(v: Any) -> int:
    """Category code: older torch releases wrote capitalised names (``Kernel``, ``Memcpy``)."""
    return CAT_CODE.get(v.lower(), 0) if isinstance(v, str) else 0


def _ph_code(v: Any) -> int:
    return PH_CODES.get(v, 0) if isinstance(v, str) else 0


_NO_ARGS = _Args()
_NONE = np.array(None, dtype=object)


class _Builder:
    """Columns of the kept events (``ph`` X/B/E of a known category), piece by piece."""

    def __init__(self) -> None:
        self.names, self.threads = Codes(), Codes()
        self.cats = Lookup(_cat_code)
        self.parts: list[dict[str, np.ndarray]] = []
        self.comm_parts: list[dict[str, np.ndarray]] = []
        self.count = 0
        self.n_comm = 0
        self.integer_times = True

    def add_piece(self, piece: bytes) -> None:
        """Decode one piece of the event list (strict structs) and add its columns.

        Times are read as integer microseconds while the trace's are (no text to
        parse); the first piece with another kind of number (decimals, mostly) or an
        absent time is decoded again with the times as text, and so is every piece
        after it. The columns are the same either way.

        Raises:
            msgspec.MsgspecError: the piece does not decode strictly.
        """
        if self.integer_times:
            try:
                self.add(_INT_PIECE_DECODER.decode(piece))
                return
            except (msgspec.ValidationError, _NotIntegerTimes):
                self.integer_times = False
        self.add(_PIECE_DECODER.decode(piece))

    def add(self, events: list[Any]) -> None:
        if events and type(events[0]) is _AnyEvent:
            ph = Lookup(_ph_code).column(list(map(attrgetter("ph"), events)))
        else:
            ph = np.fromiter(map(_PH_OF_TYPE.__getitem__, map(type, events)), np.int8, len(events))
        sel = np.flatnonzero(ph)
        objs = list(compress(events, ph.tolist()))  # (C-level selection: no index list)
        cat = self.cats.column_field(objs, "cat")
        keep = np.flatnonzero(cat)
        if keep.size < len(objs):
            objs = list(compress(objs, cat.tolist()))
        n = len(objs)
        tsdur = chain.from_iterable(map(attrgetter("ts", "dur"), objs))  # ts, dur, ts, dur...
        times, status = _integer_us(tsdur, 2 * n) if objs and type(objs[0]) in _INT_TYPES else parse_us(list(tsdur))
        ts, dur, ts_status, dur_status = times[0::2], times[1::2], status[0::2], status[1::2]
        self.count += len(events)  # (nothing is recorded before the times are read: a piece that gives way leaves no trace)
        args = np.fromiter(map(attrgetter("args"), objs), object, n)
        args[np.equal(args, _NONE)] = _NO_ARGS
        cols: dict[str, np.ndarray] = self._ids(args, cat[keep])
        cols["comm"] = self._collectives(args)
        cols |= {
            "ph": ph[sel][keep],
            "cat": cat[keep],
            "name": self.names.code_field(objs, "name"),
            "pid": self.threads.code_field(objs, "pid"),
            "tid": self.threads.code_field(objs, "tid"),
            "ts": ts,
            "ts_status": ts_status,
            "dur": dur,
            "dur_status": dur_status,
        }
        self.parts.append(cols)

    @staticmethod
    def _ids(args: np.ndarray, cat: np.ndarray) -> dict[str, np.ndarray]:
        """The :data:`ID_COLUMNS` of each row: those its table keeps (:data:`TABLE_IDS`), :data:`NO_ID` for the others.
        (Reading only those: on HTA's 216k-event trace, 31 -> 21 ms; 1.3 -> 0.7 ms on 10^4 synthetic events.)"""
        on_device = cat <= N_DEVICE_KINDS
        cols = {k: np.full(len(args), NO_ID, dtype=np.int64) for k in ID_COLUMNS}
        for table, rows in (("device", np.flatnonzero(on_device)), ("host", np.flatnonzero(~on_device))):
            if rows.size == len(args):
                cols |= dict(zip(TABLE_IDS[table], id_columns(args, TABLE_IDS[table])))
            elif rows.size:
                for k, v in zip(TABLE_IDS[table], id_columns(args[rows], TABLE_IDS[table])):
                    cols[k][rows] = v
        return cols

    def _collectives(self, args: np.ndarray) -> np.ndarray:
        """Keep the collective args of the events naming one; their index per event (-1: none)."""
        rows = np.flatnonzero(~np.equal(np.fromiter(map(attrgetter("collective"), args), object, len(args)), _NONE))
        index = np.full(len(args), -1, dtype=np.int64)
        if rows.size:
            index[rows] = np.arange(self.n_comm, self.n_comm + rows.size)
            self.n_comm += rows.size
            self.comm_parts.append(collective_columns(args[rows]))
        return index

    def collectives(self) -> dict[str, np.ndarray]:
        parts = self.comm_parts or [collective_columns(np.zeros(0, object))]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def joined(self) -> tuple[dict[str, np.ndarray], list[int]]:
        """The pieces' columns end to end (contiguous arrays), and the rows of each piece."""
        parts = self.parts
        rows = [len(p["ts"]) for p in parts]
        if len(parts) == 1:
            return parts[0], rows
        return ({k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else empty_columns()), rows

    def tables(self, path: str | Path, warnings: list[str]) -> dict[str, dict[str, np.ndarray]]:
        """Device and host columns of complete events (B/E pairs joined), times checked."""
        cols, _ = self.joined()
        self.parts = []
        out = {}
        for what, in_table in (("device", (cols["cat"] > 0) & (cols["cat"] <= N_DEVICE_KINDS)), ("host", cols["cat"] > N_DEVICE_KINDS)):
            complete, paired = np.flatnonzero(in_table & (cols["ph"] == 1)), np.flatnonzero(in_table & (cols["ph"] > 1))
            x = {k: v[complete] for k, v in cols.items()}  # (masks made once, not once per column)
            be = {k: v[paired] for k, v in cols.items()}
            missing_dur = int((x["dur_status"] == MISSING).sum())
            if missing_dur:
                warnings.append(f"{missing_dur} {what} complete event(s) without 'dur': taken as 0 ns long")
                x["dur_status"] = np.where(x["dur_status"] == MISSING, 0, x["dur_status"]).astype(np.int8)
            check_times(path, x, what, self.names.values)
            if len(be["ts"]):
                check_times(path, be, what, self.names.values, with_dur=False)
                be = pair_begin_end(be, warnings)
                x = {k: np.concatenate([x[k], be[k]]) for k in x}
            x["end"] = x["ts"] + x["dur"]
            out[what] = x
        return out


def _decode_whole(path: str | Path, raw: Any) -> _WholeTrace:
    """Every event at once, tolerant types; the messages users see for broken files."""
    first = skip_space(raw, 0, len(raw))
    if first == len(raw):
        raise TraceFormatError(path, "empty file")
    try:
        if raw[first : first + 1] == b"[":
            return _WholeTrace(traceEvents=_WHOLE_LIST.decode(raw))
        return _WHOLE.decode(raw)
    except msgspec.ValidationError as exc:
        msg = str(exc)
        reason = not_kineto_reason(raw)
        if "missing required field `traceEvents`" in msg or reason != NOT_A_TRACE:
            raise TraceFormatError(path, reason) from None
        raise TraceFormatError(path, f"unexpected trace content: {msg}") from None
    except msgspec.DecodeError as exc:
        msg = str(exc)
        if "truncated" in msg.lower():
            raise TraceFormatError(path, f"truncated JSON ({msg})") from None
        raise TraceFormatError(path, f"not valid JSON ({msg})") from None


def read_events(path: str | Path, max_bytes: int | None = None) -> Decoded:
    """Read and decode a trace file into device and host columns.

    Args:
        path: the file (see :func:`traceprobe.tracefile.read_trace_bytes`).
        max_bytes: largest decompressed size accepted.

    Returns:
        a :class:`Decoded`. Each table holds int64 ``ts``/``dur``/``end`` (ns,
        exact), the ``ID_COLUMNS`` (int64, :data:`NO_ID` where absent; each table
        reads only its own, :data:`~traceprobe.columns.TABLE_IDS`), int8
        ``cat`` (an index into :data:`KINDS`), and int32 ``name``, ``pid``,
        ``tid`` codes into ``Decoded.names`` / ``Decoded.threads``.

    Raises:
        TraceFormatError: unreadable, too large, not JSON, not a Chrome trace,
            or events whose ``ts``/``dur`` are unusable.
    """
    from .shares import decode_share, merge_shares  # (shares.py builds on this module)

    return merge_shares(path, [decode_share(path, max_bytes)], max_bytes)
