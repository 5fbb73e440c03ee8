"""Decoding one trace in child processes while this one imports the analysis.

Reading a trace (inflate, decode, columns: :func:`traceprobe.kineto.read_events`)
needs only numpy and msgspec; the analysis needs pandas, whose import alone takes
about as long as decoding a 200k-event trace. When a command analyses a single
trace in its own process, :func:`start` forks children that read and decode the
file while the parent goes on importing pandas and the analysis; the parent then
takes the decoded columns with :meth:`Pending.result`.

A large trace is shared out (:func:`decoders`: one process per
:data:`SHARE_BYTES` of JSON, at most one per CPU and :data:`MAX_DECODERS`): the
first child reads, inflates and cuts the file, and hands pieces of the event list
to the others through shared memory whenever one is free to take one, decoding
the rest itself (:mod:`traceprobe.feed`, :func:`traceprobe.shares.decode_share`);
the parent puts the pieces back in file order
(:func:`traceprobe.shares.merge_shares`). The columns are the ones a single
process reads (tested on every sample trace). On a machine with two or more
cores the command ends sooner (measured in ``scripts/bench.py``); the CPU time
spent grows by the pieces' copies and the transfer.

The columns come back through a pipe as a pickle (protocol 5) whose numpy
buffers are sent out of band: each array's memory is written once and read
straight into the parent's buffer. Errors come back as they were raised
(:class:`~traceprobe.errors.TraceFormatError` with its message); a child that
dies (the OOM killer, a crash) is reported by :meth:`Pending.result` as a
``TraceFormatError`` naming how it died. Children are always waited for (one
that sent its share by :meth:`Pending.cancel`, which the caller runs once the
analysis is done, so that the kernel frees its memory meanwhile), so
their CPU time and peak memory count in this process's ``wait4``/``getrusage``
figures (peak memory as the largest of the processes, not their sum).

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
from typing import TYPE_CHECKING, Any

from .errors import TraceFormatError

if TYPE_CHECKING:
    from .feed import Feed

ENV = "TRACEPROBE_PREFETCH"
"""Environment variable: ``0`` turns the child-process decode off."""
DECODERS_ENV = "TRACEPROBE_DECODERS"
"""Environment variable: the number of decoding processes, instead of :func:`decoders`' choice."""

_HEADER = struct.Struct("<Q")


def worthwhile() -> bool:
    """Whether :func:`start` can save time here: fork exists, ``pandas`` is not imported yet, and
    :data:`ENV` is not ``0``."""
    return hasattr(os, "fork") and "pandas" not in sys.modules and os.environ.get(ENV, "1") != "0"


class Pending:
    """A trace being decoded by child processes, one share each; :meth:`result` waits for them."""

    def __init__(self, path: str | Path, max_bytes: int | None, children: list[tuple[int, int]]) -> None:
        self.path, self.max_bytes, self.children = path, max_bytes, children
        self.exiting: list[int] = []  # children that sent their share: reaped by cancel(), not waited for here
        self._done = False

    def result(self) -> Any:
        """The :class:`~traceprobe.kineto.Decoded` columns of the trace, the shares merged
        (:func:`traceprobe.shares.merge_shares`, which decodes the whole trace here when a
        share could not be decoded strictly).

        Raises:
            Exception: what reading the file raised in a child, as it was raised
                (:func:`traceprobe.trace.load_trace` turns it into its
                ``TraceFormatError`` as it does in-process).
            TraceFormatError: a child died.
        """
        from .shares import merge_shares

        if self._done:
            raise RuntimeError("Pending.result() called twice")
        self._done = True
        received: list[Any] = []  # each child's Share (None: it could not decode strictly)
        died = None
        try:
            while self.children:
                pid, fd = self.children.pop(0)
                status: str
                value: Any
                try:
                    with os.fdopen(fd, "rb") as f:
                        status, value = _receive(f)
                except (EOFError, OSError, pickle.UnpicklingError, struct.error):
                    status, value = "died", None
                if status == "ok":  # its address space is torn down while this process goes on
                    self.exiting.append(pid)
                else:
                    how = _reap(pid)  # it has closed its end (sent all, or died): it is exiting, not killed here
                    if status == "raise":
                        raise value
                    died = died or _how(how)
                received.append(value)
        finally:
            self._stop()
        if died:
            raise TraceFormatError(self.path, f"a process decoding it died ({died})")
        return merge_shares(self.path, received, self.max_bytes)

    def cancel(self) -> None:
        """Stop the children (Ctrl-C, an error, or the result is no longer needed), and wait for those
        that sent their share and are exiting. Call it once the result is used (it always must be)."""
        if not self._done:
            self._done = True
            self._stop()
        while self.exiting:
            _reap(self.exiting.pop())

    def _stop(self) -> None:
        for pid, fd in self.children:
            try:
                os.close(fd)
            except OSError:
                pass
            _reap(pid, kill=True)
        self.children = []


def _reap(pid: int, kill: bool = False) -> int | None:
    """Wait for a child (killed first if ``kill`` and still running); its wait status, None if already reaped."""
    try:
        if kill:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            os.kill(pid, signal.SIGKILL)
        return os.waitpid(pid, 0)[1]
    except (ChildProcessError, ProcessLookupError):
        return None


SHARE_BYTES = 64 << 20
"""Decompressed JSON per decoding process: a trace gets one process per this many bytes, at most one per CPU.
About what one process decodes while the command imports pandas and the analysis, so that on 2 CPUs a
trace under it is read by one child beside the importing parent (two children and the parent on 2 CPUs
cost the real 216k-event, 54 MB trace 0.325 s against 0.307 s with one; a synthetic 150k-event trace,
43 MB, 0.359 against 0.341 s), and larger ones are shared (300k events, 87 MB: 0.498 s with two, 0.534 s
with one; ``scripts/bench.py``'s traces, measured with :data:`DECODERS_ENV`). With the feed, in which only
one process reads the file, the real trace still took 0.289 s with two and 0.272 s with one."""
MAX_DECODERS = 8
"""Most decoding processes :func:`decoders` chooses. One process reads the file for all, at about 2 GB of JSON a
second on the 2-CPU benchmark machine, so about five others can decode what it reads (each about 0.4 GB/s);
``scripts/bench.py --only decoders`` measures more."""
_GZIP_RATIO = 12
"""Assumed inflation of a gzipped trace, to estimate its JSON size from the file size (Kineto traces: 10-20x)."""


def decoders(path: str | Path) -> int:
    """Processes to decode ``path`` with: one per :data:`SHARE_BYTES` of (estimated) JSON, at most one per
    CPU this process may use, at least 1; 1 for a URL (read once, not once per process; the CLI
    decodes URLs in its own process). :data:`DECODERS_ENV`, where set to a positive number, decides instead."""
    from .sources import is_url

    forced = os.environ.get(DECODERS_ENV, "")
    if forced.isdigit() and int(forced) > 0:
        return int(forced)
    if is_url(path):
        return 1
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size * (_GZIP_RATIO if f.read(2) == b"\x1f\x8b" else 1)
    except OSError:
        return 1
    from .tuning import usable_cpus

    return max(1, min(usable_cpus(), MAX_DECODERS, size // SHARE_BYTES))


_early: list[tuple[tuple[int, int, int, int], Pending]] = []
"""The decoding started by :func:`start_early` (default limit and processes), with the identity of its file, until
:func:`start` takes it or :func:`drop_early` stops it."""


def _identity(path: str | Path) -> tuple[int, int, int, int] | None:
    """The file as it is now (device, inode, size, modification time), or None if it is not a regular file."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    import stat

    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) if stat.S_ISREG(st.st_mode) else None


def start_early(path: str) -> None:
    """Start decoding ``path`` before the command has parsed its options (:mod:`traceprobe.launch`), with the
    default limit and number of processes; :func:`start` takes the decoding over when it is asked for the
    same file, unchanged, with the same. Nothing happens where :func:`worthwhile` says no, the path is not
    a regular file, or a fork fails."""
    if _early or not worthwhile():
        return
    identity = _identity(path)
    if identity is None:
        return
    try:
        pending = start(path)
    except OSError:
        return
    _early.append((identity, pending))


def drop_early() -> None:
    """Stop the decoding :func:`start_early` began, if nothing took it over (its children killed and reaped)."""
    while _early:
        _early.pop()[1].cancel()


def start(path: str | Path, max_bytes: int | None = None, processes: int | None = None) -> Pending:
    """Fork child processes that decode ``path`` (:func:`traceprobe.shares.decode_share`), each its share
    of the pieces, and send their columns back.

    If :func:`start_early` is decoding this same file (same device, inode, size and
    modification time) with this ``max_bytes`` and ``processes`` unset, that decoding
    is returned (reporting ``path`` as given here); any other early decoding is stopped.

    Args:
        path: a local trace file or an fsspec URL.
        max_bytes: :func:`~traceprobe.kineto.read_events`'s limit on the decompressed size.
        processes: how many (default :func:`decoders`).

    Raises:
        OSError: a pipe or a fork could not be made (the children started are stopped;
            the caller decodes in-process).
    """
    if _early:
        identity, early = _early.pop()
        if processes is None and max_bytes is None and identity == _identity(path):
            early.path = path
            return early
        early.cancel()
    from . import shares  # numpy and msgspec only: imported before the fork, shared by all

    n = processes or decoders(path)
    pending = Pending(path, max_bytes, [])
    feed = None
    try:
        if n > 1:
            feed = _feed(n)
        for index in range(n):
            r, w = os.pipe()
            _widen(w)
            pid = os.fork()
            if pid == 0:
                _child(w, [r, *(fd for _, fd in pending.children)], path, max_bytes, index, n, feed, shares)
            os.close(w)
            pending.children.append((pid, r))
    except OSError:
        pending.cancel()
        raise
    finally:
        if feed is not None:
            feed.close()
    return pending


PIPE_BYTES = 1 << 20
"""Pipe buffer asked for (Linux ``F_SETPIPE_SZ``; the unprivileged maximum by default): the share crosses
in 1 MiB steps, not 64 KiB ones. The columns of HTA's 216k-event trace (10 MB) came across in 8.4 ms
instead of 13.8."""


def _widen(fd: int) -> None:
    """Ask for a :data:`PIPE_BYTES` pipe buffer where the system allows it; else keep the default."""
    import fcntl

    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)  # (Linux only)
    if set_size is not None:
        try:
            fcntl.fcntl(fd, set_size, PIPE_BYTES)
        except OSError:  # above the system's limit: the default size
            pass


def _feed(n: int) -> Feed | None:
    """The :class:`traceprobe.feed.Feed` of ``n`` decoding processes (:data:`FEED_SLOTS` slots for each process that
    only decodes, each twice a piece's size), or None where shared memory could not be made (each then reads the
    file: :func:`traceprobe.shares.decode_share`)."""
    from . import kineto
    from .feed import Feed

    try:
        return Feed(FEED_SLOTS * (n - 1), 2 * kineto.PIECE_BYTES + 2)
    except OSError:
        return None


FEED_SLOTS = 2
"""Slots of the shared ring per decoding process that does not read the file (:mod:`traceprobe.feed`)."""


def _child(w: int, others: list[int], path: str | Path, max_bytes: int | None, index: int, n: int, feed: Feed | None,
           shares: Any) -> None:
    """In a child: decode the share, send it, leave without running the parent's exit handlers.
    ``others``: the read ends of the pipes (its own, its elder siblings'), closed here. It writes
    nothing to stdout or stderr."""
    code = 0
    try:
        for fd in others:
            os.close(fd)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if feed is not None:
            feed.as_reader() if index == 0 else feed.as_decoder()
        try:
            msg: tuple[str, Any] = ("ok", shares.decode_share(path, max_bytes, index, n, feed=feed))
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
    from .execution import exit_reason

    return "exit status unknown" if status is None else exit_reason(os.waitstatus_to_exitcode(status))
