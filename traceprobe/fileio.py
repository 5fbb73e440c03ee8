"""Atomic file writes: a temporary name in the same folder, then a rename.

A reader never sees a half-written file under its final name, and a crash leaves
only a hidden ``.<name>.*.tmp`` file behind (``record`` removes stale ones).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_open(path: str | Path, compress: bool | None = None) -> Iterator[IO[bytes]]:
    """Open ``path`` for binary writing through a temporary file renamed on success.

    Args:
        path: final file name; its folder must exist.
        compress: gzip the stream (default: when the name ends in ``.gz``).

    On an exception the temporary file is removed and ``path`` is untouched.
    """
    p = Path(path)
    gz = p.name.endswith(".gz") if compress is None else compress
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    os.chmod(tmp, _umask_mode())
    try:
        with os.fdopen(fd, "wb") as raw:
            if gz:
                with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
                    yield f
            else:
                yield raw
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_open`); never gzips."""
    with atomic_open(path, compress=False) as f:
        f.write(data)
