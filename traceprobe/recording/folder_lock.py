"""One recording at a time per folder: an advisory lock on the output folder itself.

``traceprobe record`` (the built-in workloads) holds it exclusively for the whole
run, so a second ``record`` into the same folder is refused at once with one
line. ``record --script`` and ``capture()`` hold it shared: the ranks of one
torchrun job (and later runs of a script) share a folder, but not with a
built-in recording. The lock is ``flock`` on the folder's own descriptor, so no
lock file is left behind; it is released when the process ends, however it
ends. Where ``flock`` is not available (Windows, some network file systems) no
lock is taken.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


class FolderBusy(OSError):
    """Another recording holds the folder; ``str()`` is one line naming it."""

    def __str__(self) -> str:
        return str(self.strerror)


class FolderLock:
    """Take the lock on ``folder`` now (see the module documentation); :meth:`release` or process exit frees it.

    Raises:
        FolderBusy: another process holds it in a conflicting mode.
    """

    def __init__(self, folder: str | Path, shared: bool = False) -> None:
        self.folder = Path(folder)
        self._fd: int | None = None
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            return
        try:
            fd = os.open(self.folder, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                what = "a traceprobe record" + ("" if shared else " or record --script")
                raise FolderBusy(e.errno, f"{self.folder} is in use by {what} running now; wait for it or choose another --out") from None
            return  # no flock on this file system: go on unlocked
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
