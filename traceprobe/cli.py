"""The ``traceprobe`` command: a thin typer layer over the library.

It parses options, calls :mod:`traceprobe.recording`, :mod:`traceprobe.collect` and
the renderers in :mod:`traceprobe.report`, and prints. It computes no figure.

Exit codes of ``overlap-report``: 0 all good; 1 a ``--min-*`` gate was not met;
2 a file could not be read (the others are still reported) or bad usage.
"""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Prove whether parallelism actually happened on GPUs: record torch.profiler traces and measure overlap.",
)
err = Console(stderr=True)


class Format(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    markdown = "markdown"


class Engine(str, Enum):
    native = "native"
    perfetto = "perfetto"


_ESCAPES = {c: f"\\x{c:02x}" for c in [*range(32), 127]} | {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}


def one_line(text: str) -> str:
    """``text`` with newlines and other control characters escaped (``\\n``, ``\\x1b``), so
    that a name from a trace or a path can neither split nor forge a message line."""
    return str(text).translate(_ESCAPES)


def say(msg: str, style: str = "") -> None:
    """Print one message line on stderr: literally (no rich markup, so ``[/red]`` in a
    kernel or folder name prints as it is), never wrapped, control characters escaped."""
    err.print(Text(one_line(msg), style=style), soft_wrap=True, highlight=False)


def _fail(msg: str, code: int = 2) -> None:
    err.print(Text("error: ", style="bold red") + Text(one_line(msg)), soft_wrap=True, highlight=False)
    raise typer.Exit(code)


@app.command()
def record(
    workloads: list[str] | None = typer.Argument(None, help="Workloads to run (default: all). See --list. With --script/--module: the target's arguments, after --."),
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
    if script is not None or module is not None:
        if list_ or force or resume or size is not None:
            _fail("--list, --force, --resume and --size apply to the built-in workloads, not to --script/--module")
        _record_target(script, module, workloads or [], out, device, wait, warmup, active, 1 if repeat is None else repeat,
                       record_shapes, with_stack, profile_memory)
    from .recording.workloads import WORKLOADS

    if list_:
        for w in WORKLOADS.values():
            typer.echo(f"{w.name:16} {w.description}")
        return
    import datetime as dt

    from .fileio import WriteError
    from .manifest import Entry
    from .recording import record as rec
    from .recording.folder_lock import FolderBusy

    outp = out or Path("runs") / dt.datetime.now().strftime("%Y%m%d-%H%M%S")

    def show(e: Entry) -> None:
        style = {"ok": "green", "kept": "cyan", "skipped": "yellow"}.get(e.status, "red")
        wall = f"  {e.wall_s * 1e3:,.1f} ms" if e.wall_s is not None else ""
        why = f"  ({e.reason})" if e.reason else ""
        err.print(Text(f"{e.status:8}", style=style) + Text(one_line(f" {e.workload}.{e.variant}{wall}{why}")), soft_wrap=True, highlight=False)

    try:
        manifest = rec.record(outp, workloads, device=device, size=size, repeat=repeat, force=force, resume=resume, on_entry=show)
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
    from .fileio import WriteError
    from .recording import runner
    from .recording.environment import resolve_device
    from .recording.folder_lock import FolderBusy

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


@app.command("overlap-report")
def overlap_report(
    paths: list[Path] = typer.Argument(..., help="Trace files (.json, .json.gz) or folders of them."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
    output: Path | None = typer.Option(None, "--output", help="Write the report to this file instead of stdout."),
    min_copy_overlap: float | None = typer.Option(None, help="Exit 1 if a trace's copy/compute overlap (all directions, per device) is below this fraction."),
    min_device_concurrency: float | None = typer.Option(None, help="Exit 1 if a multi-device trace's cross-device concurrency is below this fraction."),
    max_exposed_comm: float | None = typer.Option(None, help="Exit 1 if a device's exposed communication (no compute beside it) is above this fraction of its window, on any rank."),
    max_idle: float | None = typer.Option(None, help="Exit 1 if a device is idle for more than this fraction of its window, on any rank."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="Worker processes (default: CPU count)."),
    debug: bool = typer.Option(False, help="Show tracebacks."),
    all_device_work: bool = typer.Option(False, "--all-device-work", help="Count every device event, also work launched before or after the profiled steps (set aside by default)."),
    plot: Path | None = typer.Option(None, "--plot", help="Also draw each trace's timeline into this PNG (several traces: <stem>.<trace>.png)."),
    engine: Engine = typer.Option(Engine.native, "--engine", help="perfetto: compute the copy/compute and cross-device figures in SQL with trace_processor_shell instead (printed as text)."),
    trace_processor: Path | None = typer.Option(None, "--trace-processor", help="trace_processor_shell for --engine perfetto (default: $TRACEPROBE_TRACE_PROCESSOR, then PATH)."),
    max_bytes: float | None = typer.Option(None, "--max-bytes", help="Refuse a trace whose JSON (decompressed) is larger than this many bytes, e.g. 2e9 (default: half the available memory)."),
) -> None:
    """Per-stream busy time, copy/compute, cross-device, stream, comm and CPU/GPU overlap, with verdicts."""
    if engine is Engine.perfetto:
        _sql_report(paths, trace_processor, debug)
    _check_outputs(paths, {"--output": output, "--plot": plot})
    from rich.progress import Progress

    from .collect import analyze_paths
    from .report import csv_long, json_document, markdown

    drawn: list = []  # (report, image bytes), drawn where each trace was analysed
    then = None
    if plot is not None:
        from functools import partial

        from .report import plot as pl

        then = partial(pl.timeline_of, fmt=pl.image_format(plot))
    try:
        with Progress(console=err, transient=True, disable=not err.is_terminal) as progress:
            task = progress.add_task("analysing traces", total=None)
            summary = analyze_paths(paths, jobs=jobs, on_done=lambda _: progress.advance(task),
                                    then=then, on_then=lambda r, png: drawn.append((r, png)),
                                    max_bytes=None if max_bytes is None else int(max_bytes), all_device_work=all_device_work)
    except Exception as e:  # noqa: BLE001 - last-resort guard, one line unless --debug
        if debug:
            raise
        _fail(f"{type(e).__name__}: {e}")

    errors = [f"{f.path}: {f.error}" for f in summary.failures]
    if fmt is Format.table:
        text = _table_text(summary, output)
    else:
        text = {Format.json: json_document.to_json, Format.csv: csv_long.to_csv, Format.markdown: markdown.to_markdown}[fmt](summary)
    errors += _emit(text, output)
    if plot is not None:
        errors += _write_timelines(plot, drawn)
    for e in errors:
        say(e, "red")

    from .analysis.gates import shortfalls

    short = shortfalls(list(summary.reports), min_copy_overlap, min_device_concurrency, max_exposed_comm, max_idle)
    for s in short:
        say(f"below threshold: {s}", "yellow")
    if errors:
        raise typer.Exit(2)
    if short:
        raise typer.Exit(1)



@app.command("diff")
def diff_cmd(
    a: Path = typer.Argument(..., help="Before: a trace file or a folder of traces."),
    b: Path = typer.Argument(..., help="After: a trace file or a folder of traces."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
    output: Path | None = typer.Option(None, "--output", help="Write the diff to this file instead of stdout."),
    min_copy_overlap: float | None = typer.Option(None, help="Exit 1 if a trace of B has copy/compute overlap (per device) below this fraction."),
    min_device_concurrency: float | None = typer.Option(None, help="Exit 1 if a multi-device trace of B has cross-device concurrency below this fraction."),
    max_exposed_comm: float | None = typer.Option(None, help="Exit 1 if a device of B has exposed communication above this fraction of its window."),
    max_idle: float | None = typer.Option(None, help="Exit 1 if a device of B is idle for more than this fraction of its window."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="Worker processes (default: CPU count)."),
) -> None:
    """Every figure of A and B side by side with the change, and the kernels whose time changed most.

    Traces pair one to one, by file name inside the folders, or by rank and window.
    Exit codes as overlap-report; the gates apply to B.
    """
    _check_outputs([a, b], {"--output": output})
    from .analysis.diff import diff
    from .analysis.gates import shortfalls
    from .collect import analyze_paths
    from .report import diff_output

    sa, sb = analyze_paths([a], jobs=jobs), analyze_paths([b], jobs=jobs)
    d = diff(sa, sb, str(a) if a.is_dir() else "", str(b) if b.is_dir() else "")
    if fmt is Format.table:
        if output is None:
            diff_output.render(Console(), d)
            text = None
        else:
            import io

            buf = io.StringIO()
            diff_output.render(Console(file=buf, width=140, no_color=True), d)
            text = buf.getvalue()
    else:
        text = {Format.json: diff_output.to_json, Format.csv: diff_output.to_csv, Format.markdown: diff_output.to_markdown}[fmt](d)
    errors = [f"{f.path}: {f.error}" for f in (*sa.failures, *sb.failures)] + _emit(text, output)
    for e in errors:
        say(e, "red")
    short = shortfalls(list(sb.reports), min_copy_overlap, min_device_concurrency, max_exposed_comm, max_idle)
    for s in short:
        say(f"below threshold: {s}", "yellow")
    if errors:
        raise typer.Exit(2)
    if short:
        raise typer.Exit(1)

def _check_outputs(paths: list, outputs: dict[str, Path | None]) -> None:
    """Refuse, in one line and before any work, an output that is one of the input
    traces or whose folder does not exist."""
    from .collect import discover

    given = {o: p for o, p in outputs.items() if p is not None}
    if not given:
        return
    inputs = {Path(p).resolve() for p in paths if not _is_url(p)}
    inputs |= {Path(f).resolve() for f in discover(paths)[0] if not _is_url(f)}
    for option, path in given.items():
        if path.resolve() in inputs:
            _fail(f"{option} {path} is one of the input traces: refusing to overwrite it")
        if not path.parent.is_dir():
            _fail(f"cannot write {path}: no folder {path.parent}")


def _is_url(p: object) -> bool:
    return "://" in str(p)


def _table_text(summary, output: Path | None) -> str | None:
    """The table for a file (140 columns, no colour), or None: printed to the terminal as it is rendered."""
    from .report import table

    if output is None:
        table.render(Console(), summary)
        return None
    import io

    buf = io.StringIO()
    table.render(Console(file=buf, width=140, no_color=True), summary)
    return buf.getvalue()


def _emit(text: str | None, output: Path | None) -> list[str]:
    """Write ``text`` to ``output`` atomically, or to stdout; the error, if any, as one line."""
    from .fileio import WriteError, atomic_write

    if text is None:
        return []
    if output is None:
        sys.stdout.write(text)
        return []
    try:
        atomic_write(output, text, compress=False)
    except WriteError as e:
        return [str(e)]
    return []


def _sql_report(paths: list[Path], trace_processor: Path | None, debug: bool) -> None:
    """``overlap-report --engine perfetto``: the SQL figures of each trace, then exit."""
    from . import perfetto_sql as pf
    from .collect import discover
    from .errors import TraceFormatError
    from .trace import load_trace

    try:
        binary = pf.find_trace_processor(trace_processor)
    except FileNotFoundError as e:
        _fail(str(e))
    if binary is None:
        _fail(f"--engine perfetto needs trace_processor_shell: pass --trace-processor PATH or set {pf.ENV_TRACE_PROCESSOR}")
    files, failures = discover(paths)
    errors = [f"{x.path}: {x.error}" for x in failures]
    for f in files:
        try:
            typer.echo(pf.format_sql_figures(pf.sql_figures(load_trace(f), binary)))
        except TraceFormatError as e:
            errors.append(str(e))
        except Exception as e:  # noqa: BLE001 - trace_processor errors, one line unless --debug
            if debug:
                raise
            errors.append(f"{f}: {type(e).__name__}: {e}")
    for e in errors:
        say(e, "red")
    raise typer.Exit(2 if errors else 0)


@app.command()
def export(
    paths: list[Path] = typer.Argument(..., help="Trace files (.json, .json.gz) or folders of them."),
    perfetto: bool = typer.Option(False, "--perfetto", help="Write a native Perfetto trace <name>.pftrace with overlap tracks, counters, flows and verdicts."),
    json_: bool = typer.Option(False, "--json", help="Write Chrome JSON <name>.perfetto.json.gz whose slices nest on every track, so Perfetto draws all of them."),
    out_dir: Path = typer.Option(Path("."), "--out-dir", "-o", help="Folder for the files written."),
) -> None:
    """Rewrite traces for ui.perfetto.dev: a native .pftrace (--perfetto) and/or corrected Chrome JSON (--json)."""
    if not (perfetto or json_):
        _fail("choose --perfetto, --json or both")
    from .analysis.report import overlap_report
    from .collect import discover
    from .errors import TraceFormatError
    from .report import chrome
    from .report import perfetto as pf
    from .trace import load_trace

    files, failures = discover(paths)
    errors = [f"{x.path}: {x.error}" for x in failures]
    for f, stem in zip(files, chrome.unique_stems(files)):
        try:
            trace = load_trace(f)
            out_dir.mkdir(parents=True, exist_ok=True)
            if perfetto:
                typer.echo(pf.write_perfetto(trace, out_dir / f"{stem}.pftrace", overlap_report(trace)).describe())
            if json_:
                typer.echo(chrome.write_chrome_json(trace, out_dir / f"{stem}.perfetto.json.gz").describe())
        except TraceFormatError as e:
            errors.append(str(e))
        except OSError as e:
            errors.append(f"{f}: cannot write to {out_dir}: {e.strerror or e}")
    for e in errors:
        say(e, "red")
    if errors:
        raise typer.Exit(2)


def _export_perfetto(traces: list[Path], out_dir: Path) -> None:
    """Write ``<stem>.pftrace`` beside each trace (``record --perfetto``)."""
    from .analysis.report import overlap_report
    from .errors import TraceFormatError
    from .report import chrome
    from .report import perfetto as pf
    from .trace import load_trace

    for f, stem in zip(traces, chrome.unique_stems(traces)):
        try:
            trace = load_trace(f)
            say(pf.write_perfetto(trace, out_dir / f"{stem}.pftrace", overlap_report(trace)).describe())
        except TraceFormatError as e:
            say(e, "red")


@app.command("plot")
def plot_cmd(
    paths: list[Path] = typer.Argument(..., help="Trace files (.json, .json.gz) or folders of them."),
    output: Path = typer.Option(..., "--output", "-o", help="PNG to write (several traces without --compare: <stem>.<trace>.png)."),
    compare: bool = typer.Option(False, "--compare", help="Stack the traces on one time axis, each from its own first device event."),
    title: str | None = typer.Option(None, help="Title of the --compare figure."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="Worker processes (default: CPU count)."),
) -> None:
    """Draw traces: one lane per device and stream, copies, kernels and communication, overlap shaded, verdicts on top."""
    _check_outputs(paths, {"--output": output})
    from functools import partial

    from .collect import analyze_paths
    from .report import plot as pl

    drawn: list = []
    if compare:  # every trace in this process, drawn together
        summary = analyze_paths(paths, jobs=1, then=pl.item_of, on_then=lambda _, item: drawn.append(item))
        errors = [f"{f.path}: {f.error}" for f in summary.failures]
        if drawn:
            errors += _write_pictures(output, [(output, pl.compare(drawn, title, pl.image_format(output)))])
    else:
        summary = analyze_paths(paths, jobs=jobs, then=partial(pl.timeline_of, fmt=pl.image_format(output)),
                                on_then=lambda r, png: drawn.append((r, png)))
        errors = [f"{f.path}: {f.error}" for f in summary.failures] + _write_timelines(output, drawn)
    for e in errors:
        say(e, "red")
    if errors:
        raise typer.Exit(2)


def _write_timelines(output: Path, drawn: list) -> list[str]:
    """Write each ``(report, image bytes)`` to :func:`~traceprobe.report.plot.per_trace_paths`; the errors, one line each."""
    from .report import plot as pl

    names = pl.per_trace_paths(output, [pl.label_of(r.path, r.info, r.rank) for r, _ in drawn])
    return _write_pictures(output, [(name, png) for name, (_, png) in zip(names, drawn)])


def _write_pictures(output: Path, pictures: list[tuple[Path, bytes]]) -> list[str]:
    """Write ``(path, bytes)`` pairs atomically, saying ``wrote PATH`` for each; the errors, one line each."""
    from .fileio import WriteError, atomic_write_bytes

    errors = []
    for path, data in pictures:
        try:
            atomic_write_bytes(path, data)
            say(f"wrote {path}")
        except WriteError as e:
            errors.append(str(e))
    return errors


def main() -> None:
    """Console-script entry point: exit 0, 1 (a gate not met), 2 (an error), 130 (interrupted).

    An exception nothing else caught is a bug, but it still ends in one line and
    exit code 2, never in a traceback and exit code 1 (which means "gate not met").
    """
    try:
        app()
    except Exception as e:  # noqa: BLE001 - the last guard
        say(f"error: {type(e).__name__}: {e}", "red")
        sys.exit(2)
