"""Where a capture writes: its folder, its file names, the manifest lock, and publishing.

Split from :mod:`traceprobe.capture`, which holds the profiling itself. Every file
is written under a hidden temporary name and then hard-linked to its final name,
which fails rather than replace an existing file; the manifest is rewritten under
an exclusive lock so that the ranks of one torchrun job can share a folder.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import gzip
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
LOCK = ".manifest.lock"
GZIP_LEVEL = 6
"""zlib's default: about the size of level 9 (torch's choice) in a fraction of the time."""


def dist_env() -> tuple[int | None, int | None, int | None]:
    """``(rank, local_rank, world_size)`` from the variables torchrun sets (None where unset)."""

    def num(name: str) -> int | None:
        v = os.environ.get(name, "").strip()
        try:
            return int(v)
        except ValueError:
            return None

    rank, local = num("RANK"), num("LOCAL_RANK")
    return (rank if rank is not None else local), local, num("WORLD_SIZE")


def default_out(label: str, root: str | Path = "runs") -> Path:
    """``runs/<label>-<YYYYmmdd-HHMMSS>``.

    In a process started by torchrun the time is the launcher's (the parent
    process's start), so the ranks of one node agree on the folder; otherwise
    it is now, and a folder that exists already gets ``-2``, ``-3``...
    """
    rank, _, _ = dist_env()
    when = None
    if rank is not None:
        try:
            import psutil

            when = _dt.datetime.fromtimestamp(psutil.Process(os.getppid()).create_time())
        except Exception:  # noqa: BLE001 - fall back to now
            when = None
    base = Path(root) / f"{label}-{(when or _dt.datetime.now()).strftime('%Y%m%d-%H%M%S')}"
    if rank is not None:
        return base
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def default_name() -> str:
    """The main script's stem (``train`` for ``python train.py``); ``capture`` elsewhere (notebooks, ``-m``, pytest)."""
    f = getattr(sys.modules.get("__main__"), "__file__", None)
    main = Path(f) if isinstance(f, str) else None
    if main is not None and main.suffix == ".py" and main.stem not in ("__main__", "ipykernel_launcher"):
        return main.stem
    return "capture"


def environment() -> dict[str, Any]:
    """:func:`traceprobe.record.environment` (host, GPUs, driver, torch, CUDA, NCCL) plus the torchrun variables."""
    from .record import environment as base

    env = base()
    rank, local, world = dist_env()
    env.update({"rank": rank, "local_rank": local, "world_size": world})
    return env


@contextlib.contextmanager
def manifest_lock(out: Path) -> Iterator[None]:
    """An exclusive lock on ``out`` for the manifest's read-modify-write (POSIX; none elsewhere)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: one writer assumed
        yield
        return
    with open(out / LOCK, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def gzip_with_dist_info(src: Path, dest: Path, info: dict[str, Any] | None) -> None:
    """Gzip Kineto's JSON ``src`` to ``dest``, adding ``distributedInfo`` where it lacks one."""
    with open(src, "rb") as fin, open(dest, "wb") as raw_out:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw_out, compresslevel=GZIP_LEVEL, mtime=0) as fout:
            head = fin.read(1 << 20)
            if info is not None:
                cut = head.find(b'"traceEvents"')
                header = head if cut < 0 else head[:cut]
                brace = head.find(b"{")
                if b'"distributedInfo"' not in header and brace >= 0 and not head[:brace].strip():
                    extra = b'\n  "distributedInfo": ' + json.dumps(info).encode() + b","
                    head = head[: brace + 1] + extra + head[brace + 1 :]
            fout.write(head)
            shutil.copyfileobj(fin, fout, 1 << 20)
        raw_out.flush()
        os.fsync(raw_out.fileno())


def publish(tmp: Path, out: Path, name_for: Callable[[int], str]) -> Path:
    """Give ``tmp`` its final name without ever replacing a file: the first free of ``name_for(1)``, ``(2)``..."""
    i = 1
    while True:
        dest = out / name_for(i)
        try:
            os.link(tmp, dest)  # fails if dest exists: atomic and never clobbers
            return dest
        except FileExistsError:
            i += 1
        except OSError:  # no hard links here (some network or FAT file systems)
            if dest.exists():
                i += 1
                continue
            os.rename(tmp, dest)
            return dest
