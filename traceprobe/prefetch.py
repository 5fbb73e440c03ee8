"""Decoding one trace in a child process while this one imports the analysis.

Reading a trace (inflate, decode, columns: :func:`traceprobe.kineto.read_events`)
needs only numpy and msgspec; the analysis needs pandas, whose import alone takes
about as long as decoding a 200k-event trace. When a command analyses a single
trace in its own process, :func:`start` forks a child that reads and decodes the
file while the parent goes on importing pandas and the analysis; the parent then
takes the decoded columns with :meth:`Pending.result`. On a machine with two or
more cores the two overlap, so the command ends sooner by the shorter of the two
(measured in ``scripts/bench.py``); the CPU time spent is the same plus the
transfer.

The columns come back through a pipe as a pickle (protocol 5) whose numpy
buffers are sent out of band: each array's memory is written once and read
straight into the parent's buffer. Errors come back as they were raised
(:class:`~traceprobe.errors.TraceFormatError` with its message); a child that
dies (the OOM killer, a crash) is reported by :meth:`Pending.result` as a
``TraceFormatError`` naming how it died. The child is always waited for, so its
CPU time and peak memory count in this process's ``wait4``/``getrusage``
figures.

:func:`worthwhile` says when to use it: fork is available, pandas is not imported
yet (otherwise there is nothing to overlap) and ``TRACEPROBE_PREFETCH`` is not
``0``.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import sys
from pathlib import Path
from typing import Any

from .errors import TraceFormatError

ENV = "TRACEPROBE_PREFETCH"
"""Environment variable: ``0`` turns the child-process decode off."""

_HEADER = struct.Struct("<Q")


def worthwhile() -> bool:
    """Whether :func:`start` can save time here: fork exists, ``pandas`` is not imported yet, and
    :data:`ENV` is not ``0``."""
    return hasattr(os, "fork") and "pandas" not in sys.modules and os.environ.get(ENV, "1") != "0"


class Pending:
    """A trace being read by a child process; :meth:`result` waits for it."""

    def __init__(self, path: str | Path, pid: int, fd: int) -> None:
        self.path, self.pid, self.fd = path, pid, fd
        self._done = False

    def result(self) -> Any:
        """The :class:`~traceprobe.kineto.Decoded` columns of the trace.

        Raises:
            Exception: what reading the file raised in the child, as it was
                raised (:func:`traceprobe.trace.load_trace` turns it into its
                ``TraceFormatError`` as it does in-process).
            TraceFormatError: the child died.
        """
        if self._done:
            raise RuntimeError("Pending.result() called twice")
        self._done = True
        try:
            with os.fdopen(self.fd, "rb") as f:
                status, value = _receive(f)
        except (EOFError, OSError, pickle.UnpicklingError, struct.error):
            status, value = "died", None
        finally:
            code = self._reap()
        if status == "ok":
            return value
        if status == "raise":
            raise value
        raise TraceFormatError(self.path, f"the process decoding it died ({_how(code)})")

    def cancel(self) -> None:
        """Stop the child (Ctrl-C, or the result is no longer needed)."""
        if not self._done:
            self._done = True
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                os.close(self.fd)
            except OSError:
                pass
            self._reap()

    def _reap(self) -> int | None:
        try:
            return os.waitpid(self.pid, 0)[1]
        except ChildProcessError:
            return None


def start(path: str | Path, max_bytes: int | None = None) -> Pending:
    """Fork a child that runs :func:`traceprobe.kineto.read_events` on ``path`` and sends the result back.

    Args:
        path: a local trace file or an fsspec URL.
        max_bytes: :func:`~traceprobe.kineto.read_events`'s limit on the decompressed size.

    Raises:
        OSError: the pipe or the fork could not be made (the caller decodes in-process).
    """
    from . import kineto  # numpy and msgspec only: imported before the fork, shared by both

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: decode, send, leave without running the parent's exit handlers
        code = 0
        try:
            os.close(r)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            try:
                msg: tuple[str, Any] = ("ok", kineto.read_events(path, max_bytes))
            except Exception as exc:  # noqa: BLE001 - raised again in the parent, where load_trace names it
                msg = ("raise", exc)
            with os.fdopen(w, "wb") as f:
                try:
                    _send(f, msg)  # (pickled whole before the first write)
                except (pickle.PicklingError, TypeError, AttributeError) as exc:
                    _send(f, ("raise", TraceFormatError(path, f"unreadable trace ({type(exc).__name__}: {exc})")))
        except BaseException:  # noqa: BLE001 - the parent sees EOF and reports the death
            code = 70
        finally:
            os._exit(code)
    os.close(w)
    return Pending(path, pid, r)


def _send(f: Any, obj: Any) -> None:
    buffers: list[pickle.PickleBuffer] = []
    body = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    meta = pickle.dumps((len(body), [m.nbytes for m in raws]), protocol=5)
    f.write(_HEADER.pack(len(meta)))
    f.write(meta)
    f.write(body)
    for m in raws:
        f.write(m)


def _read_exactly(f: Any, n: int) -> bytearray:
    out = bytearray(n)
    view, got = memoryview(out), 0
    while got < n:
        k = f.readinto(view[got:])
        if not k:
            raise EOFError
        got += k
    return out


def _receive(f: Any) -> Any:
    (n,) = _HEADER.unpack(_read_exactly(f, _HEADER.size))
    body_len, sizes = pickle.loads(_read_exactly(f, n))
    body = _read_exactly(f, body_len)
    return pickle.loads(body, buffers=[_read_exactly(f, s) for s in sizes])


def _how(status: int | None) -> str:
    if status is None:
        return "exit status unknown"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"killed by {name}" + (": out of memory?" if sig == signal.SIGKILL else "")
    return f"exit code {os.WEXITSTATUS(status)}"
