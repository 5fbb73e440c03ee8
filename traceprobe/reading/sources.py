"""Opening traces by local path or by fsspec URL (``s3://``, ``gs://``, ``file://``, ``memory://``, ...).

The loader reads every trace through :func:`open_binary` / :func:`read_bytes`, so
a trace can live anywhere `fsspec <https://filesystem-spec.readthedocs.io>`_
can read: the protocol's package must be installed where the trace is read
(``s3fs`` for ``s3://``, ``gcsfs`` for ``gs://``, ``adlfs`` for ``az://``; on a Dask
cluster, on the workers), and credentials come from that package's usual places
(environment variables, config files, instance metadata). Local paths never
import fsspec.

The bytes are returned as stored: a gzipped trace stays gzipped (the loader
inflates it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import IO

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")


def is_url(path: str | Path) -> bool:
    """True for ``protocol://...`` strings (a :class:`~pathlib.Path` never is one)."""
    return isinstance(path, str) and _URL.match(path) is not None


def open_binary(path: str | Path) -> IO[bytes]:
    """A binary file object for a local path or an fsspec URL (caller closes it).

    Raises:
        OSError: cannot be opened (``FileNotFoundError``, ``PermissionError``, ...,
            as the filesystem raises them), including a URL whose protocol has no
            fsspec implementation installed.
    """
    if not is_url(path):
        return open(path, "rb")
    import fsspec

    try:
        fs, p = fsspec.core.url_to_fs(str(path))
        return fs.open(p, "rb")
    except (ImportError, ValueError) as exc:  # no such protocol, or its package is missing
        raise OSError(f"cannot open {path}: {exc}") from None


def read_bytes(path: str | Path) -> bytes:
    """Every byte of a local file or an fsspec URL, as stored; raises what :func:`open_binary` raises."""
    if not is_url(path):
        return Path(path).read_bytes()
    with open_binary(path) as f:
        return f.read()


def size(path: str | Path) -> int | None:
    """Stored size in bytes, or None where the filesystem does not say (or the path cannot be reached)."""
    try:
        if not is_url(path):
            return Path(path).stat().st_size
        import fsspec

        fs, p = fsspec.core.url_to_fs(str(path))
        s = fs.size(p)
        return int(s) if s is not None else None
    except (OSError, ImportError, ValueError):
        return None


def expand_url(url: str, is_trace_name: Callable[[str], bool]) -> list[str] | None:
    """Trace files at an fsspec URL: the URL itself if it is a file, every file below it
    whose name passes ``is_trace_name`` if it is a folder, the matches if it holds a glob
    (``*``, ``?``, ``[``), sorted. None when nothing exists there.

    Raises:
        OSError: the filesystem cannot be reached or its package is missing.
    """
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise OSError(f"cannot open {url}: {exc}") from None
    protocol = url.split("://", 1)[0]

    def unstrip(p: str) -> str:
        return fs.unstrip_protocol(p) if protocol != "file" else f"file://{p}"

    if any(c in root for c in "*?["):
        found = [p for p in fs.glob(root) if fs.isfile(p)]
    elif fs.isfile(root):
        return [url]
    elif fs.isdir(root):
        found = [p for p in fs.find(root) if is_trace_name(p.rsplit("/", 1)[-1])]
    else:
        return None
    return sorted(unstrip(p) for p in found)
