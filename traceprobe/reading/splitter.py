"""Cutting a trace's JSON, as it arrives in chunks, into its head and pieces of its event list.

:class:`Splitter` keeps only what it has not handed on: the text before the event list
(``{"schemaVersion": ..., "traceEvents": [``; nothing for Chrome's bare "JSON Array
Format") and the events not yet cut. Once more than ``piece_bytes`` (plus a quarter,
held back) are buffered, a piece is cut at the first event boundary (``}`` ``,`` ``{``)
after ``piece_bytes``. At the end the list closes at the first ``}]`` that leaves a
valid :class:`Head` when the text before the list, ``"traceEvents": []`` and the text
after that ``]`` (Kineto writes ``deviceProperties`` there) are decoded together.

Cutting is lexical: a boundary inside a string (an event named ``a},{b``) is cut at
wrongly, the piece's decode fails as truncated, and the caller joins it to the next
(:func:`join`). White space over 64 bytes inside a boundary is not cut at (the piece
grows), and around ``"traceEvents":`` leaves the layout unrecognised; each search
looks only at new bytes, however long a run without a boundary.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec


class Head(msgspec.Struct):
    """Top-level fields of a trace (the ones kept in ``Trace.metadata``)."""

    schemaVersion: Any = None
    deviceProperties: list[dict[str, Any]] | None = None
    distributedInfo: dict[str, Any] | None = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    cupti_version: Any = None
    hip_runtime_version: Any = None
    roctracer_version: Any = None
    trace_id: Any = None
    displayTimeUnit: Any = None
    baseTimeNanoseconds: Any = None
    traceName: Any = None


class _HeadOnly(Head):
    traceEvents: list[msgspec.Raw] = []


HEAD_FIELDS = tuple(f for f in Head.__struct_fields__ if f != "deviceProperties")
"""Top-level fields copied into ``Trace.metadata`` when present."""

_HEAD = msgspec.json.Decoder(_HeadOnly)
_TRACE_EVENTS = re.compile(rb'"traceEvents"\s{0,64}:\s{0,64}\[')
_CUT = re.compile(rb"\}\s{0,64},\s{0,64}\{")
_LIST_END = re.compile(rb"\}[ \t\r\n]*\]")  # (one pass at the end: unbounded white space is linear)
_LONGEST = 160  # longer than any match of the two patterns above
_SPACE = re.compile(rb"[ \t\n\r]*")


def skip_space(raw: Any, pos: int, end: int) -> int:
    """Position of the first non-white-space byte of ``raw[pos:end]`` (``end`` if none)."""
    m = _SPACE.match(raw, pos, end)
    return m.end() if m else pos


class NotJSON(ValueError):
    """The document starts with something other than an object or a list."""


Piece = tuple[bytes, int, bytes]
"""One piece: ``[`` + whole events + ``]``; the document offset of its first event; the text between its
last event and the next piece's first (``,`` and white space; empty for the last piece)."""


def join(first: Piece, second: Piece) -> Piece:
    """Two consecutive pieces as one, with the document's own bytes between them."""
    return b"".join((first[0][:-1], first[2], second[0][1:])), first[1], second[2]


class Splitter:
    """The head and the pieces of a trace's ``traceEvents`` list, from its JSON fed in chunks.

    ``feed`` returns the pieces ready so far, ``finish`` the head and the last
    pieces, or None where the layout is not recognised. A piece is a JSON list
    of whole events (if the cuts were right, see the module's notes).
    """

    def __init__(self, piece_bytes: int) -> None:
        self.piece_bytes = piece_bytes
        self.dropped = 0  # document bytes dropped from the front of the buffer
        self.buf: bytearray | memoryview = bytearray()  # (a view of the first chunk until a second one comes: no copy)
        self.before: bytes | None = None  # the text before the list; None until the list is found
        self.bare = False  # the JSON Array Format
        self.resume = 0  # where the next search starts: no match starts before it

    def feed(self, chunk: bytes) -> list[Piece]:
        """Take the next chunk; the pieces it completes."""
        if not self.buf:  # (nothing held: the chunk itself is the buffer, not a copy of it)
            self.buf = memoryview(chunk)
        else:
            if isinstance(self.buf, memoryview):
                self.buf = bytearray(self.buf)
            self.buf += chunk
        if self.before is None and not self._find_list():
            return []
        # the last quarter piece is held back: head fields after the list, up to that long, are never cut into
        pieces, start = self._cut(len(self.buf) - self.piece_bytes // 4)
        self._drop(start)
        self.resume = max(0, self.resume - start)
        return pieces

    def started(self) -> bool:
        """Whether the event list was found (else the buffer holds the whole document read so far)."""
        return self.before is not None

    def finish(self) -> tuple[Head, list[Piece]] | None:
        """At the end of the stream: the head fields and the last pieces; None for an unknown layout."""
        if self.before is None and not self._find_list():
            return None
        buf = self.buf
        if self.bare:
            close = (buf.tobytes() if isinstance(buf, memoryview) else buf).rfind(b"]")
            if close < 0 or skip_space(buf, close + 1, len(buf)) != len(buf):
                return None
            head: Head = Head()
        else:
            close, head_only = -1, None
            ends = [m.end() - 1 for m in _LIST_END.finditer(buf)]  # the list ends with an event's } and its ]
            if buf[(first := skip_space(buf, 0, len(buf))) : first + 1] == b"]":  # or is empty
                ends.insert(0, first)
            for close in ends:  # the first that leaves a valid head: after it, only head fields (a later one,
                try:  # deviceProperties' own, would leave a valid head too; an earlier one, inside an event, never)
                    head_only = _HEAD.decode(b"".join((self.before or b"", b'"traceEvents": []', buf[close + 1 :])))
                    break
                except msgspec.DecodeError:
                    head_only = None
            if head_only is None or head_only.traceEvents:
                return None
            head = head_only
        pieces, start = self._cut(close)
        if skip_space(buf, start, close) < close:
            pieces.append((b"".join((b"[", buf[start:close], b"]")), self.dropped + start, b""))
        self.buf = bytearray()
        return head, pieces

    def _drop(self, n: int) -> None:
        if isinstance(self.buf, memoryview):
            self.buf = self.buf[n:]
        else:
            del self.buf[:n]
        self.dropped += n

    def _find_list(self) -> bool:
        """Whether the event list's start is found; if so the buffer starts after its ``[``."""
        self._drop(skip_space(self.buf, 0, len(self.buf)))  # white space before the document does not count
        buf = self.buf
        if not buf:
            return False
        if buf[0] not in b"{[":
            raise NotJSON  # said at once, not once the whole file is buffered
        if buf[0] == ord("["):
            self.before, self.bare, start = b"", True, 1
        else:
            m = _TRACE_EVENTS.search(buf, self.resume)
            if m is None:
                self.resume = max(0, len(buf) - _LONGEST)
                return False
            self.before, start = bytes(buf[: m.start()]), m.end()
        self._drop(start)
        self.resume = 0
        return True

    def _cut(self, end: int) -> tuple[list[Piece], int]:
        """Pieces of ``buf[:end]``, each cut at the first event boundary after ``piece_bytes``,
        and where the rest starts."""
        pieces: list[Piece] = []
        start = 0
        with memoryview(self.buf) as view:
            while end - start > self.piece_bytes:
                cut = _CUT.search(self.buf, max(start + self.piece_bytes, self.resume), end)
                if cut is None:
                    self.resume = max(self.resume, end - _LONGEST)
                    break
                pieces.append((b"".join((b"[", view[start : cut.start() + 1], b"]")), self.dropped + start,
                               bytes(view[cut.start() + 1 : cut.end() - 1])))
                start = cut.end() - 1
        return pieces, start
