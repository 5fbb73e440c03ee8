"""The ``record`` command: the textbook workloads, or your own program, under torch.profiler.

The writing side of the CLI (``traceprobe.recording``); registered on the app by
:mod:`traceprobe.cli`. With ``--perfetto`` each trace is also exported, through
``export``'s own function (:func:`traceprobe.cli.views.export_files`).
"""

from __future__ import annotations

from pathlib import Path

import typer

from ..console import err, one_line, print_line, say
from ..console import fail as _fail

TORCH_MISSING = ("record needs torch, which is not installed: on a machine without a GPU, "
                 "pip install torch --index-url https://download.pytorch.org/whl/cpu; with an NVIDIA GPU, "
                 "pip install 'traceprobe[record]' (torch from PyPI, with CUDA)")
"""The one line ``record`` says without torch (reading, analysing and exporting traces need none)."""


NO_GPU = ("no GPU here: every variant runs on the CPU at small sizes, so its traces hold host threads only: "
          "overlap-report can judge host-thread concurrency, and the device figures will read '-'")
"""What ``record`` says first on a machine without a CUDA GPU (or with ``--device cpu``)."""


def _need_torch() -> None:
    """End the command with exit 2 and :data:`TORCH_MISSING` when torch cannot be imported here."""
    import importlib.util

    try:
        found = importlib.util.find_spec("torch") is not None
    except ImportError:  # (an import hook that refuses it)
        found = False
    if not found:
        _fail(TORCH_MISSING)


def record(
    workloads: list[str] | None = typer.Argument(None, metavar="[WORKLOADS]...", help="Workloads to run (default: all). See --list. With --script/--module: the target's arguments, after --."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Output folder (default: runs/<date-time>; with --script/--module: runs/<target>-<date-time>)."),
    device: str = typer.Option("auto", help="auto (CUDA if available), cuda or cpu."),
    size: int | None = typer.Option(None, help="Matrix size override (elements per side)."),
    repeat: int | None = typer.Option(None, help="Repetitions override (products per batch, steps...). With --script/--module: profiled windows (default 1; 0: until the run ends)."),
    force: bool = typer.Option(False, help="Record everything again, overwriting existing traces."),
    resume: bool = typer.Option(False, help="Complete an earlier recording in --out: run only what is missing."),
    perfetto: bool = typer.Option(False, "--perfetto", help="Also write each trace as a native Perfetto .pftrace with overlap tracks (see export)."),
    list_: bool = typer.Option(False, "--list", help="List the workloads and exit."),
    script: Path | None = typer.Option(None, "--script", help="Run this Python script under the profiler, as python would; its arguments go after --."),
    module: str | None = typer.Option(None, "--module", help="Run this module under the profiler, as python -m would; its arguments go after --."),
    wait: int = typer.Option(1, help="--script/--module with traceprobe.step() calls: steps skipped in each cycle (step 0 is never profiled)."),
    warmup: int = typer.Option(1, help="--script/--module: profiler warm-up steps in each cycle."),
    active: int = typer.Option(3, help="--script/--module: steps recorded in each window, one trace per window."),
    record_shapes: bool = typer.Option(False, "--record-shapes", help="--script/--module: record operator input shapes."),
    with_stack: bool = typer.Option(False, "--with-stack", help="--script/--module: record Python stacks."),
    profile_memory: bool = typer.Option(False, "--profile-memory", help="--script/--module: record tensor memory allocations."),
) -> None:
    """Run experiments under torch.profiler; write one gzipped Chrome trace per variant and manifest.json.

    With --script or --module, run your own program instead (see traceprobe.recording.runner): one trace of
    the whole run, or one per window of steps where it calls traceprobe.step(); the exit code is the program's.
    """
    if not list_:
        _need_torch()
    if script is not None or module is not None:
        if list_ or force or resume or size is not None:
            _fail("--list, --force, --resume and --size apply to the built-in workloads, not to --script/--module")
        _record_target(script, module, workloads or [], out, device, wait, warmup, active, 1 if repeat is None else repeat,
                       record_shapes, with_stack, profile_memory)
    from rich.text import Text

    from ..recording.workloads import WORKLOADS

    if list_:
        for w in WORKLOADS.values():
            print_line(f"{w.name:16} {w.description}")
        return
    import datetime as dt

    from ..fileio import WriteError
    from ..manifest import Entry
    from ..recording import record as rec
    from ..recording.folder_lock import FolderBusy

    outp = out or Path("runs") / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    import sys

    from ..recording.environment import resolve_device

    try:
        on_cpu = resolve_device(device) == "cpu"
    except ValueError as e:
        _fail(str(e))
    if on_cpu:
        say(NO_GPU, "yellow")
    count = {"i": 0, "n": 0}
    tty = sys.stderr.isatty()

    def started(workload: str, variant: str, i: int, n: int) -> None:
        count.update(i=i, n=n)
        if tty:  # what runs now, on one line the result replaces
            err.print(Text(one_line(f"{i}/{n} {workload}.{variant} ..."), style="dim"), end="\r", soft_wrap=True, highlight=False)

    def show(e: Entry) -> None:
        style = {"ok": "green", "kept": "cyan", "skipped": "yellow"}.get(e.status, "red")
        wall = f"  {e.wall_s * 1e3:,.1f} ms" if e.wall_s is not None else ""
        why = f"  ({e.reason})" if e.reason else ""
        line = Text(f"{count['i']}/{count['n']} ") + Text(f"{e.status:8}", style=style) + Text(one_line(f" {e.workload}.{e.variant}{wall}{why}"))
        if tty:
            line.append(" " * max(0, 8 + len(e.workload) + len(e.variant) - len(line.plain)))
        err.print(line, soft_wrap=True, highlight=False)

    try:
        manifest = rec.record(outp, workloads, device=device, size=size, repeat=repeat, force=force, resume=resume, on_entry=show,
                              on_start=started)
    except (ValueError, FileExistsError, FolderBusy, WriteError) as e:
        _fail(str(e))
    except KeyboardInterrupt:
        _fail(f"interrupted: the traces written so far are whole and listed in {outp / 'manifest.json'}; "
              f"finish with: traceprobe record --out {outp} --resume", code=130)
    except OSError as e:
        _fail(f"cannot write to {outp}: {e.strerror or e}")
    failed = [e for e in manifest.variants if e.status == "failed"]
    if perfetto:
        _export_perfetto([outp / t for e in manifest.variants if e.status == "ok" for t in e.traces], outp)
    say(f"traces and manifest in {outp}; next: traceprobe overlap-report {outp}")
    if failed:
        raise typer.Exit(1)


def _record_target(script: Path | None, module: str | None, args: list[str], out: Path | None, device: str,
                   wait: int, warmup: int, active: int, repeat: int, record_shapes: bool, with_stack: bool, profile_memory: bool) -> None:
    """``record --script/--module``: run the target under traceprobe.recording.runner and exit with its exit code."""
    from ..fileio import WriteError
    from ..recording import runner
    from ..recording.environment import resolve_device
    from ..recording.folder_lock import FolderBusy

    try:
        cuda = resolve_device(device) == "cuda"
        code, cap = runner.run(script=script, module=module, args=args, out=out, wait=wait, warmup=warmup, active=active,
                               repeat=repeat, record_shapes=record_shapes, with_stack=with_stack, profile_memory=profile_memory,
                               cuda=cuda)
    except runner.TargetNotFound as e:
        _fail(str(e), code=e.code)
    except (ValueError, FolderBusy, WriteError) as e:
        _fail(str(e))
    except OSError as e:
        _fail(f"cannot write to {out}: {e.strerror or e}")
    names = ", ".join(p.name for p in cap.trace_paths) or "no trace"
    say(f"traceprobe: {names} and manifest in {cap.out}; next: traceprobe overlap-report {cap.out}")
    raise typer.Exit(code)


def _export_perfetto(traces: list[Path], out_dir: Path) -> None:
    """Write ``<stem>.pftrace`` beside each trace (``record --perfetto``)."""
    from .views import export_files

    for e in export_files(traces, out_dir, perfetto=True, json_=False, jobs=None):
        say(e, "red")


def register(app: typer.Typer) -> None:
    """Add ``record`` to ``app``."""
    app.command()(record)
