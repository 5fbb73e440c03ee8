"""Reading a trace file's bytes safely, as a stream, from a local path or an fsspec URL.

A trace can live anywhere `fsspec <https://filesystem-spec.readthedocs.io>`_ reads
(``s3://``, ``gs://``, ``memory://``, ...) once the protocol's package is installed
where the trace is read (``s3fs``, ``gcsfs``, ``adlfs``; on a Dask cluster, on the
workers), with that package's usual credentials. Local paths never import fsspec.

:func:`read_trace_chunks` hands on the JSON in chunks of at most :data:`CHUNK_BYTES`,
read or inflated a piece at a time. It refuses anything but a regular file from its
``stat``, before any open, and counts the decompressed size against one limit as it
grows: a small gzip that inflates past it is refused before memory runs out, a plain
file larger than it before any read. gzip's ISIZE trailer is never trusted (size
modulo 2**32, forgeable); members may follow members, and zero padding them.
Inflating uses ``isal`` (ISA-L) when installed, ``zlib`` otherwise.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import IO, Any, cast

from ..errors import TraceFormatError

try:  # ISA-L's inflate is about twice as fast as zlib's; same API
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is a dependency; zlib is the fallback
    import zlib as _zlib  # type: ignore[no-redef]

_ZLIB_ERROR = cast("type[Exception]", _zlib.error)

MEMORY_SHARE = 0.5
"""Largest decompressed JSON accepted by default, as a share of the available memory."""
DEFAULT_CAP = 4 << 30
"""Largest decompressed JSON accepted by default whatever the memory (4 GiB): a gzip bomb is refused before it
costs gigabytes; ``--max-bytes`` raises it."""
CHUNK_BYTES = 4 << 20
"""Largest chunk of JSON handed on at a time (read from a plain file, or inflated)."""
_READ = 1 << 20  # compressed bytes read at a time
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def is_url(path: str | Path) -> bool:
    """True for ``protocol://...`` strings (a :class:`~pathlib.Path` never is one)."""
    return isinstance(path, str) and _URL.match(path) is not None


def url_filesystem(url: str) -> tuple[Any, str]:
    """fsspec's filesystem of ``url`` and the path on it; OSError where its protocol has no implementation installed."""
    import fsspec

    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:  # no such protocol, or its package is missing
        raise OSError(f"cannot open {url}: {exc}") from None


def open_binary(path: str | Path) -> IO[bytes]:
    """A binary file object for a local path or an fsspec URL (caller closes it).

    Raises:
        OSError: cannot be opened (``FileNotFoundError``, ``PermissionError``, ...,
            as the filesystem raises them), including a URL whose protocol has no
            fsspec implementation installed.
    """
    if not is_url(path):
        return open(path, "rb")
    fs, p = url_filesystem(str(path))
    return fs.open(p, "rb")


def available_memory() -> int:
    """Bytes this process may still allocate: the least of the machine's available memory
    (``psutil.virtual_memory().available``: ``MemAvailable`` on Linux), the cgroup v2 limit
    left and ``RLIMIT_AS`` left."""
    import resource

    import psutil

    limits = [int(psutil.virtual_memory().available)]
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft != resource.RLIM_INFINITY:
        limits.append(soft - int(psutil.Process().memory_info().vms))
    try:
        cg = Path("/sys/fs/cgroup")
        high = (cg / "memory.max").read_text().strip()
        if high != "max":
            limits.append(int(high) - int((cg / "memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return max(0, min(limits))


def default_max_bytes() -> int:
    """The default limit on the decompressed JSON of one command: the smaller of :data:`MEMORY_SHARE` of
    :func:`available_memory` and :data:`DEFAULT_CAP`."""
    return min(int(available_memory() * MEMORY_SHARE), DEFAULT_CAP)


def _limit_words(explicit: bool) -> str:
    return "the max_bytes limit (--max-bytes)" if explicit else \
        f"the default limit, the smaller of {MEMORY_SHARE:.0%} of the memory available and {DEFAULT_CAP >> 30} GiB"


def size_words(n: float) -> str:
    """A size in bytes for a person, in the unit that keeps it short: ``98 KiB``, ``1.5 MiB``, ``512 MiB``, ``4.0 GiB``."""
    if n < 2**20:
        return f"{n / 2**10:,.0f} KiB"
    if n < 2**30:
        return f"{n / 2**20:,.1f} MiB" if n < 10 * 2**20 else f"{n / 2**20:,.0f} MiB"
    return f"{n / 2**30:,.1f} GiB"


def _too_big(path: str | Path, limit: int, explicit: bool) -> TraceFormatError:
    return TraceFormatError(path, f"too large: more than {size_words(limit)} of JSON ({_limit_words(explicit)}; "
                                  "--max-bytes sets it)")


class SharedLimit:
    """One command's limit on decompressed JSON, shared by the processes that read its traces at once.

    Every chunk a reader hands on is first reserved here; a reservation that would pass the limit refuses the
    file being read (what the other readers hold is what it may not take), so the command as a whole stays under
    the limit whatever ``--jobs`` is. A reader gives back all it reserved when its file's work is done
    (:func:`release`); what a worker that died held is given back by the process that saw it die
    (:meth:`forget`, from :mod:`traceprobe.collect.execution`). The counters live in an anonymous shared mapping
    (no file: ``multiprocessing.Value``'s arena is one, refused under a small ``ulimit -f``) that the worker
    processes forked after it was made share; a Dask worker, elsewhere, counts against its own file's limit only.
    """

    SLOTS = 512
    """Processes whose holdings are kept apart (each: its pid and what it holds); more share the last slot."""

    def __init__(self, limit: int, explicit: bool) -> None:
        import mmap
        import multiprocessing

        self.limit, self.explicit = int(limit), explicit
        self._map = mmap.mmap(-1, 8 * (2 + 2 * self.SLOTS))  # used, peak, then (pid, held) per process
        self._lock = multiprocessing.get_context("fork").Lock()

    def _get(self, i: int) -> int:
        return int.from_bytes(self._map[8 * i:8 * i + 8], "little", signed=True)

    def _set(self, i: int, v: int) -> None:
        self._map[8 * i:8 * i + 8] = int(v).to_bytes(8, "little", signed=True)

    def _slot(self, pid: int, claim: bool) -> int:
        """The index of ``pid``'s held count (claiming a free slot if ``claim``), -1 if it has none."""
        free = -1
        for k in range(self.SLOTS):
            p = self._get(2 + 2 * k)
            if p == pid:
                return 3 + 2 * k
            if p == 0 and free < 0:
                free = k
        if not claim:
            return -1
        k = free if free >= 0 else self.SLOTS - 1
        self._set(2 + 2 * k, pid)
        return 3 + 2 * k

    @property
    def peak(self) -> int:
        """The most ever reserved at once, in bytes (for tests and benchmarks)."""
        return self._get(1)

    def held(self, pid: int | None = None) -> int:
        """What process ``pid`` (default: this one) holds, in bytes."""
        with self._lock:
            k = self._slot(os.getpid() if pid is None else pid, claim=False)
            return self._get(k) if k >= 0 else 0

    def take(self, n: int, pid: int | None = None) -> int:
        """Reserve ``n`` bytes for process ``pid`` (default: this one); return -1 if done, else what the others hold
        (nothing reserved)."""
        with self._lock:
            used = self._get(0)
            k = self._slot(os.getpid() if pid is None else pid, claim=True)
            if used + n > self.limit:
                return used - self._get(k)
            self._set(0, used + n)
            self._set(k, self._get(k) + n)
            self._set(1, max(self._get(1), used + n))
            return -1

    def forget(self, pid: int | None = None) -> None:
        """Give back all that process ``pid`` (default: this one) holds: its file's work is done, or it died."""
        with self._lock:
            k = self._slot(os.getpid() if pid is None else pid, claim=False)
            if k >= 0:
                self._set(0, self._get(0) - self._get(k))
                self._set(k, 0)
                self._set(k - 1, 0)


_SHARED: list[SharedLimit | None] = [None]


def share_limit(max_bytes: int | None) -> SharedLimit:
    """Make the limit of the command about to read traces (``max_bytes``, else :func:`default_max_bytes`) the one
    its readers share (:class:`SharedLimit`), until :func:`unshare_limit`."""
    shared = SharedLimit(max_bytes if max_bytes is not None else default_max_bytes(), max_bytes is not None)
    _SHARED[0] = shared
    return shared


def unshare_limit() -> None:
    """End the shared limit of :func:`share_limit`: readers count each file against its own limit again."""
    _SHARED[0] = None


def release() -> None:
    """Give back what this process reserved of the shared limit for the file it read (its work on it is done)."""
    shared = _SHARED[0]
    if shared is not None:
        shared.forget()


def forget_process(pid: int) -> None:
    """Give back what a worker process that died held of the shared limit (called where its death is seen)."""
    shared = _SHARED[0]
    if shared is not None:
        shared.forget(pid)


def _reserve(path: str | Path, n: int, total: int) -> None:
    """Reserve ``n`` more bytes of the shared limit, if there is one, for the file read (``total`` so far)."""
    shared = _SHARED[0]
    if shared is None:
        return
    others = shared.take(n)
    if others >= 0:
        raise TraceFormatError(path, f"too large: more than {size_words(total)} of JSON while the other traces read at once "
                                     f"held {size_words(others)} of the command's {size_words(shared.limit)} "
                                     f"({_limit_words(shared.explicit)}, shared by every trace read at once; --max-bytes sets "
                                     "it, --jobs 1 reads one trace at a time)")


def reserve(path: str | Path, n: int, what: str) -> None:
    """Count ``n`` bytes of memory that a file will take beyond its JSON (``what``, in words: a summary's inflated
    graph and its transfers) against the command's limit: the one its readers share (:func:`share_limit`, given back
    with the rest by :func:`release`), else :func:`default_max_bytes` for this file alone.

    Raises:
        TraceFormatError: ``n`` passes what is left of the limit (one line naming the file and the limit).
    """
    shared = _SHARED[0]
    if n <= 0:  # (nothing to count: no limit is passed by it, and none is read: 0.36 ms a summary, the machine's memory asked)
        return
    if shared is None:
        limit = default_max_bytes()
        if n > limit:
            raise TraceFormatError(path, f"too large: {what} take about {n / 2**20:,.0f} MiB of memory, more than "
                                         f"{limit / 2**20:,.0f} MiB ({_limit_words(False)}; --max-bytes sets it)")
        return
    others = shared.take(n)
    if others >= 0:
        raise TraceFormatError(path, f"too large: {what} take about {n / 2**20:,.0f} MiB of memory while the other files read "
                                     f"at once held {others / 2**20:,.0f} MiB of the command's {shared.limit / 2**20:,.0f} MiB "
                                     f"({_limit_words(shared.explicit)}, shared by every file read at once; --max-bytes sets it)")


def read_trace_chunks(path: str | Path, max_bytes: int | None = None) -> Generator[bytes, None, None]:
    """The trace's JSON bytes in chunks of at most :data:`CHUNK_BYTES`, gunzipped if the
    file starts with gzip's magic bytes.

    Args:
        path: a regular file, or an fsspec URL.
        max_bytes: largest (decompressed) size accepted, counted on the whole
            stream; default :func:`default_max_bytes`.

    Raises:
        TraceFormatError: not a regular file, unreadable, larger than the
            limit, or corrupt/truncated gzip data; raised by the chunk where it
            shows (a file larger than the limit: as soon as that is known).
    """
    shared = _SHARED[0]
    limit = max_bytes if max_bytes is not None else shared.limit if shared is not None else default_max_bytes()
    explicit = max_bytes is not None or (shared is not None and shared.explicit)
    try:
        with open_regular(path) as f:
            head = f.read(2) or b""
            if head == b"\x1f\x8b":
                yield from _inflate(path, f, head, limit, explicit)
            else:
                if not is_url(path) and os.fstat(f.fileno()).st_size > limit:
                    raise _too_big(path, limit, explicit)
                yield from _plain(path, f, head, limit, explicit)  # counted again: a size may lie (/proc, a growing file)
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from None


def open_regular(path: str | Path) -> IO[bytes]:
    """An fsspec URL opened, or a local regular file: anything else is refused from its ``stat`` before any open
    (opening a FIFO or a device can block or act), and from its ``fstat`` after (replaced in between)."""
    if is_url(path):
        return open_binary(path)
    refuse_unless_regular(path, os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    f = os.fdopen(fd, "rb", buffering=0)
    try:
        refuse_unless_regular(path, os.fstat(fd).st_mode)
    except TraceFormatError:
        f.close()
        raise
    return f


def refuse_unless_regular(path: str | Path, mode: int) -> None:
    """Raise :class:`TraceFormatError` unless ``mode`` (``st_mode``) is a regular file's: a directory,
    a FIFO, a socket or a device is named."""
    if stat.S_ISDIR(mode):
        raise TraceFormatError(path, "is a directory, not a trace file")
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        raise TraceFormatError(path, f"is {kind}, not a regular file: refused")


def _plain(path: str | Path, f: Any, head: bytes, limit: int, explicit: bool) -> Iterator[bytes]:
    """The rest of ``f`` (after its first bytes ``head``) as it is stored, within ``limit``."""
    chunk, total = head + f.read(max(0, CHUNK_BYTES - len(head))), 0
    while chunk:
        total += len(chunk)
        if total > limit:
            raise _too_big(path, limit, explicit)
        _reserve(path, len(chunk), total)
        yield chunk
        chunk = f.read(CHUNK_BYTES)


def _inflate(path: str | Path, f: Any, head: bytes, limit: int, explicit: bool) -> Iterator[bytes]:
    """gunzip the rest of ``f`` (after its first bytes ``head``), member after member, within ``limit``."""
    d = _zlib.decompressobj(31)
    chunk, total = head, 0
    try:
        while True:
            if not chunk:
                chunk = f.read(_READ)
                if not chunk:
                    raise TraceFormatError(path, "corrupt or truncated gzip data (the stream ends early)")
            out = d.decompress(chunk, CHUNK_BYTES)
            total += len(out)
            if total > limit:
                raise _too_big(path, limit, explicit)
            _reserve(path, len(out), total)
            if out:
                yield out
            if not d.eof:
                chunk = d.unconsumed_tail
                continue
            chunk = d.unused_data
            while not chunk.strip(b"\x00"):  # zero padding after a member is allowed
                chunk = f.read(_READ)
                if not chunk:
                    return
            d = _zlib.decompressobj(31)  # another member follows
    except _ZLIB_ERROR as exc:
        raise TraceFormatError(path, f"corrupt or truncated gzip data ({exc})") from None
