"""The ``traceprobe`` command: a thin typer layer over the library.

It parses options, calls :mod:`traceprobe.collect` and the renderers in
:mod:`traceprobe.report`, and prints (through :mod:`traceprobe.console`). It computes
no figure. ``record`` is in :mod:`traceprobe.cli.record`; ``plot``, ``export`` and
``view`` are in :mod:`traceprobe.cli.views`; ``overlap-report``'s first screen, printed as each run is analysed,
in :mod:`traceprobe.cli.stream`.

Exit codes: 0 all good; 1 a ``--min-*`` gate was not met (``overlap-report``) or a
recorded variant failed (``record``); 2 an error: a file could not be read (the
others are still reported), a file could not be written, bad usage; 130 interrupted (Ctrl-C); 143 ended by SIGTERM
(temporary files removed, as on Ctrl-C).
"""

from __future__ import annotations

import gc
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Any

import typer

from ..console import err, one_line, say
from ..console import fail as _fail
from .help import FirstSentenceGroup, PlainUsage
from .job import REPLAY_MEMORY_HELP, given_replay_memory
from .terminate import _TERMINATED, TERMINATED_EXIT
from .terminate import sigterm_as_ctrl_c as _sigterm_as_ctrl_c

app = typer.Typer(
    cls=FirstSentenceGroup,  # each command's first sentence whole in -h
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: option names are never cut, at any width
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    help="Prove whether parallelism actually happened on GPUs: record torch.profiler traces and measure overlap.",
)

__all__ = ["app", "err", "fraction", "main", "one_line", "say"]


SCHEDULER_HELP = ("Dask distributed scheduler (tcp://host:8786): the per-trace work runs on its workers, which read the "
                  "traces (local paths must be visible to them; fsspec URLs are read directly).")


class Format(str, Enum):
    table = "table"
    tsv = "tsv"
    json = "json"
    csv = "csv"
    markdown = "markdown"


_KINDS = {Format.table: "raw", Format.tsv: "text", Format.json: "json", Format.csv: "text", Format.markdown: "text"}
"""How each format's output is escaped (:func:`traceprobe.console.shown_document`): the table's cells are already,
and its colours are escape sequences."""


class Engine(str, Enum):
    native = "native"
    perfetto = "perfetto"


def fraction(value: str) -> float:
    """A fraction option: ``0.9`` or ``90%``; anything else (``90``, ``-0.1``, ``abc``) is a usage error."""
    text = str(value).strip()
    try:
        f = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a fraction: give 0.9 or 90%") from None
    if not 0.0 <= f <= 1.0:
        raise typer.BadParameter(f"{value!r} is not a fraction from 0 to 1 (or 0% to 100%): give 0.9 or 90%")
    return f


def _version(value: bool) -> None:
    if value:
        from ..console import print_line
        from ..version import __version__

        print_line(f"traceprobe {__version__}")
        raise typer.Exit()


ONE_BLAS_THREAD = ("OPENBLAS_NUM_THREADS", "1")
"""Set (where unset) for every command but ``record``, before numpy loads: the analysis multiplies no matrices, while
OpenBLAS (numpy's, and SciPy's, which numba loads) starts a thread per further CPU that spins about 0.1 s: 0.2 s of CPU
a command on 2 CPUs (HTA's 216k-event trace: 1.27 -> 1.06 s). ``record`` runs the user's code, whose BLAS it leaves."""


@app.callback()
def _options(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """Prove whether parallelism actually happened on GPUs: record torch.profiler traces and measure overlap."""
    if ctx.invoked_subcommand != "record":
        os.environ.setdefault(*ONE_BLAS_THREAD)


from . import record  # noqa: E402  - registers record on app, first in the help

record.register(app)


@app.command("overlap-report", cls=PlainUsage)
def overlap_report(
    paths: list[str] = typer.Argument(..., metavar="PATHS...", help="Trace files (.json, .json.gz) or folders of them."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the report to this file instead of stdout."),
    detail: bool = typer.Option(False, "--detail", "-v", help="Table: a panel per trace (busy time per stream, devices, copy/compute, stream and comm/compute overlap, "
                                "CPU/GPU, steps, verdicts, the top 3 findings with their full advice), then across ranks, collectives "
                                "and the stopwatch. Kernels, queue time, time breakdown, per-step tables, host threads and idle gaps: "
                                "--format markdown; idle causes: --format json."),
    min_copy_overlap: float | None = typer.Option(
        None, parser=fraction, metavar="FRACTION",
        help="Exit 1 if a trace's copy/compute overlap (all directions, per device) is below this (0.9 or 90%); "
             "copies judged n/a (DDP's bucket copies) are not gated."),
    min_device_concurrency: float | None = typer.Option(
        None, parser=fraction, metavar="FRACTION",
        help="Exit 1 if a multi-device trace's cross-device concurrency is below this (0.9 or 90%)."),
    max_exposed_comm: float | None = typer.Option(
        None, parser=fraction, metavar="FRACTION",
        help="Exit 1 if a device's exposed communication (no compute beside it) is above this fraction of its window, on any rank."),
    max_idle: float | None = typer.Option(
        None, parser=fraction, metavar="FRACTION", help="Exit 1 if a device is idle for more than this fraction of its window, on any rank."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="Worker processes (default: CPU count); one large trace is decoded by as many."),
    plot: Path | None = typer.Option(None, "--plot", metavar="PNG", help="Also draw each trace's timeline (several traces: <stem>.<trace>.png)."),
    engine: Engine = typer.Option(Engine.native, "--engine", help="perfetto: copy/compute and cross-device figures in SQL (trace_processor_shell)."),
    trace_processor: Path | None = typer.Option(None, "--trace-processor", metavar="PATH",
                                                help="trace_processor_shell for --engine perfetto (default: $TRACEPROBE_TRACE_PROCESSOR, then PATH)."),
    max_bytes: float | None = typer.Option(None, "--max-bytes", metavar="BYTES",
                                           help="Limit on the JSON (decompressed) read at once, shared by the workers: a trace that would pass it is refused, "
                                                "e.g. 2e9 (default: the smaller of half the available memory and 4 GiB)."),
    scheduler: str | None = typer.Option(None, "--scheduler", metavar="ADDRESS", help=SCHEDULER_HELP),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
    all_device_work: bool = typer.Option(False, "--all-device-work", help="Count every device event, also work launched before or after the profiled steps (set aside by default)."),
    align_clocks: bool = typer.Option(False, "--align-clocks", help="Where the ranks' clocks differ beyond the uncertainty of their estimate "
                                      "from collectives, compare skew and waits on one clock."),
    ranks: bool = typer.Option(False, "--ranks", help="Table: every rank's row under its window (its figures and verdicts)."),
    every: bool = typer.Option(False, "--all", help="Table: every window's block, also for a large folder (by default one line "
                               "per window, or per folder, and the blocks of the worst windows)."),
    roofline: str | None = typer.Option(None, "--roofline", metavar="PEAKS",
                                        help="Your device's peaks, e.g. bf16=989,fp32=67,tbps=3.35 (dense TFLOP/s per dtype of fp32, tf32, "
                                             "bf16, fp16, fp8; TB/s), in place of the datasheet's matched from deviceProperties."),
    replay_memory: float | None = typer.Option(None, "--replay-memory", metavar="BYTES", help=REPLAY_MEMORY_HELP),
) -> None:
    """Per window of each run: its ranks collapsed, its top claim (what fixing the cause would give back) and the one
    action it calls for; then the folder's summary. --detail: every table of every trace."""
    if roofline is not None:
        _given_roofline(roofline)
    given_replay_memory(replay_memory)
    if engine is Engine.perfetto:
        _sql_report(paths, trace_processor, debug)
    from ..console import check_outputs, emit, layout, library_warnings, progress_counter, write_files

    check_outputs(paths, {"--output": output, "--plot": plot})
    # what each picture draws is computed where its trace was analysed (the trace does not come back from a
    # worker); the pictures are drawn here, after the analysis
    from ..collect import DEBUG_ENV, analyze_paths, timeline_lanes  # (these import no pandas: see their module)

    if debug:  # (a defect on one trace raises with its traceback, in worker processes too, instead of failing the file)
        os.environ[DEBUG_ENV] = "1"

    drawn: list = []  # (report, its TimelineLanes)
    limit = None if max_bytes is None else int(max_bytes)
    then = timeline_lanes if plot is not None else None

    def on_then(r: Any, lanes: Any) -> None:
        drawn.append((r, lanes))
    width, color = layout(output)
    stream = None
    if fmt is Format.table and not detail and output is None:  # the first screen, as each run is analysed
        from ..report.first_screen import PIPE_WIDTH
        from .stream import Stream

        console = None
        if sys.stdout.isatty():  # (a live region under the lines; colours unless NO_COLOR)
            from rich.console import Console

            console = Console(width=width, force_terminal=True, highlight=False, no_color=not color)
        stream = Stream(width or PIPE_WIDTH, console, ranks=ranks, every=every)
    try:
        if stream is not None and stream.console is not None:
            with stream:
                summary = analyze_paths(paths, jobs=jobs, on_done=stream.one_done, on_files=stream.files, on_part=stream.part,
                                        then=then, on_then=on_then, max_bytes=limit,
                                        all_device_work=all_device_work, scheduler=scheduler, align_clocks=align_clocks)
        else:
            with progress_counter() as count:
                def on_files(files: list[str]) -> None:
                    count.start(files)
                    if stream is not None:
                        stream.files(files)
                summary = analyze_paths(paths, jobs=jobs, on_done=count.done, on_files=on_files,
                                        on_part=None if stream is None else stream.part,
                                        then=then, on_then=on_then, max_bytes=limit,
                                        all_device_work=all_device_work, scheduler=scheduler, align_clocks=align_clocks)
    except Exception as e:  # noqa: BLE001 - last-resort guard, one line unless --debug
        if debug:
            raise
        _fail(f"{type(e).__name__}: {e}")
    finally:
        os.environ.pop(DEBUG_ENV, None)

    errors = [f"{f.path}: {f.error}" for f in summary.failures]
    from ..report.renderers import renderer

    if stream is not None:
        stream.end(summary)
    else:
        errors += emit(renderer(fmt.value, width=width, color=color, detail=detail, ranks=ranks, every=every).render(summary),
                       output, _KINDS[fmt])
    if plot is not None:
        from ..report import image_format
        from ..report import plot as pl

        names = pl.per_trace_paths(plot, [pl.label_of(r.path, r.info, r.rank) for r, _ in drawn])
        with library_warnings():  # (matplotlib's glyph warnings quote a name's characters: escaped, once each)
            items = pl.with_findings([pl.item_of(r, lanes) for r, lanes in drawn], summary)  # (waits, top finding and action)
            errors += write_files(zip(names, (pl.timeline(item, image_format(plot)) for item in items)))
    _finish(errors, list(summary.reports), min_copy_overlap, min_device_concurrency, max_exposed_comm, max_idle)


def _given_roofline(text: str) -> None:
    """Check ``--roofline`` and hand it to the analysis (and its worker processes) through :data:`ROOFLINE_ENV`."""
    import os

    from ..analysis.work.roofline import ROOFLINE_ENV, parse_roofline

    try:
        parse_roofline(text)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--roofline") from None
    os.environ[ROOFLINE_ENV] = text


@app.command("diff", cls=PlainUsage)
def diff_cmd(
    a: Path = typer.Argument(..., metavar="A", help="Before: a trace file or a folder of traces."),
    b: Path = typer.Argument(..., metavar="B", help="After: a trace file or a folder of traces."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the diff to this file instead of stdout."),
    min_copy_overlap: float | None = typer.Option(None, parser=fraction, metavar="FRACTION",
                                                  help="Exit 1 if a trace of B has copy/compute overlap (per device) below this fraction."),
    min_device_concurrency: float | None = typer.Option(None, parser=fraction, metavar="FRACTION",
                                                        help="Exit 1 if a multi-device trace of B has cross-device concurrency below this fraction."),
    max_exposed_comm: float | None = typer.Option(None, parser=fraction, metavar="FRACTION",
                                                  help="Exit 1 if a device of B has exposed communication above this fraction of its window."),
    max_idle: float | None = typer.Option(None, parser=fraction, metavar="FRACTION",
                                          help="Exit 1 if a device of B is idle for more than this fraction of its window."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="Worker processes (default: CPU count)."),
    scheduler: str | None = typer.Option(None, "--scheduler", metavar="ADDRESS", help=SCHEDULER_HELP),
) -> None:
    """Every figure of A and B side by side with the change, and the kernels whose time changed most.

    Traces pair one to one, by file name inside the folders, or by rank and window.
    Exit codes as overlap-report; the gates apply to B.
    """
    from ..console import check_outputs, emit, layout

    check_outputs([a, b], {"--output": output})
    from ..analysis.diff import diff
    from ..collect import analyze_paths
    from ..report import diff_output

    sa = analyze_paths([a], jobs=jobs, scheduler=scheduler)
    sb = analyze_paths([b], jobs=jobs, scheduler=scheduler)
    d = diff(sa, sb, str(a) if a.is_dir() else "", str(b) if b.is_dir() else "")
    why = diff_output.unrelated(d, str(a), str(b), [r.path for r in sa.reports], [r.path for r in sb.reports]) if a.is_dir() and b.is_dir() else ""
    if why:  # (two folders of unrelated traces: nothing printed as if they were a pair)
        _finish([f"{f.path}: {f.error}" for f in (*sa.failures, *sb.failures)] + [why], [], None, None, None, None)
    if fmt is Format.table:
        width, color = layout(output)
        text = diff_output.DiffRenderer(width=width, color=color).render(d)
    elif fmt is Format.tsv:
        text = diff_output.to_tsv(d)
    else:
        text = {Format.json: diff_output.to_json, Format.csv: diff_output.to_csv, Format.markdown: diff_output.to_markdown}[fmt](d)
    errors = [f"{f.path}: {f.error}" for f in (*sa.failures, *sb.failures)] + emit(text, output, _KINDS[fmt])
    if not d.pairs and (sa.reports or sb.reports):
        errors.append(f"nothing to compare: no trace of {a} pairs with one of {b} (by file name, or by rank and window)")
    _finish(errors, list(sb.reports), min_copy_overlap, min_device_concurrency, max_exposed_comm, max_idle)


def _finish(errors: list[str], reports: list, min_copy: float | None, min_devices: float | None,
            max_comm: float | None, max_idle: float | None) -> None:
    """Print errors and unmet gates, one line each; exit 2 on errors, 1 on an unmet gate (gates apply to ``reports``)."""
    from ..report.gates import shortfalls

    for e in errors:
        say(e, "red")
    short = shortfalls(reports, min_copy_overlap=min_copy, min_device_concurrency=min_devices, max_exposed_comm=max_comm, max_idle=max_idle)
    for s in short:
        say(f"gate not met: {s}", "yellow")
    if errors:
        raise typer.Exit(2)
    if short:
        raise typer.Exit(1)

@app.command()
def schema() -> None:
    """Print the JSON Schema (draft 2020-12) of overlap-report --format json."""
    import json

    from ..console import emit
    from ..report.figures import schema as generated

    emit(json.dumps(generated(), indent=2, ensure_ascii=False) + "\n", None, "json")  # (made from the figures' declarations)


def _sql_report(paths: list[str], trace_processor: Path | None, debug: bool) -> None:
    """``overlap-report --engine perfetto``: the SQL figures of each trace, then exit."""
    from ..collect import discover
    from ..console import emit
    from ..errors import TraceFormatError
    from ..reading import load_trace
    from ..report import perfetto_sql as pf

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
            emit(pf.format_sql_figures(pf.sql_figures(load_trace(f), binary)) + "\n", None)
        except TraceFormatError as e:
            errors.append(str(e))
        except Exception as e:  # noqa: BLE001 - trace_processor errors, one line unless --debug
            if debug:
                raise
            errors.append(f"{f}: {type(e).__name__}: {e}")
    for e in errors:
        say(e, "red")
    raise typer.Exit(2 if errors else 0)


from . import views  # noqa: E402  - registers plot, export and view on app

views.register(app)

from . import job  # noqa: E402  - registers job on app

job.register(app)

from . import agent  # noqa: E402  - registers mcp on app

agent.register(app)


def main() -> None:
    """Console-script entry point: exit 0, 1 (a gate not met), 2 (an error), 130 (interrupted), 143 (SIGTERM).

    An exception nothing else caught is a bug, but it still ends in one line and
    exit code 2, never in a traceback and exit code 1 (which means "gate not met").

    On the way out every object still alive is frozen (``gc.freeze``): the interpreter's
    shutdown then skips its garbage collections over pandas' and the reports' objects,
    which took 0.2 s of the 1.3 s a report of HTA's 216k-event trace takes on one CPU.
    Objects are still freed by reference counting; files are closed by their ``with``.
    """
    _sigterm_as_ctrl_c()
    try:
        app()
    except SystemExit:
        if _TERMINATED:  # (unwound as Ctrl-C: temporary files removed; the status says SIGTERM)
            sys.exit(TERMINATED_EXIT)
        raise
    except Exception as e:  # noqa: BLE001 - the last guard
        say(f"error: {type(e).__name__}: {e}", "red")
        sys.exit(2)
    finally:
        gc.freeze()

