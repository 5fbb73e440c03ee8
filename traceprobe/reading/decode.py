"""Decoding Kineto / Chrome trace JSON into columns of numpy arrays: the one decode path.

:func:`read_events` streams the file (:func:`.files.read_trace_chunks`) through a
:class:`.splitter.Splitter`, which cuts the ``traceEvents`` list into pieces of about
:data:`PIECE_BYTES`. ``msgspec`` decodes each piece into strict structs of only the
fields traceprobe reads (``ph`` a tagged union: every phase but X, B and E decodes to
an empty struct); a piece that does not (an unknown ``ph``, a float for an id, a list
for a name) is decoded again with tolerant types, checked column by column, so an odd
event costs its own piece a second decode. A piece cut inside a string (``a},{b``) is
joined to the next. Each piece's columns are pulled out before the next chunk is read:
only a piece or two of JSON and of structs are alive at a time. ``ts`` and ``dur`` are
kept as their JSON text and converted to int64 ns exactly (:func:`.columns.parse_us`).
A document without a ``traceEvents`` list is named by what it looks like
(:mod:`.not_traces`) rather than ``not valid JSON``.
"""

from __future__ import annotations

import re
from contextlib import closing
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import attrgetter, ne
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ..errors import TraceFormatError
from .columns import (
    CAT_CODE,
    ID_COLUMNS,
    KINDS,
    MISSING,
    N_DEVICE_KINDS,
    N_HOST_KINDS,
    NO_ID,
    Codes,
    bad_times,
    cat_code,
    check_times,
    collective_columns,
    dma_code,
    id_column,
    pair_begin_end,
    parse_us,
    ph_code,
)
from .events import _DUR, _MARKS, _NO_MARKS, _OP_ARGS_OF, _PH_OF_TYPE, _STRICT, _TOLERANT, _TS, _AnyEvent, _Args
from .files import read_trace_chunks
from .not_traces import not_a_trace, not_json
from .splitter import Head, NotJSON, Piece, Splitter, join

PIECE_BYTES = 1 << 20
"""Stretch of ``traceEvents`` decoded at a time (bytes; a piece ends at the first event boundary after it): small
enough for a piece's structs and columns to stay in the CPU's caches (``docs/performance.md``)."""




@dataclass
class Decoded:
    """What :func:`read_events` read.

    Attributes:
        head: the top-level fields (``deviceProperties``, ``distributedInfo``...).
        event_count: length of ``traceEvents``.
        tables: ``{"device": ..., "host": ..., "python": ..., "sync": ..., "overhead": columns}`` of complete events (B/E pairs joined): int64
            ``ts``/``dur``/``end`` (ns, exact), the :data:`~.columns.ID_COLUMNS` (int64, :data:`~.columns.NO_ID`
            where absent, and in the tables that do not read it: :data:`_ID_READERS`), int8 ``cat`` (an index into
            :data:`~.columns.KINDS`), int8 ``dma`` (a copy direction code of MTIA's ``args.direction``, 0 where none),
            int64 ``comm`` (a row of ``collectives``, -1 where none), int64 ``wait_correlation``/``wait_stream`` (a
            ``cuda_sync`` event's ``wait_on_cuda_event_record_corr_id`` / ``wait_on_stream``, :data:`~.columns.NO_ID`
            elsewhere), and int32 ``name``, ``pid``, ``tid`` codes into ``names`` / ``threads``.
        names: event name per ``name`` code, as written (str, or another JSON value in odd traces).
        threads: ``pid``/``tid`` value (int or str as written) per code.
        collectives: the :data:`~.columns.COLLECTIVE_ARGS` of events whose args name a collective (Kineto's
            ``Collective name``), one row per such event.
        op_args: the distinct :data:`.events.OP_ARGS` tuples of host ops (bytes of JSON text each), coded by the tables' int32
            ``args`` column (-1: none; that column is all -1 in a trace recorded without shapes or FLOPs).
        warnings: what was dropped or guessed, one line each.
    """

    head: Head
    event_count: int
    tables: dict[str, dict[str, np.ndarray]]
    names: list[str]
    threads: list[Any]
    collectives: dict[str, np.ndarray]
    warnings: list[str] = field(default_factory=list)
    op_args: list[tuple[bytes, ...]] = field(default_factory=list)


def _events(piece: Piece) -> list[Any]:
    """A piece's events: strict structs, else tolerant ones. The tolerant decode's errors are the piece's (a piece cut
    inside a string whose strict decode met an odd event first is truncated for both, and joined to the next).

    Raises:
        msgspec.ValidationError: not a list of events; msgspec.DecodeError: not JSON, or truncated.
    """
    try:
        return _STRICT.decode(piece[0])
    except msgspec.ValidationError:
        return _TOLERANT.decode(piece[0])


class Unsplittable(Exception):
    """A piece of a share that does not decode on its own (:meth:`_Builder.add_piece` with a share): the trace is
    read whole instead, which joins or names it (:mod:`.shares`)."""


_NO_ARGS = _Args()
_NONE = np.array(None, dtype=object)


class _Builder:
    """Columns of the kept events (``ph`` X/B/E of a known category), piece by piece."""

    def __init__(self, share: tuple[int, int] | None = None) -> None:
        self.share = share  # (k, n): decode only the pieces whose index is k modulo n (.shares); None: every piece
        self.next_piece = 0
        self.pieces: list[int] = []  # (with a share: the index of each part's piece, and the collectives before it)
        self.comm_before: list[int] = []
        self.names, self.threads = Codes(), Codes()
        self.cats, self.dma = Codes(cat_code, np.int8), Codes(dma_code, np.int8)
        self.parts: list[dict[str, np.ndarray]] = []
        self.comm_parts: list[dict[str, np.ndarray]] = []
        self.count = 0
        self.n_comm = 0
        self.carry: Piece | None = None  # a piece that ended inside a string, joined to the next
        self.op_args: Codes = Codes()

    def add_piece(self, path: str | Path, piece: Piece, last: bool) -> None:
        """Decode one piece of the event list and add its columns: strict structs, else tolerant ones.

        A piece that ends inside a string (a wrong cut, see :mod:`.splitter`) is
        kept and joined to the next (``last``: there is none).

        Raises:
            TraceFormatError: the piece is not JSON, or not a list of events.
        """
        if self.share is not None:
            index, self.next_piece = self.next_piece, self.next_piece + 1
            if index % self.share[1] != self.share[0]:
                return
            self.pieces.append(index)
            self.comm_before.append(self.n_comm)
            self._decode_share(piece)
            return
        if self.carry is not None:
            piece, self.carry = join(self.carry, piece), None
        try:
            events = _events(piece)
        except msgspec.ValidationError as exc:  # (no tolerant struct rejects an object: this is not one)
            if self.count == 0 and last:  # the whole document is this one list: what is it?
                raise TraceFormatError(path, not_a_trace(path, piece[0])) from None
            where = re.sub(r"`\$\[(\d+)\]([^`]*)`", lambda m: f"`$.traceEvents[{self.count + int(m.group(1))}]{m.group(2)}`", str(exc))
            raise TraceFormatError(path, f"unexpected trace content: {where}") from None
        except msgspec.DecodeError as exc:
            msg = str(exc)
            if "truncated" in msg and not last:
                self.carry = piece
                return
            if "truncated" in msg:
                raise TraceFormatError(path, f"truncated JSON ({msg})") from None
            msg = re.sub(r"\(byte (\d+)\)", lambda m: f"(byte {piece[1] - 1 + int(m.group(1)):,})", msg)
            raise TraceFormatError(path, f"not valid JSON ({msg})") from None
        self.parts.append(self._columns(events))

    def _decode_share(self, piece: Piece) -> None:
        """A piece of this builder's share: any piece that does not decode at once (not JSON, cut inside a string,
        not a list of events) raises :class:`Unsplittable`, and the trace is read again whole (:mod:`.shares`)."""
        try:
            events = _events(piece)
        except msgspec.DecodeError:  # (a ValidationError is one)
            raise Unsplittable from None
        self.parts.append(self._columns(events))

    def _columns(self, events: list[Any]) -> dict[str, np.ndarray]:
        """The columns of a piece's kept events."""
        if events and type(events[0]) is _AnyEvent:  # (tolerant: ph checked here)
            ph = Codes(ph_code, np.int8).column(events, "ph")
        else:
            ph = np.fromiter(map(_PH_OF_TYPE.__getitem__, map(type, events)), np.int8, len(events))
        sel = np.flatnonzero(ph)
        objs = list(compress(events, ph.tolist()))  # (C-level selection: no index list)
        cat = self.cats.column(objs, "cat")
        keep = np.flatnonzero(cat)
        if keep.size < len(objs):
            objs = list(compress(objs, cat.tolist()))
        n = len(objs)
        raws = list(map(_TS, objs))
        raws += map(_DUR, objs)  # every ts, then every dur
        times, status = parse_us(raws)
        ts, dur, ts_status, dur_status = times[:n], times[n:], status[:n], status[n:]
        self.count += len(events)  # (nothing is recorded before the times are read: a piece that gives way leaves no trace)
        args = np.fromiter(map(attrgetter("args"), objs), object, n)
        args[np.equal(args, _NONE)] = _NO_ARGS
        kcat = cat[keep]
        cols = _ids(args, kcat)
        cols["comm"] = self._collectives(args)
        cols["dma"] = np.zeros(n, np.int8)
        cols["wait_correlation"], cols["wait_stream"] = np.full(n, NO_ID, np.int64), np.full(n, NO_ID, np.int64)
        if (sync := np.flatnonzero(kcat == CAT_CODE["cuda_sync"])).size:
            cols["wait_correlation"][sync] = id_column(args[sync], "wait_correlation")
            cols["wait_stream"][sync] = id_column(args[sync], "wait_stream")
        cols["args"] = np.full(n, -1, np.int32)
        cols["seq"], cols["fwd_thread"] = np.full(n, NO_ID, np.int64), np.full(n, NO_ID, np.int64)
        if (ops := np.flatnonzero(kcat == CAT_CODE["cpu_op"])).size and (recorded := _recorded_rows(op_args := args[ops])).any():
            cols["seq"][ops], cols["fwd_thread"][ops] = id_column(op_args, "seq"), id_column(op_args, "fwd_thread")
            ops, op_args = ops[recorded], op_args[recorded]  # (an op without them: -1, in any piece)
            cols["args"][ops] = np.fromiter(map(self.op_args.__getitem__, map(_op_args_key, op_args)), np.int32, ops.size)
        if (mtia := np.flatnonzero(kcat == CAT_CODE["mtia_ccp_events"])).size:
            cols["dma"][mtia] = self.dma.column(list(args[mtia]), "direction")
        cols |= {
            "ph": ph[sel][keep],
            "cat": kcat,
            "name": self.names.column(objs, "name"),
            "pid": self.threads.column(objs, "pid"),
            "tid": self.threads.column(objs, "tid"),
            "ts": ts,
            "ts_status": ts_status,
            "dur": dur,
            "dur_status": dur_status,
        }
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

    def tables(self, path: str | Path, warnings: list[str]) -> dict[str, dict[str, np.ndarray]]:
        """Device and host columns of complete events (B/E pairs joined), times checked."""
        if not self.parts:
            self.parts.append(self._columns([]))
        parts, self.parts = self.parts, []
        cols = parts[0] if len(parts) == 1 else {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        del parts  # (the pieces' columns go once joined)
        out = {}
        cat, host_top = cols["cat"], N_DEVICE_KINDS + N_HOST_KINDS
        for what, in_table in (("device", (cat > 0) & (cat <= N_DEVICE_KINDS)), ("host", (cat > N_DEVICE_KINDS) & (cat <= host_top)),
                               ("python", cat == CAT_CODE["python_function"]), ("sync", cat == CAT_CODE["cuda_sync"]),
                               ("overhead", cat == CAT_CODE["overhead"])):
            complete, paired = np.flatnonzero(in_table & (cols["ph"] == 1)), np.flatnonzero(in_table & (cols["ph"] > 1))
            x = {k: v[complete] for k, v in cols.items()}  # (masks made once, not once per column)
            be = {k: v[paired] for k, v in cols.items()}
            missing_dur = int((x["dur_status"] == MISSING).sum())
            if missing_dur:
                warnings.append(f"{missing_dur} {what} complete event(s) without 'dur': taken as 0 ns long")
                x["dur_status"] = np.where(x["dur_status"] == MISSING, 0, x["dur_status"]).astype(np.int8)
            if what in ("python", "sync", "overhead"):  # (they only name host time or edges: one with unusable times is dropped)
                bad = bad_times(x)
                if bad.any():
                    warnings.append(f"{int(bad.sum())} {dict(python='python_function', sync='cuda_sync').get(what, what)} event(s) with "
                                    "missing, non-numeric, negative or absurd ts/dur dropped")
                    x = {k: v[~bad] for k, v in x.items()}
            else:
                check_times(path, x, what, self.names.values)
            if len(be["ts"]):
                check_times(path, be, what, self.names.values, with_dur=False)
                be = pair_begin_end(be, warnings)
                x = {k: np.concatenate([x[k], be[k]]) for k in x}
            x["end"] = x["ts"] + x["dur"]
            out[what] = x
        return out


def read_events(path: str | Path, max_bytes: int | None = None) -> Decoded:
    """Read and decode a trace file into device and host columns, streaming (module docstring).

    Args:
        path: the file (see :func:`.files.read_trace_chunks`).
        max_bytes: largest decompressed size accepted (default: :func:`.files.default_max_bytes`).

    Returns:
        a :class:`Decoded`, its columns described there.

    Raises:
        TraceFormatError: unreadable, too large, not JSON, not a Chrome trace,
            or events whose ``ts``/``dur`` are unusable.
    """
    builder = _Builder()
    head = stream_pieces(path, max_bytes, builder)
    if builder.carry is not None:
        raise TraceFormatError(path, "truncated JSON (the last event does not end)")
    return decoded(path, head, builder)


def decoded(path: str | Path, head: Head, builder: _Builder) -> Decoded:
    """The :class:`Decoded` of a builder that holds every piece's columns (the tables checked: :meth:`_Builder.tables`)."""
    warnings: list[str] = []
    tables = builder.tables(path, warnings)
    return Decoded(head, builder.count, tables, builder.names.values, builder.threads.values, builder.collectives(), warnings,
                   builder.op_args.values)


def stream_pieces(path: str | Path, max_bytes: int | None, builder: _Builder) -> Head:
    """Read the trace at ``path`` chunk by chunk, hand each piece of its event list to ``builder`` in order
    (:meth:`_Builder.add_piece`), and return its head.

    Raises:
        TraceFormatError: as :func:`read_events` says; with a share, also :class:`Unsplittable`.
    """
    splitter = Splitter(PIECE_BYTES)
    first = b""  # the file's first bytes, to name what it is
    try:
        with closing(read_trace_chunks(path, max_bytes)) as chunks:
            for chunk in chunks:
                first = first or chunk[:64]
                for piece in splitter.feed(chunk):
                    builder.add_piece(path, piece, last=False)
    except NotJSON:
        raise TraceFormatError(path, not_json(path, first, "it does not start with an object or a list")) from None
    if not splitter.started():
        raw = splitter.buf
        if not raw:
            raise TraceFormatError(path, "empty file")
        try:
            why = not_a_trace(path, raw)
        except msgspec.DecodeError as exc:
            msg = str(exc)
            why = f"truncated JSON ({msg})" if "truncated" in msg else not_json(path, bytes(raw[:64]), msg)
        raise TraceFormatError(path, why)
    end = splitter.finish()
    if end is None:
        raise TraceFormatError(path, "truncated JSON (the 'traceEvents' list or the document does not end)")
    head, pieces = end
    for k, piece in enumerate(pieces):
        builder.add_piece(path, piece, last=k == len(pieces) - 1)
    return head


def _recorded(values: tuple[Any, Any]) -> bool:
    """Whether a host op's ``Input Dims`` or ``flops`` (as decoded: JSON text, or a tolerant decode's value) was recorded."""
    return any(v is not None and (not isinstance(v, msgspec.Raw) or len(v) > 0) for v in values)


def _recorded_rows(args: np.ndarray) -> np.ndarray:
    """:func:`_recorded` of each host op's args struct (object array of structs -> bool array): a strict struct in one
    C-level pass (a field absent is the default ``b""`` object itself, a value present is never it; JSON ``null`` is
    ``b"null"``), a tolerant one (``None`` there) value by value."""
    if args.size and type(args[0]) is _Args:  # (a piece is strict or tolerant throughout)
        return np.fromiter(map(ne, map(_MARKS, args), repeat(_NO_MARKS)), bool, args.size)
    return np.fromiter(map(_recorded, map(_MARKS, args)), bool, args.size)


_CODES = np.arange(len(KINDS))
_DEVICE, _SYNC = (_CODES >= 1) & (_CODES <= N_DEVICE_KINDS), _CODES == CAT_CODE["cuda_sync"]
_HOST = (_CODES > N_DEVICE_KINDS) & (_CODES <= N_DEVICE_KINDS + N_HOST_KINDS)  # (as :meth:`_Builder.tables` files them)
_ID_READERS = ((_DEVICE | _SYNC, ("device", "stream")), (_DEVICE, ("bytes",)), (_DEVICE | _HOST | _SYNC, ("correlation",)),
               (_HOST, ("external_id",)))
"""Which tables read each id (by category code): device and stream the device and sync tables, bytes the device table,
correlation those and the host table, External id the host table (the collectives read theirs apart)."""


def _ids(args: np.ndarray, cat: np.ndarray) -> dict[str, np.ndarray]:
    """The :data:`~.columns.ID_COLUMNS` (int64) of the events' args structs (object array) of category codes ``cat``:
    each read only in the rows of the tables that use it (:data:`_ID_READERS`), :data:`~.columns.NO_ID` in the others."""
    n, cols = len(args), {}
    for cats, names in _ID_READERS:
        rows = np.flatnonzero(cats[cat])
        sub = args if rows.size == n else args[rows]
        for k in names:
            if rows.size == n:
                cols[k] = id_column(args, k)
            else:
                cols[k] = np.full(n, NO_ID, np.int64)
                cols[k][rows] = id_column(sub, k)
    return {k: cols[k] for k in ID_COLUMNS}


def _op_args_key(args: Any) -> tuple[bytes, ...]:
    """A host op's :data:`.events.OP_ARGS` as a hashable tuple of JSON texts (a tolerant decode's values encoded back)."""
    return tuple(bytes(v) if isinstance(v, msgspec.Raw) else msgspec.json.encode(v) for v in _OP_ARGS_OF(args))
