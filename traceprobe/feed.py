"""Pieces of one trace handed from the process that reads it to the processes that only decode.

When several processes decode one trace (:mod:`traceprobe.prefetch`), only the
first reads the file: it inflates it and cuts its event list into pieces
(:class:`traceprobe.splitter.Splitter`), and offers each piece to the others
(:meth:`Feed.offer`) through shared memory made before the fork: a ring of
``slots`` slots of ``slot_bytes`` each (an anonymous shared ``mmap``) and two
pipes, one of free slot numbers, one of ``(piece, slot, length)`` records.
A piece is handed on only if a slot is free at once; otherwise, or if it does
not fit a slot, the reader decodes it itself. So when the others are busy the
reader decodes more, and when they wait it decodes less: the work balances
itself, and no process ever waits on another for more than one piece. Once the
file is read the reader closes the record pipe and takes what is still queued
(:meth:`Feed.take`) beside the others, which stop at the pipe's end.

Records are 24 bytes and slot numbers 4: every write is whole (below
``PIPE_BUF``), every read takes exactly one record (a pipe is read under its
lock), so no piece is taken twice. Neither pipe can fill: the free-slot pipe
holds at most ``slots`` numbers, the record pipe at most ``slots`` records.
A decoder copies its piece out of the ring and frees the slot before decoding
it (the structs may keep views of the text they were decoded from).

Instead of every decoding process inflating the whole file (about 128 ms of
CPU per process for 10^6 events), the reader copies the others' pieces into
the ring and they copy them out (about 15 ms each way).
"""

from __future__ import annotations

import mmap
import os
import struct

_RECORD = struct.Struct("<qqq")  # piece number, slot, length
_SLOT = struct.Struct("<i")


class Feed:
    """The shared ring and pipes of one trace's decoding processes; made in the parent before it forks them.

    After the fork, the reader calls :meth:`as_reader`, the others :meth:`as_decoder`,
    and the parent :meth:`close` (each closes the pipe ends it does not use, so that
    the decoders see the record pipe end when the reader closes it, or dies).
    """

    def __init__(self, slots: int, slot_bytes: int) -> None:
        """``slots`` slots of ``slot_bytes`` each.

        Raises:
            OSError: no shared memory or pipe could be made (the pipes made are closed).
        """
        self.slots, self.slot_bytes = slots, slot_bytes
        self.fds: list[int] = []
        try:
            self.ring = mmap.mmap(-1, slots * slot_bytes)  # (anonymous: shared with the children forked after it)
            self.free_r, self.free_w = self._pipe()
            self.work_r, self.work_w = self._pipe()
            os.write(self.free_w, struct.pack(f"<{slots}i", *range(slots)))
            os.set_blocking(self.free_r, False)
        except OSError:
            self.close()
            raise
        self.reading = False

    def _pipe(self) -> tuple[int, int]:
        r, w = os.pipe()
        self.fds += [r, w]
        return r, w

    def _keep(self, *fds: int) -> None:
        for fd in self.fds:
            if fd not in fds:
                os.close(fd)
        self.fds = list(fds)

    def as_reader(self) -> None:
        """In the reading process: it offers pieces, then takes what is left."""
        self._keep(self.free_r, self.work_r, self.work_w)
        self.reading = True

    def as_decoder(self) -> None:
        """In a decoding process: it takes pieces and frees their slots."""
        self._keep(self.work_r, self.free_w)

    def close(self) -> None:
        """Close every pipe end and the ring held here (the parent, once the children are forked)."""
        self._keep()
        ring = getattr(self, "ring", None)
        if ring is not None:
            ring.close()

    def offer(self, k: int, piece: bytes) -> bool:
        """Hand piece ``k`` to a decoding process, if a slot is free now and it fits; whether it was."""
        if len(piece) > self.slot_bytes:
            return False
        try:
            free = os.read(self.free_r, _SLOT.size)
        except BlockingIOError:
            return False
        if len(free) != _SLOT.size:  # (every decoder has exited)
            return False
        (slot,) = _SLOT.unpack(free)
        at = slot * self.slot_bytes
        self.ring[at : at + len(piece)] = piece
        os.write(self.work_w, _RECORD.pack(k, slot, len(piece)))
        return True

    def end(self) -> None:
        """In the reader: no more pieces; the decoders stop once the queued ones are taken."""
        os.close(self.work_w)
        self.fds.remove(self.work_w)

    def take(self) -> tuple[int, bytes] | None:
        """The next queued piece ``(k, JSON)``, its slot freed; None at the end (the reader ended, or died).

        Raises:
            OSError: a record came in part (never for whole writes below ``PIPE_BUF``).
        """
        record = os.read(self.work_r, _RECORD.size)
        if not record:
            return None
        if len(record) != _RECORD.size:
            raise OSError(f"a record of {len(record)} bytes, not {_RECORD.size}")
        k, slot, n = _RECORD.unpack(record)
        at = slot * self.slot_bytes
        piece = self.ring[at : at + n]
        if not self.reading:  # (the reader offers no more: its slots need not come back)
            try:
                os.write(self.free_w, _SLOT.pack(slot))
            except BrokenPipeError:  # the reader took the last piece and ended: it needs no slot back
                pass
        return k, piece
