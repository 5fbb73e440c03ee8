"""Finding trace files, reading manifests, and analysing many traces at once.

``analyze_paths`` is what ``traceprobe overlap-report`` runs: it expands files and
folders into trace files, attaches what a ``manifest.json`` beside them says
(workload, variant, wall time), and analyses each file, in worker processes when
``jobs > 1``, then groups them into runs (:func:`~traceprobe.analysis.summary.summarize`).
A file that fails to load becomes a :class:`~traceprobe.errors.Failure`; the others
are still reported.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .analysis.report import OverlapReport, overlap_report
from .analysis.summary import Summary, summarize
from .errors import Failure, TraceFormatError
from .manifest import info_for as manifest_info
from .trace import load_trace

__all__ = ["Failure", "analyze_file", "analyze_paths", "discover", "manifest_info"]

def _is_trace_name(name: str) -> bool:
    return name != "manifest.json" and (name.endswith(".json") or name.endswith(".json.gz"))


def discover(paths: Iterable[str | Path]) -> tuple[list[Path], list[Failure]]:
    """Expand files and folders (recursively) into a sorted, de-duplicated list of trace files.

    Returns:
        ``(files, failures)``: a path that does not exist, or a folder with no
        trace in it, is a :class:`Failure`.
    """
    files: list[Path] = []
    failures: list[Failure] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and _is_trace_name(f.name) and not f.name.startswith("."))
            if not found:
                failures.append(Failure(str(p), "folder holds no trace files (*.json, *.json.gz)"))
            files.extend(found)
        elif p.exists():
            files.append(p)
        else:
            failures.append(Failure(str(p), "no such file or folder"))
    seen: set[Path] = set()
    unique = []
    for f in files:
        r = f.resolve()
        if r not in seen:
            seen.add(r)
            unique.append(f)
    return unique, failures


def analyze_file(path: str | Path) -> OverlapReport | Failure:
    """Load and analyse one trace; a :class:`TraceFormatError` becomes a :class:`Failure`."""
    p = Path(path)
    try:
        return overlap_report(load_trace(p), manifest_info(p))
    except TraceFormatError as e:
        return Failure(str(p), e.reason)
    except MemoryError:
        return Failure(str(p), "not enough memory to load this trace")


def analyze_paths(
    paths: Iterable[str | Path],
    jobs: int | None = None,
    on_done: Callable[[OverlapReport | Failure], None] | None = None,
) -> Summary:
    """Analyse every trace under ``paths`` and summarise them.

    Args:
        paths: trace files or folders.
        jobs: worker processes (default: CPU count, at most one per file; 1 runs
            in this process).
        on_done: called once per file as it completes (for progress bars).

    Returns:
        the :class:`~traceprobe.analysis.summary.Summary`: reports in the order of
        the sorted file list, runs, rank and variant tables, failures, warnings.
    """
    files, failures = discover(paths)
    n = jobs if jobs and jobs > 0 else (os.cpu_count() or 1)
    n = max(1, min(n, len(files)))
    results: list[OverlapReport | Failure]
    if n == 1:
        results = []
        for f in files:
            r = analyze_file(f)
            results.append(r)
            if on_done:
                on_done(r)
    else:
        with ProcessPoolExecutor(max_workers=n) as pool:
            futures = [pool.submit(analyze_file, f) for f in files]
            results = []
            for fut in futures:
                r = fut.result()
                results.append(r)
                if on_done:
                    on_done(r)
    reports = [r for r in results if isinstance(r, OverlapReport)]
    failures += [r for r in results if isinstance(r, Failure)]
    return summarize(reports, failures)
