"""Run workloads' variants under torch.profiler; write traces and a manifest.

For each variant: check the machine has what it needs (GPUs, GPU memory), set it
up, run it once to warm up, time :data:`TIMED_RUNS` runs on the wall clock (each
ends synchronized, as a stopwatch around the loop times it; ``wall_s`` is their median, every run is
in ``wall_runs_s``), then run it once more under
``torch.profiler.profile(activities=[CPU, CUDA])`` (CUDA only where available) and
export a gzipped Chrome trace ``<workload>.<variant>.pt.trace.json.gz``.

Every file is written atomically (:mod:`traceprobe.fileio`). ``manifest.json``
(:mod:`traceprobe.manifest`) is rewritten after every variant, and lists a
variant as ``running`` while it runs, so an interrupted run leaves a manifest
that says what is whole. The folder is locked for the whole run
(:mod:`traceprobe.recording.folder_lock`): a second ``record`` into it is refused.
"""

from __future__ import annotations

import datetime as _dt
import gc
import gzip
import signal
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import manifest as mf
from ..fileio import remove_stale_temps
from ..version import __version__
from .environment import machine, resolve_device
from .folder_lock import FolderLock
from .quiet import kineto_quiet
from .trace_files import check_writable, write_trace
from .workloads import WORKLOADS, Context, Skip, Variant, Workload

TIMED_RUNS = 3
"""Wall-clock runs of each in-process variant: enough for a median, and for a reader
to see how much one run varies (a single run on a busy CPU can be off by 2x)."""


def make_context(device: str = "auto", size: int | None = None, repeat: int | None = None) -> Context:
    """A :class:`Context` for ``device`` (see :func:`~traceprobe.recording.environment.resolve_device`).

    Raises:
        ValueError: ``device`` is not auto, cuda or cpu, or cuda without a CUDA device.
    """
    use = resolve_device(device)
    gpus = 0
    if use == "cuda":
        import torch

        gpus = torch.cuda.device_count()
    return Context(device=use, gpus=gpus, size=size, repeat=repeat)


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
    with kineto_quiet(), profile(activities=acts, **_all_threads()) as prof:
        step()
    write_trace(prof, dest.parent, lambda _: dest.name, exclusive=False)
    del prof
    if ctx.cuda:
        torch.cuda.synchronize()


def trace_complete(path: Path) -> bool:
    """Whether ``path`` is a whole gzipped trace: the gzip stream ends with a good CRC and the JSON with ``}``."""
    tail = b""
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                tail = (tail + chunk)[-64:]
    except (OSError, EOFError, zlib.error):
        return False
    return tail.rstrip().endswith(b"}")


def run_variant(ctx: Context, w: Workload, v: Variant, out: Path, force: bool = False) -> mf.Entry:
    """Time and profile one variant; return its manifest entry.

    Status ``ok``; ``kept`` when its trace(s) exist and not ``force`` (not run);
    ``skipped`` when the machine lacks what it needs; ``failed`` for an
    out-of-memory or other error inside the variant (never raised). ``wall_s``
    is the median of the :data:`TIMED_RUNS` timed runs (``wall_runs_s``), float seconds.
    """
    import torch

    devices = ([ctx.dev(i) for i in range(v.gpus)] or ["cpu"]) if ctx.cuda else ["cpu"]
    names = v.trace_names(w.name)
    entry = mf.Entry(w.name, v.name, "ok", names, description=ctx.describe(v.description), params=v.params, device=ctx.device, devices=devices)
    if not force and all((out / n).exists() for n in names):
        entry.status, entry.reason = "kept", "trace exists; pass --force to record again"
        return entry
    step = None
    try:
        _check_fits(ctx, v)
        if v.launcher is not None:
            for n in names:  # so a run that writes nothing cannot pass off old traces as new
                (out / n).unlink(missing_ok=True)
            entry.wall_s = v.launcher(out, w.name)
            missing = [n for n in names if not (out / n).is_file()]
            if missing:
                raise RuntimeError(f"the ranks finished but wrote no {', '.join(missing)}")
            return entry
        step = v.setup()
        step()  # warm-up: kernels, allocator, handles
        runs = []
        for _ in range(TIMED_RUNS):
            t0 = time.perf_counter()
            step()
            runs.append(time.perf_counter() - t0)
        entry.wall_runs_s, entry.wall_s = runs, statistics.median(runs)
        entry.runs_before = 1 + len(runs)  # (the warm-up run and the timed runs: the profiled run is not the first)
        _profile(ctx, step, out / names[0])
        return entry
    except Skip as s:
        entry.status, entry.reason, entry.traces = "skipped", str(s), []
    except torch.cuda.OutOfMemoryError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else "CUDA out of memory"
        entry.status, entry.reason, entry.traces = "failed", f"out of GPU memory: {first}", []
    except (RuntimeError, ValueError, OSError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        entry.status, entry.reason, entry.traces = "failed", f"{type(e).__name__}: {first}", []
    finally:
        del step
        gc.collect()
        if ctx.cuda:
            torch.cuda.empty_cache()
    return entry


def _adopt(out: Path, w: Workload, v: Variant, before: mf.Entry | None) -> mf.Entry | None:
    """On ``resume``: the entry of traces an interrupted run left whole, or None to run the variant.

    Traces listed ``ok`` are kept. Traces on disk but not listed (the run was
    killed after writing them, or its torchrun ranks went on) are adopted when
    every rank's file is there and whole (no wall time: it was never noted);
    otherwise they are removed, and the variant runs again.
    """
    names = v.trace_names(w.name)
    present = [n for n in names if (out / n).is_file()]
    if before is not None and before.status == "ok" and before.traces and all((out / n).is_file() for n in before.traces):
        before.extra["resumed"] = True
        return before
    if present and len(present) == len(names) and all(trace_complete(out / n) for n in names):
        return mf.Entry(w.name, v.name, "ok", names, description=v.description, params=v.params,
                        reason="adopted: written by an interrupted run, which noted no wall time", extra={"adopted": True})
    for n in present:
        (out / n).unlink(missing_ok=True)
    return None


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


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a kill, a scheduler's time limit) ends the run as Ctrl-C does: children killed, manifest written."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def record(
    out: str | Path,
    workloads: Iterable[str] | None = None,
    *,
    device: str = "auto",
    size: int | None = None,
    repeat: int | None = None,
    force: bool = False,
    resume: bool = False,
    on_entry: Callable[[mf.Entry], None] | None = None,
    on_start: Callable[[str, str, int, int], None] | None = None,
) -> mf.Manifest:
    """Record the named workloads (all by default) into ``out``.

    A folder that already holds a recording (a ``manifest.json``) is completed
    with ``resume`` (whole traces are kept or adopted, see :func:`_adopt`; the
    rest runs) or recorded again with ``force``; without either it is refused.
    Temporary files of an interrupted run are removed first (by their exact
    name pattern only). On Ctrl-C or SIGTERM the running variant is listed as
    ``interrupted``, the manifest is written, the variant's child processes are
    killed, and ``KeyboardInterrupt`` propagates: every trace written is whole.

    Args:
        out: output folder; created if missing.
        workloads: workload names (see :data:`traceprobe.recording.workloads.WORKLOADS`).
        device: ``auto`` (CUDA if available), ``cuda`` or ``cpu``.
        size, repeat: overrides of the workloads' matrix size and repetitions.
        force: overwrite existing traces.
        resume: complete an earlier recording in ``out``.
        on_entry: called with each manifest entry as soon as it is known.
        on_start: called as each variant starts (or is checked, with ``resume``), with its
            workload, variant, number (from 1) and the number of variants to run.

    Returns:
        the :class:`~traceprobe.manifest.Manifest` (also written to ``out/manifest.json``).

    Raises:
        ValueError: unknown workload or device; a ``manifest.json`` in ``out``
            that cannot be read (:class:`~traceprobe.manifest.ManifestError`) without ``force``.
        OSError: ``out`` cannot be created or written, or its disk has less than
            ``MIN_FREE_BYTES`` free (checked before any work); another recording
            holds ``out`` (:class:`~traceprobe.recording.folder_lock.FolderBusy`).
        FileExistsError: ``out`` holds a recording and neither ``resume`` nor ``force``.
    """
    chosen = select(workloads)
    ctx = make_context(device, size, repeat)
    outp = Path(out)
    check_writable(outp)
    with FolderLock(outp), _sigterm_as_interrupt():
        if mf.path_of(outp).exists() and not (resume or force):
            raise FileExistsError(
                f"{outp} already holds a recording (manifest.json); pass --resume to run only what is missing "
                "or --force to record everything again"
            )
        remove_stale_temps(outp)
        try:
            manifest = mf.load(outp)
        except mf.ManifestError:
            if not force:
                raise
            manifest = mf.Manifest()
        previous = {e.key: e for e in manifest.variants}
        manifest.traceprobe = __version__
        manifest.created = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        manifest.command = list(sys.argv)
        manifest.environment = machine()

        def save(key: tuple[str, str], entry: mf.Entry) -> None:
            previous[key] = entry
            manifest.variants = list(previous.values())
            mf.save(outp, manifest)

        plan = [(w, v) for w in chosen for v in w.variants(ctx)]
        for i, (w, v) in enumerate(plan, 1):
            if on_start:
                on_start(w.name, v.name, i, len(plan))
            key = (w.name, v.name)
            entry = _adopt(outp, w, v, previous.get(key)) if resume and not force else None
            if entry is None:
                save(key, mf.Entry(w.name, v.name, "running", v.trace_names(w.name), description=ctx.describe(v.description)))
                try:
                    entry = run_variant(ctx, w, v, outp, force)
                except KeyboardInterrupt:
                    for n in v.trace_names(w.name) if v.launcher else []:  # ranks killed part way: an incomplete set
                        (outp / n).unlink(missing_ok=True)
                    save(key, mf.Entry(w.name, v.name, "interrupted", [], description=ctx.describe(v.description), reason="interrupted (Ctrl-C or SIGTERM)"))
                    raise
            save(key, entry)
            if on_entry:
                on_entry(entry)
        return manifest
