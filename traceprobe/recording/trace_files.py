"""Where recorded traces go and how they are written: default folders and names, export from the profiler.

Every trace is exported by ``torch.profiler`` to a scratch JSON file in the
destination folder, then gzipped (level 6, a fraction of torch's level-9 time
for about the same size) through :func:`traceprobe.fileio.atomic_open`, adding
``distributedInfo`` where a rank's trace lacks it. Names follow
:func:`traceprobe.manifest.trace_name`.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..fileio import atomic_open, scratch_path
from .environment import dist_env

MIN_FREE_BYTES = 256 * 2**20
"""Free disk space a recording asks for before starting (traces are a few MB each)."""


def default_out(label: str, root: str | Path = "runs") -> Path:
    """``runs/<label>-<YYYYmmdd-HHMMSS>``.

    In a process started by torchrun the time is the launcher's (the parent
    process's start), so the ranks of one node agree on the folder; otherwise
    it is now, and a folder that exists already gets ``-2``, ``-3``...: the folder is created here, exclusively
    (``mkdir`` fails where it exists), so that two recordings started in one second never share one.
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
    base.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_001):
        out = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            out.mkdir()  # (claimed: a second process gets FileExistsError and the next name)
            return out
        except FileExistsError:
            continue
    raise FileExistsError(17, "10,000 folders of that name taken", str(base))


def default_name() -> str:
    """The main script's stem (``train`` for ``python train.py``); ``capture`` elsewhere (notebooks, ``-m``, pytest)."""
    f = getattr(sys.modules.get("__main__"), "__file__", None)
    main = Path(f) if isinstance(f, str) else None
    if main is not None and main.suffix == ".py" and main.stem not in ("__main__", "ipykernel_launcher"):
        return main.stem
    return "capture"


def check_writable(out: Path) -> None:
    """Create ``out`` and make sure a file can be written there and the disk has room.

    Raises:
        OSError: not creatable or writable, or less than :data:`MIN_FREE_BYTES` free.
    """
    out.mkdir(parents=True, exist_ok=True)
    scratch_path(out, "write-test").unlink()
    free = shutil.disk_usage(out).free
    if free < MIN_FREE_BYTES:
        raise OSError(errno.ENOSPC, f"only {free / 2**20:.0f} MiB free on the disk of {out}; need {MIN_FREE_BYTES / 2**20:.0f} MiB")


def dist_info(rank: int | None, world_size: int | None) -> dict[str, Any] | None:
    """``distributedInfo`` for a rank's trace (None outside torchrun): rank, world size, and the
    backend where ``torch.distributed`` is initialized; ``source`` says traceprobe wrote it."""
    if rank is None:
        return None
    info: dict[str, Any] = {"rank": rank, "world_size": world_size}
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            info.update({"backend": dist.get_backend(), "rank": dist.get_rank(), "world_size": dist.get_world_size()})
    except Exception:  # noqa: BLE001 - informational
        pass
    info["source"] = "traceprobe (torchrun environment)"
    return info


def _gzip_with_dist_info(src: Path, dest: Path, info: dict[str, Any] | None, exclusive: bool) -> None:
    """Gzip Kineto's JSON ``src`` to ``dest`` atomically, adding ``distributedInfo`` where it lacks one."""
    with open(src, "rb") as fin, atomic_open(dest, compress=True, exclusive=exclusive) as fout:
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


def write_trace(
    prof: Any,
    out: Path,
    name_for: Callable[[int], str],
    *,
    exclusive: bool = True,
    dist_info: dict[str, Any] | None = None,
) -> tuple[Path, int]:
    """Export ``prof`` (a ``torch.profiler.profile``) as a gzipped Chrome trace in ``out``.

    Args:
        name_for: the file name; ``name_for(1)`` first, and with ``exclusive``
            ``name_for(2)``, ``(3)``... while the name is taken.
        exclusive: never replace a file (else the first name is replaced).
        dist_info: ``distributedInfo`` to add where the trace has none.

    Returns:
        ``(path written, size of the JSON in bytes)``.

    Raises:
        OSError (:class:`~traceprobe.fileio.WriteError`): the trace cannot be written.
    """
    raw = scratch_path(out, name_for(1), suffix=".json")  # torch writes plain JSON for a .json name
    try:
        prof.export_chrome_trace(str(raw))
        size = raw.stat().st_size
        i = 1
        while True:
            dest = out / name_for(i)
            if not (exclusive and dest.exists()):
                try:
                    _gzip_with_dist_info(raw, dest, dist_info, exclusive)
                    return dest, size
                except FileExistsError:  # taken meanwhile by another process
                    pass
            i += 1
    finally:
        raw.unlink(missing_ok=True)
