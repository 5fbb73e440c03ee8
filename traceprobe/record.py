"""Run workloads' variants under torch.profiler; write traces and a manifest.

For each variant: check the machine has what it needs (GPUs, GPU memory), set it
up, run it once to warm up, time one run on the wall clock (the step ends
synchronized, as the seeds time it), then run it once more under
``torch.profiler.profile(activities=[CPU, CUDA])`` (CUDA only where available) and
export a gzipped Chrome trace ``<workload>.<variant>.pt.trace.json.gz``.

Files are written atomically: to a temporary name in the same folder, then
renamed. An existing trace is kept unless ``force`` is set. ``manifest.json`` is
rewritten (atomically) after every variant, so an interrupted run leaves a
manifest listing exactly the traces that are whole.
"""

from __future__ import annotations

import datetime as _dt
import errno
import gc
import json
import os
import platform
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from . import __version__
from .fileio import _umask_mode, atomic_write_bytes
from .workloads import WORKLOADS, Context, Skip, Variant, Workload

MANIFEST = "manifest.json"
TRACE_SUFFIX = ".pt.trace.json.gz"


def trace_name(workload: str, variant: str, rank: int | None = None) -> str:
    """File name of a variant's trace, e.g. ``compute-copy.overlapped.pt.trace.json.gz``."""
    r = "" if rank is None else f".rank{rank}"
    return f"{workload}.{variant}{r}{TRACE_SUFFIX}"


def environment() -> dict[str, Any]:
    """Facts about this machine: host, Python, torch, CUDA, cuDNN, NCCL, devices."""
    import torch

    env: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "traceprobe": __version__,
        "devices": [],
    }
    if torch.cuda.is_available():
        try:
            env["cudnn"] = torch.backends.cudnn.version()
        except Exception:  # pragma: no cover - informational only
            pass
        try:
            env["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # pragma: no cover
            pass
        driver = _nvidia_driver()
        if driver:
            env["driver"] = driver
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            env["devices"].append(
                {"index": i, "name": p.name, "total_memory_bytes": int(p.total_memory), "capability": f"{p.major}.{p.minor}"}
            )
    return env


def _nvidia_driver() -> str | None:
    """The NVIDIA driver version from ``nvidia-smi``, or None where it cannot be asked."""
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out else None


def make_context(device: str = "auto", size: int | None = None, repeat: int | None = None) -> Context:
    """Resolve ``auto``/``cuda``/``cpu`` against this machine.

    Raises:
        ValueError: ``cuda`` was asked for and no CUDA device is available, or
            ``device`` is not one of the three.
    """
    import torch

    if device not in ("auto", "cuda", "cpu"):
        raise ValueError(f"--device must be auto, cuda or cpu, not {device!r}")
    has_cuda = torch.cuda.is_available()
    if device == "cuda" and not has_cuda:
        raise ValueError("--device cuda was asked for, but torch sees no CUDA device")
    use = "cuda" if (device == "cuda" or (device == "auto" and has_cuda)) else "cpu"
    return Context(device=use, gpus=torch.cuda.device_count() if use == "cuda" else 0, size=size, repeat=repeat)


def _check_fits(ctx: Context, v: Variant) -> None:
    if not ctx.cuda:
        return
    if ctx.gpus < v.gpus:
        raise Skip(f"needs {v.gpus} GPUs, this machine has {ctx.gpus}")
    import torch

    for i in range(v.gpus):
        free, total = torch.cuda.mem_get_info(i)
        if v.gpu_bytes > free:
            raise Skip(
                f"needs about {v.gpu_bytes / 2**30:.1f} GiB on cuda:{i}, which has {free / 2**30:.1f} GiB free "
                f"of {total / 2**30:.1f} GiB; try a smaller --size or --repeat"
            )


def _all_threads() -> dict[str, Any]:
    """Profiler kwargs recording ops of every host thread (thread pools), where torch supports it."""
    try:
        from torch._C._profiler import _ExperimentalConfig

        return {"experimental_config": _ExperimentalConfig(profile_all_threads=True)}
    except (ImportError, TypeError):
        return {}


def _profile(ctx: Context, step: Callable[[], None], dest: Path) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ctx.cuda else [])
    with profile(activities=acts, **_all_threads()) as prof:
        step()
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp.json.gz", dir=dest.parent)
    os.close(fd)
    os.chmod(tmp, _umask_mode())
    try:
        prof.export_chrome_trace(tmp)  # torch gzips when the name ends in .gz
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    del prof
    if ctx.cuda:
        torch.cuda.synchronize()


def run_variant(ctx: Context, w: Workload, v: Variant, out: Path, force: bool = False) -> dict[str, Any]:
    """Time and profile one variant; return its manifest entry.

    The entry has ``workload``, ``variant``, ``description``, ``status``
    (``ok``, ``skipped``, ``failed`` or ``kept`` for an existing trace not
    overwritten), ``reason`` (for all but ``ok``), ``trace`` (file name or list of
    file names), ``wall_s`` (float seconds of one timed run), ``devices`` used and
    ``params``. Out-of-memory and other errors inside the variant become
    ``failed`` entries rather than exceptions.
    """
    import torch

    entry: dict[str, Any] = {
        "workload": w.name,
        "variant": v.name,
        "description": v.description,
        "params": v.params,
        "device": ctx.device,
        "devices": ([ctx.dev(i) for i in range(v.gpus)] or ["cpu"]) if ctx.cuda else ["cpu"],
    }
    name = trace_name(w.name, v.name)
    dest = out / name
    if v.launcher is None and dest.exists() and not force:
        return {**entry, "status": "kept", "trace": name, "reason": "trace exists; pass --force to record again"}
    step = None
    try:
        _check_fits(ctx, v)
        if v.launcher is not None:
            traces, wall = v.launcher(out, f"{w.name}.{v.name}", force)
            return {**entry, "status": "ok", "trace": traces, "wall_s": wall}
        step = v.setup()
        step()  # warm-up: kernels, allocator, handles
        t0 = time.perf_counter()
        step()
        wall = time.perf_counter() - t0
        _profile(ctx, step, dest)
        return {**entry, "status": "ok", "trace": name, "wall_s": wall}
    except Skip as s:
        return {**entry, "status": "skipped", "reason": str(s)}
    except torch.cuda.OutOfMemoryError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else "CUDA out of memory"
        return {**entry, "status": "failed", "reason": f"out of GPU memory: {first}"}
    except (RuntimeError, ValueError, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return {**entry, "status": "failed", "reason": f"{type(e).__name__}: {first}"}
    finally:
        del step
        gc.collect()
        if ctx.cuda:
            torch.cuda.empty_cache()


def load_manifest(out: Path) -> dict[str, Any]:
    """The manifest in ``out`` as a dict, or a new empty one."""
    p = out / MANIFEST
    if p.exists():
        try:
            return json.loads(p.read_text())
        except (OSError, ValueError):
            pass
    return {"variants": []}


def write_manifest(out: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest.json`` atomically."""
    atomic_write_bytes(out / MANIFEST, (json.dumps(manifest, indent=2, default=str) + "\n").encode())


MIN_FREE_BYTES = 256 * 2**20
"""Free disk space ``record`` asks for before starting (traces are a few MB each)."""


def check_writable(out: Path) -> None:
    """Create ``out`` and make sure a file can be written there and the disk has room.

    Raises:
        OSError: not creatable or writable, or less than :data:`MIN_FREE_BYTES` free.
    """
    out.mkdir(parents=True, exist_ok=True)
    probe = out / f".traceprobe-write-test-{os.getpid()}.tmp"
    probe.write_bytes(b"")
    probe.unlink()
    free = shutil.disk_usage(out).free
    if free < MIN_FREE_BYTES:
        raise OSError(errno.ENOSPC, f"only {free / 2**20:.0f} MiB free on the disk of {out}; need {MIN_FREE_BYTES / 2**20:.0f} MiB")


def _traces_exist(out: Path, entry: dict[str, Any]) -> bool:
    t = entry.get("trace")
    names = t if isinstance(t, list) else [t]
    return bool(names) and all(isinstance(n, str) and (out / n).is_file() for n in names)


def select(names: Iterable[str] | None) -> list[Workload]:
    """Workloads by name (all when ``names`` is empty).

    Raises:
        ValueError: an unknown name, listing the known ones.
    """
    names = list(names or [])
    if not names:
        return list(WORKLOADS.values())
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise ValueError(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(WORKLOADS)}")
    return [WORKLOADS[n] for n in names]


def record(
    out: str | Path,
    workloads: Iterable[str] | None = None,
    *,
    device: str = "auto",
    size: int | None = None,
    repeat: int | None = None,
    force: bool = False,
    resume: bool = False,
    on_entry: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Record the named workloads (all by default) into ``out``.

    A folder that already holds a recording (a ``manifest.json``) is completed
    with ``resume`` (variants recorded ``ok`` whose traces exist are not run
    again) or recorded again with ``force``; without either it is refused.
    Stale temporary files of an interrupted run are removed first. On Ctrl-C the
    running variant is listed as ``interrupted``, the manifest is written, and
    ``KeyboardInterrupt`` propagates: every trace already written is whole.

    Args:
        out: output folder; created if missing.
        workloads: workload names (see :data:`traceprobe.workloads.WORKLOADS`).
        device: ``auto`` (CUDA if available), ``cuda`` or ``cpu``.
        size, repeat: overrides of the workloads' matrix size and repetitions.
        force: overwrite existing traces.
        resume: complete an earlier recording in ``out``.
        on_entry: called with each manifest entry as soon as it is known.

    Returns:
        the manifest dict (also written to ``out/manifest.json``).

    Raises:
        ValueError: unknown workload or device.
        OSError: ``out`` cannot be created or written, or its disk has less than
            ``MIN_FREE_BYTES`` free (checked before any work).
        FileExistsError: ``out`` holds a recording and neither ``resume`` nor ``force``.
    """
    chosen = select(workloads)
    ctx = make_context(device, size, repeat)
    outp = Path(out)
    check_writable(outp)
    if (outp / MANIFEST).exists() and not (resume or force):
        raise FileExistsError(
            f"{outp} already holds a recording (manifest.json); pass --resume to run only what is missing "
            "or --force to record everything again"
        )
    for stale in outp.glob(".*.tmp*"):
        stale.unlink(missing_ok=True)

    manifest = load_manifest(outp)
    previous = {(e.get("workload"), e.get("variant")): e for e in manifest.get("variants", [])}
    manifest.update(
        {
            "traceprobe": __version__,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": sys.argv,
            "environment": environment(),
        }
    )
    for w in chosen:
        for v in w.variants(ctx):
            before = previous.get((w.name, v.name))
            if resume and not force and before and before.get("status") == "ok" and _traces_exist(outp, before):
                entry = {**before, "status": "ok", "resumed": True}
            else:
                try:
                    entry = run_variant(ctx, w, v, outp, force)
                except KeyboardInterrupt:
                    previous[(w.name, v.name)] = {"workload": w.name, "variant": v.name, "status": "interrupted", "reason": "Ctrl-C"}
                    manifest["variants"] = list(previous.values())
                    write_manifest(outp, manifest)
                    raise
                if entry["status"] == "kept" and before:
                    entry = {**before, "status": before.get("status", "ok")}
            previous[(w.name, v.name)] = entry
            manifest["variants"] = list(previous.values())
            write_manifest(outp, manifest)
            if on_entry:
                on_entry(entry)
    return manifest
