"""Facts about the machine and the launcher, and the one place ``--device`` is resolved.

Importing this module does not import torch; :func:`resolve_device` and
:func:`machine` do.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import subprocess
import uuid
from typing import Any

CAPTURE_NEEDS_TORCH = ("traceprobe.capture() records with torch.profiler, and torch is not installed in this Python: "
                       "pip install torch (reading and reporting traces needs no torch)")
"""What starting a capture says where torch cannot be imported (:func:`import_torch`)."""


def import_torch() -> Any:
    """``torch`` with ``torch.profiler`` imported.

    Raises:
        ImportError: torch cannot be imported: :data:`CAPTURE_NEEDS_TORCH`, one line, without torch's own error
            chained to it.
    """
    try:
        import torch
        import torch.profiler  # noqa: F401 - (its ProfilerActivity and profile)
    except ImportError:
        raise ImportError(CAPTURE_NEEDS_TORCH) from None
    return torch


DEVICES = ("auto", "cuda", "cpu")
"""The values of ``--device``."""


def resolve_device(device: str = "auto") -> str:
    """``auto``/``cuda``/``cpu`` against this machine: ``cuda`` or ``cpu``.

    ``auto`` is ``cuda`` where torch sees a CUDA device, else ``cpu``.

    Raises:
        ValueError: ``device`` is not one of :data:`DEVICES`, or ``cuda`` was
            asked for and torch sees no CUDA device (one line each).
    """
    if device not in DEVICES:
        raise ValueError(f"--device must be auto, cuda or cpu, not {device!r}")
    if device == "cpu":
        return "cpu"
    import torch

    has_cuda = torch.cuda.is_available()
    if device == "cuda" and not has_cuda:
        raise ValueError("--device cuda was asked for, but torch sees no CUDA device")
    return "cuda" if has_cuda else "cpu"


def dist_env() -> tuple[int | None, int | None, int | None]:
    """``(rank, local_rank, world_size)`` from the variables torchrun sets (None where unset).

    ``RANK`` falls back to ``LOCAL_RANK`` (single-node launchers that set only that).
    """

    def num(name: str) -> int | None:
        try:
            return int(os.environ.get(name, "").strip())
        except ValueError:
            return None

    rank, local = num("RANK"), num("LOCAL_RANK")
    return (rank if rank is not None else local), local, num("WORLD_SIZE")


def nvidia_driver() -> str | None:
    """The NVIDIA driver version from ``nvidia-smi``, or None where it cannot be asked."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out else None


def machine(with_ranks: bool = False) -> dict[str, Any]:
    """Facts about this machine for the manifest.

    Keys: ``host``, ``platform``, ``python``, ``torch``, ``cuda`` (torch's CUDA
    version or None), ``traceprobe``, ``devices`` (``[{index, name,
    total_memory_bytes, capability}]``, empty without CUDA) and, where CUDA is
    available, ``cudnn``, ``nccl`` and ``driver``. ``with_ranks`` adds ``rank``,
    ``local_rank`` and ``world_size`` (:func:`dist_env`).
    """
    import torch

    from ..version import __version__

    env: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,  # pyright: ignore[reportAttributeAccessIssue]
        "traceprobe": __version__,
        "devices": [],
    }
    if torch.cuda.is_available():
        try:
            env["cudnn"] = torch.backends.cudnn.version()
        except Exception:  # noqa: BLE001 - informational only
            pass
        try:
            env["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))  # pyright: ignore[reportAttributeAccessIssue, reportArgumentType]
        except Exception:  # noqa: BLE001
            pass
        driver = nvidia_driver()
        if driver:
            env["driver"] = driver
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            env["devices"].append(
                {"index": i, "name": p.name, "total_memory_bytes": int(p.total_memory), "capability": f"{p.major}.{p.minor}"}
            )
    if with_ranks:
        rank, local, world = dist_env()
        env.update({"rank": rank, "local_rank": local, "world_size": world})
    return env


def process_record(command: list[str], target: dict[str, Any] | None, options: dict[str, Any]) -> dict[str, Any]:
    """A ``manifest.json`` ``processes`` entry for this process, status ``running``.

    Keys: ``rank``, ``local_rank``, ``world_size`` (:func:`dist_env`), ``host``,
    ``pid``, ``id`` (12 hex digits, unique per start), ``command``, ``target``,
    ``options``, ``started`` (ISO time, UTC), ``status`` and ``environment``
    (:func:`machine` with the ranks). The capture adds ``finished``,
    ``exit_code``, ``error`` and ``steps`` when it stops.
    """
    rank, local, world = dist_env()
    return {
        "rank": rank, "local_rank": local, "world_size": world, "host": socket.gethostname(), "pid": os.getpid(),
        "id": uuid.uuid4().hex[:12], "command": command, "target": target, "options": options,
        "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "status": "running",
        "environment": machine(with_ranks=True),
    }
