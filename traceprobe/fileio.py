"""The one way traceprobe writes a file: atomically, never half-written under its final name.

Every file traceprobe writes (traces, ``manifest.json``, reports, plots,
``.pftrace``) goes through :func:`atomic_open` or :func:`atomic_write`:

1. the data goes to a temporary file in the destination's folder, named
   ``.<final name>.traceprobe-<8 random characters>.tmp`` (:data:`TEMP_PATTERN`);
2. it is flushed and ``fsync``-ed;
3. it is renamed over the final name (``os.replace``), or, with
   ``exclusive=True``, hard-linked to it, which fails rather than replace a file.

A reader therefore sees the old file or the new one, never a mix. If anything
fails (full disk, read-only folder, an exception in the caller's block), the
temporary file is removed, the old file is left as it was, and a
:class:`WriteError` (an ``OSError``) says why in one line. A process killed
mid-write leaves only a temporary file (SIGINT and SIGTERM remove it on the way out: the command line turns SIGTERM
into the same unwinding as Ctrl-C); the next write of the same name removes those older than its process
(:data:`STARTED`), and :func:`remove_stale_temps` removes a folder's, both by their exact name pattern and nothing
else (a user's ``.env.tmpl`` stays).

Tools that insist on writing a file by name themselves (``torch.profiler``'s
``export_chrome_trace``) get a scratch name with the same pattern from
:func:`scratch_path`.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

TEMP_MARK = ".traceprobe-"
TEMP_PATTERN = re.compile(r"^\..+\.traceprobe-[a-z0-9_]{8}\.tmp(\.json)?(\.tmp)?$")
"""Names of traceprobe's temporary files: ``.<name>.traceprobe-<mkstemp's 8 characters>.tmp``,
plus ``.json`` for a profiler's scratch export (:func:`scratch_path`), plus ``.tmp`` for the file
torch's exporter writes beside that scratch name before renaming it (left behind when the
process is killed while torch writes)."""
STARTED = time.time()
"""When this process started writing (the import of this module), s since the epoch: a temporary file of one of its
final names older than this is a leftover of an earlier, killed writer (:func:`atomic_open` removes it)."""
_SWEPT: set[tuple[str, str]] = set()
GZIP_LEVEL = 6
"""zlib's default: about the size of level 9 (torch's choice) in a fraction of the time."""


class WriteError(OSError):
    """A file could not be written; the old file, if any, is intact.

    ``str(err)`` is one line, ``cannot write <path>: <reason>``; ``errno`` and
    ``filename`` are those of the underlying ``OSError``.
    """

    def __init__(self, path: str | Path, cause: BaseException) -> None:
        reason = (cause.strerror if isinstance(cause, OSError) and cause.strerror else str(cause)) or type(cause).__name__
        super().__init__(getattr(cause, "errno", None), " ".join(reason.split()), str(path))
        self.path = str(path)
        self.reason = " ".join(reason.split())

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.reason}"


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # not possible everywhere (Windows); the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _commit(tmp: Path, dest: Path, exclusive: bool) -> None:
    if not exclusive:
        os.replace(tmp, dest)
        return
    try:
        os.link(tmp, dest)  # fails if dest exists: atomic and never clobbers
    except FileExistsError:
        raise
    except OSError:  # no hard links here (some network or FAT file systems): check, then rename
        if dest.exists():
            raise FileExistsError(17, "File exists", str(dest)) from None
        os.rename(tmp, dest)
        return
    tmp.unlink()


def _fitting(folder: str | Path, name: str, suffix: str) -> str:
    """``name`` cut at its end so that its scratch name fits the folder's longest file name (a valid
    250-character output name would otherwise be refused because of its longer temporary name);
    the cut is on a character, never inside a UTF-8 sequence; a name that is not UTF-8 (bytes the OS
    gave, as surrogate escapes) is measured and kept as those bytes."""
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    room = limit - len(f".{TEMP_MARK}XXXXXXXX.tmp{suffix}".encode())  # (the 4 bytes of ".tmp" torch may add are its own)
    raw = os.fsencode(name)  # (a name that is not UTF-8 holds its bytes as surrogate escapes: bytes as the OS has them)
    if len(raw) <= room:
        return name
    cut = raw[: max(room, 1)]
    for back in range(min(4, len(cut))):  # a UTF-8 sequence cut at its end is dropped whole
        try:
            (cut[: len(cut) - back] if back else cut).decode()
        except UnicodeDecodeError:
            continue
        cut = cut[: len(cut) - back] if back else cut
        break
    return os.fsdecode(cut) or "x"


def scratch_path(folder: str | Path, name: str, suffix: str = "") -> Path:
    """A new, empty file in ``folder`` named by :data:`TEMP_PATTERN`, for tools that write a file by name.

    ``suffix`` may be ``""`` or ``".json"`` (torch's exporter gzips a name ending
    in ``.gz``). The caller removes the file; :func:`remove_stale_temps` removes a leftover.

    Raises:
        ValueError: another suffix.
    """
    if suffix not in ("", ".json"):
        raise ValueError(f"scratch suffix must be '' or '.json', not {suffix!r}")
    fd, tmp = tempfile.mkstemp(prefix=f".{_fitting(folder, name, suffix)}{TEMP_MARK}", suffix=".tmp" + suffix, dir=folder)
    os.close(fd)
    os.chmod(tmp, _umask_mode())
    return Path(tmp)


@contextlib.contextmanager
def scratch_file(folder: str | Path, name: str) -> Iterator[Path]:
    """:func:`scratch_path` as a context: the file is removed when the block ends."""
    p = scratch_path(folder, name)
    try:
        yield p
    finally:
        p.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_open(
    path: str | Path, *, text: bool = False, compress: bool | None = None, exclusive: bool = False
) -> Iterator[IO[Any]]:
    """Open ``path`` for writing through a temporary file committed when the block ends.

    Args:
        path: final file name; its folder must exist.
        text: yield a UTF-8 text stream (``str``) instead of a binary one.
        compress: gzip the stream, level :data:`GZIP_LEVEL`, mtime 0 (default:
            when the name ends in ``.gz``).
        exclusive: never replace an existing ``path``: ``FileExistsError`` instead.

    Raises:
        FileExistsError: ``exclusive`` and ``path`` exists (nothing written).
        WriteError: the folder is missing or read-only, the disk is full, any
            other ``OSError`` while writing; the old file is intact.
        Exceptions of the caller's block propagate unchanged (the temporary file
        is removed, the old file is intact).
    """
    p = Path(path)
    gz = p.name.endswith(".gz") if compress is None else compress
    remove_leftovers_of(p)
    try:
        tmp = scratch_path(p.parent, p.name)
    except OSError as e:
        raise WriteError(p, e) from e
    try:
        with open(tmp, "wb") as raw:
            gzf = gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL, mtime=0) if gz else None
            stream: IO[Any] = gzf if gzf is not None else raw  # pyright: ignore[reportAssignmentType]
            wrapper = io.TextIOWrapper(stream, encoding="utf-8", newline="") if text else None
            try:
                yield wrapper if wrapper is not None else stream
                if wrapper is not None:
                    wrapper.detach()  # flushes into stream; the wrapper no longer owns it
                if gzf is not None:
                    gzf.close()  # the gzip trailer
            except BaseException:
                with contextlib.suppress(Exception):  # the file is dropped: close quietly
                    (wrapper or stream).close()
                raise
            raw.flush()
            os.fsync(raw.fileno())
        _commit(tmp, p, exclusive)
        _fsync_dir(p.parent)
    except (FileExistsError, WriteError):
        raise
    except OSError as e:
        raise WriteError(p, e) from e
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write(path: str | Path, data: bytes | str, *, compress: bool | None = None, exclusive: bool = False) -> None:
    """Write ``data`` (``str`` as UTF-8) to ``path`` atomically; see :func:`atomic_open` for the rest."""
    with atomic_open(path, text=isinstance(data, str), compress=compress, exclusive=exclusive) as f:
        f.write(data)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """``atomic_write(path, data, compress=False)``: bytes as given, whatever the name."""
    atomic_write(path, data, compress=False)


MAX_CLAIMS = 10_000
"""Most suffixes :func:`claim_stem` tries (``stem``, ``stem-2``, ... ``stem-10000``) before it gives up."""


def claim_stem(folder: str | Path, stem: str, files: Sequence[tuple[str, Callable[[str], bytes]]],
               free: Sequence[str] = ()) -> str:
    """Write a set of files under the first stem nobody holds (``stem``, ``stem-2``, ``stem-3``...), each claimed
    exclusively: never by checking and then renaming over a name, so that writers racing into one folder (two profiler
    loops of one rank, three processes) each get their own stem and nothing is overwritten.

    For each candidate, every ``(suffix, data)`` of ``files`` is written in order to ``<candidate><suffix>``
    (:func:`atomic_write`, ``exclusive=True``: a hard link that fails where the name exists), ``data(candidate)`` giving
    its bytes as written (a summary names its trace); then each suffix of ``free`` must be absent. A name taken (or
    a ``free`` name present) removes the files this call wrote for that candidate, and the next candidate is tried:
    two writers of one protocol can both move on, never both keep one stem.

    Returns:
        the stem claimed.

    Raises:
        FileExistsError: :data:`MAX_CLAIMS` candidates taken.
        WriteError: a file cannot be written (none of this call's files is left).
    """
    base = Path(folder)
    for k in range(1, MAX_CLAIMS + 1):
        cand = stem if k == 1 else f"{stem}-{k}"
        mine: list[Path] = []
        try:
            for suffix, data in files:
                atomic_write(base / f"{cand}{suffix}", data(cand), compress=False, exclusive=True)
                mine.append(base / f"{cand}{suffix}")
            if not any(os.path.lexists(base / f"{cand}{suffix}") for suffix in free):
                return cand
        except FileExistsError:
            pass
        except BaseException:
            for f in mine:
                f.unlink(missing_ok=True)
            raise
        for f in mine:
            f.unlink(missing_ok=True)
    raise FileExistsError(17, f"{MAX_CLAIMS:,} names taken", str(base / stem))


def remove_leftovers_of(p: Path) -> None:
    """Remove the temporary files of ``p``'s name (``.<name>.traceprobe-*.tmp``, :data:`TEMP_PATTERN`) last modified
    before this process started (:data:`STARTED`): what an earlier writer of the same file left when it was killed
    (SIGKILL, a lost node). Once per folder and name per process; a writer still busy in another process touches its
    file as it writes, and a file of another name is never touched."""
    key = (str(p.parent), p.name)
    if key in _SWEPT:
        return
    _SWEPT.add(key)
    lead = f".{_fitting(p.parent, p.name, '')}{TEMP_MARK}" if p.parent.is_dir() else None
    if lead is None:
        return
    try:
        entries = [e for e in os.scandir(p.parent) if e.name.startswith(lead) and TEMP_PATTERN.match(e.name)]
    except OSError:
        return
    for e in entries:
        try:
            if e.is_file(follow_symlinks=False) and e.stat(follow_symlinks=False).st_mtime < STARTED:
                os.unlink(e.path)
        except OSError:
            pass


def remove_stale_temps(folder: str | Path, older_than_s: float = 0.0) -> list[Path]:
    """Remove traceprobe's leftover temporary files in ``folder`` (not recursive).

    Only names matching :data:`TEMP_PATTERN` are touched, and only those last
    modified more than ``older_than_s`` seconds ago (so a writer still busy in
    another process keeps its file). Returns the files removed.
    """
    removed: list[Path] = []
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for e in entries:
        if not TEMP_PATTERN.match(e.name):
            continue
        try:
            if e.is_file(follow_symlinks=False) and now - e.stat(follow_symlinks=False).st_mtime >= older_than_s:
                os.unlink(e.path)
                removed.append(Path(e.path))
        except OSError:
            pass
    return removed
