"""Decoding the traces analysed in this process in a forked process, ahead of their analysis.

``overlap-report`` on one trace, or with ``--jobs 1``, analyses in this process.
Two of its longest stages need nothing of each other until the end: decoding the
file (numpy and msgspec only, :func:`~traceprobe.reading.decode.read_events`) and
importing pandas and the analysis (0.5-0.8 s on 2 CPUs, more than the decoding of
HTA's 216k-event test trace). A :class:`ReadAhead` is started before those
imports: a process forked for it decodes the files, in order, while this one
imports, then analyses what it was sent. On 2 CPUs that takes the whole command
on HTA's 216k-event trace from 1.82 s to about 1.3 s (``scripts/bench.py``, see
``docs/performance.md``).

The decoded columns come back through a pipe without a pickled copy of their
data: pickle protocol 5 hands each array's buffer over on its own, received into
an array allocated for it. The forked process holds at most one decoded trace
beside the one analysed here (it waits until that one is taken), and ends when
this process dies, however it dies (:func:`.execution.die_with_parent`). Should it
die (out of memory, killed), or a file be asked out of turn, the file is decoded
in this process, as it would be without a read-ahead; an error decoding a file is
raised here, as :func:`read_events` raises it.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
from collections import deque
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..reading.decode import read_events  # (numpy and msgspec imported before the fork, not in each process)
from .execution import die_with_parent

if TYPE_CHECKING:
    from ..reading.decode import Decoded


def _send(conn: Connection, obj: Any) -> None:
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    conn.send((head, [r.nbytes for r in raws]))
    for r in raws:
        conn.send_bytes(r)


def _receive(conn: Connection) -> Any:
    head, sizes = conn.recv()
    buffers = [np.empty(n, np.uint8) for n in sizes]
    for b in buffers:
        conn.recv_bytes_into(b)
    return pickle.loads(head, buffers=buffers)


def _decode_each(paths: list[Path], max_bytes: int | None, conn: Connection, parent: int) -> None:
    """The forked process: send ``(True, Decoded)`` or ``(False, exception)`` for each path, in order."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    for p in paths:
        try:
            msg: tuple[bool, Any] = (True, read_events(p, max_bytes))
        except BaseException as exc:  # noqa: BLE001 - raised in the parent, where the file is reported
            msg = (False, exc)
        try:
            _send(conn, msg)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:  # an exception that does not pickle
            _send(conn, (False, RuntimeError(f"{type(exc).__name__}: {exc}")))
        except OSError:  # the parent closed its end: nothing more is wanted
            return
        del msg


class ReadAhead:
    """Decodes ``paths`` (local trace files), in order, in a process forked for it (module docstring).

    Args:
        paths: the files this process will load, in the order it will load them.
        max_bytes: :func:`~traceprobe.reading.decode.read_events`'s limit on the decompressed size.
    """

    def __init__(self, paths: Sequence[Path], max_bytes: int | None) -> None:
        ctx = multiprocessing.get_context("fork")
        self._conn, child = ctx.Pipe(duplex=False)
        self._next = deque(paths)
        self._max_bytes = max_bytes
        self._process = ctx.Process(target=_decode_each, args=(list(paths), max_bytes, child, os.getpid()), daemon=True)
        self._process.start()
        child.close()  # so that this end reads EOF if the process dies

    @staticmethod
    def available() -> bool:
        """Whether processes can be forked here (not on Windows)."""
        return "fork" in multiprocessing.get_all_start_methods()

    def read(self, path: str | Path, max_bytes: int | None = None) -> Decoded:
        """``read_events(path, max_bytes)``: the forked process's decoding where ``path`` is the next of its files.

        Raises:
            TraceFormatError: and whatever else :func:`read_events` raises, as it raises it.
        """
        if self._next and self._next[0] == path and max_bytes == self._max_bytes:
            self._next.popleft()
            try:
                ok, value = _receive(self._conn)
            except (EOFError, OSError):  # it died: this file and the rest are decoded here
                self.close()
            else:
                if ok:
                    return value
                raise value
        else:
            self.close()
        return read_events(path, max_bytes)

    def close(self) -> None:
        """Stop the forked process (at once if it is still decoding) and release the pipe."""
        self._next.clear()
        if self._process.is_alive():
            self._process.kill()
        self._process.join()
        self._conn.close()
