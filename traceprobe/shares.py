"""Reading a trace in shares: the pieces of its event list decoded by n processes, then merged.

:func:`decode_share` streams the whole file (read or inflated in chunks,
:func:`traceprobe.tracefile.read_trace_chunks`), cuts its event list into pieces
(:class:`traceprobe.splitter.Splitter`) and decodes the pieces of its share into
columns (:mod:`traceprobe.kineto`'s builder): every n-th piece, or, with a
:class:`traceprobe.feed.Feed`, the pieces the reading process keeps while it hands
the others to processes that only decode. :func:`merge_shares` puts the pieces of
all shares back in file order. One share of one is the whole trace:
:func:`traceprobe.kineto.read_events` is ``merge_shares([decode_share()])``; several
are decoded by :mod:`traceprobe.prefetch`'s child processes. Where the strict decode
of a piece fails, or the layout is not recognised, the trace is read again and
decoded whole with tolerant types (the messages users see for broken files).
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from . import kineto
from .splitter import Head, Splitter
from .tracefile import read_trace_bytes, read_trace_chunks

if TYPE_CHECKING:  # (made and passed in by traceprobe.prefetch)
    from .feed import Feed


@dataclass
class Share:
    """The columns of one share of a trace's event pieces (:func:`decode_share`), to be merged.

    Attributes:
        head: the top-level fields (every share reads them).
        pieces: the number of each piece decoded (0-based, in file order).
        columns: the columns of those pieces end to end (``name``, ``pid``, ``tid``
            codes into ``names``/``threads``; ``comm`` rows of ``collectives``): a
            few contiguous arrays, which a pipe carries out of band (one per piece
            and column, some strided, cost HTA's 216k-event trace 18 against 15 ms).
        rows: the rows of each piece in ``columns``.
        collectives: the collective args of this share's events.
        names, threads: this share's distinct values, by code.
        event_count: events in this share's pieces (kept or not).
        total_pieces, json_bytes: of the whole trace as this share read it; the
            shares of one trace must agree (a file replaced while its shares
            were read does not).
        fed: the share of a process that did not read the file but took its
            pieces from the one that did (:mod:`traceprobe.feed`): its ``head``,
            ``total_pieces`` and ``json_bytes`` are not the trace's.
    """

    head: Head
    pieces: list[int]
    columns: dict[str, np.ndarray]
    rows: list[int]
    collectives: dict[str, np.ndarray]
    names: list[Any]
    threads: list[Any]
    event_count: int
    total_pieces: int = 0
    json_bytes: int = 0
    fed: bool = False


def decode_share(path: str | Path, max_bytes: int | None = None, index: int = 0, count: int = 1,
                 piece_bytes: int | None = None, feed: Feed | None = None) -> Share | None:
    """Decode this process's share of the pieces of the trace's event list.

    Without ``feed``, every share reads (inflates) and cuts the whole file, the
    same way, and decodes every ``count``-th piece from piece ``index`` on, so
    the shares of ``count`` processes together hold each piece exactly once;
    ``count=1`` is the whole trace. With ``feed`` (:mod:`traceprobe.feed`), share
    0 alone reads the file and hands pieces to the others as they are free to
    take them; each share decodes the pieces it was handed, or kept. Merged by
    :func:`merge_shares`.

    Args:
        path, max_bytes: as :func:`traceprobe.kineto.read_events`.
        index, count: this share, of how many.
        piece_bytes: size of a piece (default :data:`traceprobe.kineto.PIECE_BYTES`).
        feed: shared by the ``count`` processes, made before they were forked.

    Returns:
        the :class:`Share`, or None where the strict decode fails or the layout
        is not recognised (:func:`merge_shares` then decodes the whole trace).

    Raises:
        TraceFormatError: the file is unreadable, too large, or corrupt gzip (share 0 with ``feed``).
    """
    if feed is not None and index > 0:
        return _decode_fed(feed)
    builder = kineto._Builder()
    splitter = Splitter(piece_bytes or kineto.PIECE_BYTES, None if count == 1 or feed is not None else lambda k: k % count == index)
    mine: list[int] = []
    json_bytes = 0

    def take(pieces: list[bytes | None]) -> None:
        # (the splitter has counted them: their numbers end at its count; without a feed it copies out only this share's)
        for k, piece in enumerate(pieces, splitter.cut_count - len(pieces)):
            if piece is not None and not (feed is not None and feed.offer(k, piece)):
                builder.add_piece(piece)
                mine.append(k)

    try:
        try:
            with closing(read_trace_chunks(path, max_bytes)) as chunks:
                for chunk in chunks:
                    json_bytes += len(chunk)
                    take(splitter.feed(chunk))
            end = splitter.finish()
            if end is None:
                return None
            take(end[1])
        finally:
            if feed is not None:
                feed.end()
        while feed is not None and (handed := feed.take()) is not None:  # what the others have not taken yet
            builder.add_piece(handed[1])
            mine.append(handed[0])
    except msgspec.MsgspecError:
        return None
    return Share(end[0], mine, *builder.joined(), builder.collectives(), builder.names.values, builder.threads.values, builder.count,
                 splitter.cut_count, json_bytes)


def _decode_fed(feed: Feed) -> Share | None:
    """The share of a process that takes its pieces from ``feed`` until the reader ends it; None where one
    does not decode strictly (the rest are then taken and dropped: the trace is decoded whole anyway, by
    :func:`merge_shares`, and the other processes end sooner)."""
    builder = kineto._Builder()
    mine: list[int] = []
    failed = False
    while (handed := feed.take()) is not None:
        if not failed:
            try:
                builder.add_piece(handed[1])
                mine.append(handed[0])
            except msgspec.MsgspecError:
                failed = True
    if failed:
        return None
    return Share(Head(), mine, *builder.joined(), builder.collectives(), builder.names.values, builder.threads.values, builder.count,
                 fed=True)


def merge_shares(path: str | Path, shares: list[Share | None], max_bytes: int | None = None) -> kineto.Decoded:
    """The :class:`Decoded` trace from all the shares of :func:`decode_share` (any order).

    Pieces are put back in file order; name and thread codes are renumbered into
    one table; collective rows are renumbered. If any share is None, or the
    shares disagree on the trace's size or do not hold every piece exactly once
    (the file was replaced while they read it), the whole trace is read again
    here and decoded at once with tolerant types (the messages users see for
    broken files).

    Raises:
        TraceFormatError: as :func:`traceprobe.kineto.read_events`.
    """
    whole = [s for s in shares if s is not None]
    if not shares or len(whole) < len(shares) or not _consistent(whole):
        builder = kineto._Builder()
        doc = kineto._decode_whole(path, read_trace_bytes(path, max_bytes))
        head: Head = doc
        events, doc.traceEvents = doc.traceEvents, []
        builder.add(events)
        del events
    elif len(whole) == 1:  # nothing to renumber
        one = whole[0]
        builder, head = kineto._Builder(), one.head
        builder.parts, builder.comm_parts, builder.count = [one.columns], [one.collectives], one.event_count
        builder.names.values, builder.threads.values = one.names, one.threads
    else:
        builder, head = _merged(whole)
    warnings: list[str] = []
    tables = builder.tables(path, warnings)
    return kineto.Decoded(head, builder.count, tables, builder.names.values, builder.threads.values, builder.collectives(), warnings)


def _consistent(shares: list[Share]) -> bool:
    """Whether the shares that read the file read the same bytes, and all together hold every piece exactly once."""
    read = {(s.total_pieces, s.json_bytes) for s in shares if not s.fed}
    if len(read) != 1:
        return False
    return sorted(k for s in shares for k in s.pieces) == list(range(read.pop()[0]))


def _merged(shares: list[Share]) -> tuple[kineto._Builder, Head]:
    """One builder holding every share's pieces in file order, codes renumbered."""
    builder = kineto._Builder()
    placed: list[tuple[int, dict[str, np.ndarray]]] = []
    n_comm = 0
    for s in shares:
        name_lut = builder.names.code(s.names)
        thread_lut = builder.threads.code(s.threads)
        ends = np.cumsum(s.rows).tolist()
        for k, lo, hi in zip(s.pieces, [0, *ends], ends):
            part = {c: v[lo:hi] for c, v in s.columns.items()}
            placed.append((k, part | {"name": name_lut[part["name"]], "pid": thread_lut[part["pid"]], "tid": thread_lut[part["tid"]],
                                      "comm": np.where(part["comm"] >= 0, part["comm"] + n_comm, -1)}))
        builder.comm_parts.append(s.collectives)
        n_comm += len(s.collectives["collective"])
        builder.count += s.event_count
    placed.sort(key=lambda kp: kp[0])
    builder.parts = [part for _, part in placed]
    return builder, next(s.head for s in shares if not s.fed)
