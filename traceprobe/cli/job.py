"""``traceprobe job``: the whole-job report of a folder of summaries or traces (:mod:`traceprobe.analysis.job.job`)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..console import check_outputs, say

if TYPE_CHECKING:
    from ..analysis.job.window_replay import Mapper

REPLAY_MEMORY_HELP = ("The memory a window's replay (what-ifs, critical path) may take, e.g. 16e9; a window of several ranks that "
                      "needs more is not replayed, with a line saying so (default: the larger of 2 GB and half the available memory).")


def given_replay_memory(value: float | None) -> None:
    """Hand ``--replay-memory`` to the analysis through :data:`traceprobe.analysis.causal.replay_memory.REPLAY_MEMORY_ENV`
    (nothing where not given)."""
    if value is not None:
        import os

        from ..analysis.causal.replay_memory import REPLAY_MEMORY_ENV

        os.environ[REPLAY_MEMORY_ENV] = str(int(value))


class JobFormat(str, Enum):
    text = "text"
    json = "json"


def job_cmd(
    paths: list[str] = typer.Argument(..., metavar="PATHS...", help="Summaries (*.summary.json) or traces, or folders of them."),
    fmt: JobFormat = typer.Option(JobFormat.text, "--format", "-f", help="Output format."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the report to this file instead of stdout."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", help="Worker processes (default: CPU count)."),
    align_clocks: bool = typer.Option(False, "--align-clocks", help="Where the ranks' clocks differ beyond the uncertainty of their estimate "
                                      "from collectives, compare skew and waits on one clock."),
    top: int = typer.Option(5, "--top", help="Ranks named per list (stragglers, outliers x2)."),
    max_bytes: float | None = typer.Option(None, "--max-bytes", metavar="BYTES",
                                           help="Limit on the memory the files read take (a trace's JSON, a summary's transfers), "
                                                "shared by the workers, e.g. 2e9 (default: the smaller of half the available memory and 4 GiB)."),
    replay_memory: float | None = typer.Option(None, "--replay-memory", metavar="BYTES", help=REPLAY_MEMORY_HELP),
) -> None:
    """Per window: every figure's min, median, p95 and max across ranks, the outlier ranks and why, the ranks that
    arrived last at collectives per process group and the wait they caused, the straggler's cause, the clocks."""
    check_outputs(paths, {"--output": output})
    given_replay_memory(replay_memory)
    from ..analysis.job.job import job_json, job_report, job_report_from_summaries
    from ..collect import analyze_paths, discover
    from ..console import emit
    from ..report.job_text import job_text
    from ..summary_file import is_summary

    files, failures = discover(paths)
    if files and all(is_summary(f) for f in files) and not align_clocks:  # thousands of ranks: no report built
        from ..reading.files import share_limit, unshare_limit

        share_limit(None if max_bytes is None else int(max_bytes))  # (every rank's transfers are held at once: counted together)
        try:  # (each file checked as overlap-report checks them: every file left out is one line)
            job, more = job_report_from_summaries(files, None if replay_memory is None else int(replay_memory), _summary_reader(files, jobs))
        finally:
            unshare_limit()
        failures += more
    else:
        summary = analyze_paths(paths, jobs=jobs, align_clocks=align_clocks, max_bytes=None if max_bytes is None else int(max_bytes))
        job, failures = job_report(summary), list(summary.failures)
        for note in (n for run in summary.runs for n in run.notes):  # a trace the manifest lacked, joined by its own rank
            say(f"warning: {note}", "yellow")
        for w in summary.warnings:  # a window counting a rank twice (summaries beside traces of another run) is said
            if " traces in window " in w:
                say(f"warning: {w}: its ranks are counted from every file of the window (traces of another run beside "
                    "the summaries?); give the summaries or the traces alone", "yellow")
            elif ": not replayed: " in w:  # (a window over the replay's memory budget)
                say(f"warning: {w}", "yellow")
    if fmt is JobFormat.text:
        from ..console import layout
        from ..report.first_screen import PIPE_WIDTH

        text = job_text(job, top, layout(output)[0] or PIPE_WIDTH)  # (the terminal's width; a pipe's or a file's as the first screen's)
    else:
        text = job_json(job)
    errors = [f"{f.path}: {f.error}" for f in failures] + emit(text, output, fmt.value if fmt is JobFormat.json else "text")
    for e in errors:
        say(e, "red")
    if errors:
        raise typer.Exit(2)


def _summary_reader(files: list, jobs: int | None) -> Mapper:
    """How ``job`` reads its summaries and the graphs of the windows it replays (``job_report_from_summaries``'s
    ``mapper``): in ``--jobs`` worker processes (default: one per CPU; none for files too small to pay for them,
    :func:`~traceprobe.collect.processes.local_jobs`), each file read and checked where it is read, a worker's death
    on a file that file's error."""
    from functools import partial

    from ..collect.execution import map_items
    from ..collect.processes import local_jobs
    from ..errors import TraceFormatError

    def died(path: Any, why: str) -> Exception:
        return TraceFormatError(path, f"the worker process reading it died: {why}")

    return partial(map_items, jobs=local_jobs(files, jobs), on_crash=died)


def register(app: typer.Typer) -> None:
    """Add ``job`` to ``app``."""
    from .help import PlainUsage

    app.command("job", cls=PlainUsage)(job_cmd)
