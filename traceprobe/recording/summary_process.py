"""The summary's process: what runs, at a lower CPU priority, for each profiler window of
:func:`traceprobe.on_trace_ready` (:func:`summarize_window`) and for each trace :func:`traceprobe.capture` and
``traceprobe record --script`` write (:func:`summarize_trace`): read, analyse, write the summary beside the trace
(:func:`traceprobe.analysis.job.summaries.write_summary`), and print the result as one JSON line for the handler's
thread (:mod:`.handler`). One code path for every summary written while recording; nothing here raises: an error
is the result's ``error``.

Run as ``python -m traceprobe.recording.summary_process TMP FOLDER RANK N JOB KEEP`` (a window's temporary trace)
or ``... --trace TRACE JOB`` (a trace in place).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

NICE = 10
"""The CPU priority increment of the process that analyses each window."""


def remove_quietly(p: Path) -> None:
    """Remove ``p`` if it is there; an error removing it is ignored (a temporary file, never an input)."""
    try:
        p.unlink(missing_ok=True)
    except OSError:
        pass


def window_line(report: Any, rank: int) -> str:
    """The log line of one window: ``traceprobe rank R steps A-B: step X ms, busy U%, comm hidden H%, exposed comm E ms/step,
    idle I ms/step; top: <finding>; do: <action>`` (figures from :attr:`.analysis.per_trace.OverlapReport.headline` and its breakdown,
    per step over the window's steps; ``-`` where undefined)."""
    import math

    h = report.headline
    steps = len(report.steps) if report.steps is not None and len(report.steps) else 1
    b = report.breakdown
    exposed = float(b["exposed_comm_ns"].sum()) / steps if b is not None and len(b) else math.nan
    idle = float(b["idle_ns"].sum()) / steps if b is not None and len(b) else math.nan

    def pct(x: float) -> str:
        return "-" if not math.isfinite(x) else f"{100 * x:.0f}%"

    def ms(x: float) -> str:
        return "-" if not math.isfinite(x) else f"{x / 1e6:.1f} ms"

    st = report.steps
    where = f"steps {int(st['step'].min())}-{int(st['step'].max())}" if st is not None and len(st) else "window"
    from ..report.actions import finding_top

    found = finding_top(report)  # (per step first, the window's total labelled; and its one action)
    top = f"; top: {found.label}" + (f"; do: {found.do}" if found.do else "") if found is not None else ""
    return (f"traceprobe rank {rank} {where}: step {ms(h['mean_step_ns'])}, busy {pct(h['utilization'])}, "
            f"comm hidden {pct(h['comm_overlap'])}, exposed comm {ms(exposed)}/step, idle {ms(idle)}/step{top}")


def summarize_window(tmp: str, folder: str, rank: int, n: int, job: str, keep_trace: bool) -> dict[str, Any]:
    """What the summary's process does with one window's temporary trace: analyse it, write the summary and the trace
    (gzipped, or none) under a stem claimed exclusively (:func:`traceprobe.fileio.claim_stem`: ``rank<R>.steps<A>-<B>``,
    else ``-2``, ``-3``..., never a name another writer holds); the result as a dict (``summary``, ``trace``, ``line``,
    ``error``). The trace is kept whatever befalls the summary; the temporary file never outlives this call."""
    from ..analysis.job.summaries import summary_bytes
    from ..analysis.per_trace import overlap_report
    from ..fileio import claim_stem
    from ..reading import load_trace

    out: dict[str, Any] = {"summary": None, "trace": None, "line": "", "error": None}
    base = Path(folder)
    stem = f"rank{rank}.window{n}"
    report = None
    try:
        trace = load_trace(tmp)
        report = overlap_report(trace)
        if len(report.steps):
            stem = f"rank{rank}.steps{int(report.steps['step'].min())}-{int(report.steps['step'].max())}"
    except Exception as e:  # noqa: BLE001 - the trace is still kept
        out["error"] = f"cannot analyse window {n} of rank {rank}: {type(e).__name__}: {e}"
    gz = b""
    try:
        if keep_trace:
            import gzip

            gz = gzip.compress(Path(tmp).read_bytes(), compresslevel=1, mtime=0)
    except Exception as e:  # noqa: BLE001
        out["error"] = out["error"] or f"cannot write the trace of window {n} of rank {rank}: {e}"
        keep_trace = False
    finally:
        remove_quietly(Path(tmp))
    trace_file: tuple[str, Any] = (_TRACE, lambda _: gz)
    summary_file: tuple[str, Any] = (_SUMMARY, lambda c: summary_bytes(report, job, f"{c}{_TRACE}" if keep_trace else ""))  # pyright: ignore[reportArgumentType]
    # both under one stem; else (a full disk) the trace alone, else the summary alone: a summary lost costs no trace
    tries = [[summary_file, trace_file]] if keep_trace and report is not None else []
    tries += ([[trace_file]] if keep_trace else []) + ([[summary_file]] if report is not None else [])
    for files in tries:
        try:
            claimed = claim_stem(base, stem, files, free=[x for x in (_SUMMARY, _TRACE) if x not in {f[0] for f in files}])
        except Exception as e:  # noqa: BLE001 - the next try keeps what it can
            out["error"] = out["error"] or f"cannot write the files of window {n} of rank {rank}: {e}"
            continue
        if trace_file in files:
            out["trace"] = str(base / f"{claimed}{_TRACE}")
        if summary_file in files:
            out["summary"] = str(base / f"{claimed}{_SUMMARY}")
            try:
                out["line"] = window_line(report, rank)
            except Exception as e:  # noqa: BLE001
                out["error"] = out["error"] or f"cannot write the log line of window {n} of rank {rank}: {e}"
        break
    return out


_TRACE, _SUMMARY = ".pt.trace.json.gz", ".summary.json"


def summarize_trace(trace: str, job: str) -> dict[str, Any]:
    """What the summary's process does with a trace already in place (:meth:`TraceReady.summarize`): analyse it (with
    the facts of the ``manifest.json`` beside it) and write ``<stem>.summary.json`` beside it; the result as
    :func:`summarize_window`'s (``trace``: the trace)."""
    from .. import manifest as mf
    from ..analysis.per_trace import overlap_report
    from ..reading import load_trace

    path = Path(trace)
    out: dict[str, Any] = {"summary": None, "trace": str(path), "line": "", "error": None}
    try:
        report = overlap_report(load_trace(path), mf.info_for(path))
    except Exception as e:  # noqa: BLE001
        out["error"] = f"cannot analyse {path.name}: {type(e).__name__}: {e}"
        return out
    stem = _TRACE_END.sub("", path.name)
    _write(report, path.parent / f"{stem}.summary.json", job, path.name, report.rank if report.rank is not None else 0, path.name, out)
    return out


_TRACE_END = re.compile(r"\.pt\.trace\.json(\.gz)?$|\.json(\.gz)?$")


def _write(report: Any, path: Path, job: str, source: str, rank: int, what: str, out: dict[str, Any]) -> None:
    """Write ``report``'s summary to ``path`` and rank ``rank``'s log line into ``out`` (or the error: a full disk
    costs the summary)."""
    from ..analysis.job.summaries import write_summary

    try:
        out["summary"] = str(write_summary(report, path, job=job, source=source))
        out["line"] = window_line(report, rank)
    except Exception as e:  # noqa: BLE001 - a full disk costs the summary
        out["error"] = f"cannot write the summary of {what}: {e}"


def _main(argv: list[str]) -> int:
    try:
        os.nice(NICE)
    except OSError:
        pass
    if argv[0] == "--trace":
        out = summarize_trace(argv[1], argv[2])
    else:
        tmp, folder, rank, n, job, keep = argv
        out = summarize_window(tmp, folder, int(rank), int(n), job, keep == "1")
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
