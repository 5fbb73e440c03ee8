"""Finding trace files, reading manifests, and analysing many traces at once.

``analyze_paths`` is what ``traceprobe overlap-report`` runs: it expands files and
folders into trace files, attaches what a ``manifest.json`` beside them says
(workload, variant, wall time), and analyses each file, in worker processes when
``jobs > 1``, then groups them into runs (:func:`~traceprobe.analysis.summary.summarize`).
A file that fails to load becomes a :class:`~traceprobe.errors.Failure`; the others
are still reported.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import prefetch
from .errors import Failure, TraceFormatError
from .execution import default_jobs, map_items
from .manifest import info_for as manifest_info
from .sources import expand_url, is_url
from .tuning import usable_cpus

if TYPE_CHECKING:  # the analysis (pandas) is imported where it is used: see analyze_paths
    from .analysis.per_trace import OverlapReport
    from .analysis.summary import Summary
    from .prefetch import Pending
    from .trace import Trace

Then = Callable[["Trace", "OverlapReport"], Any]
"""Work done on each loaded trace beside its analysis (a module-level function, picklable)."""

__all__ = ["Failure", "analyze_file", "analyze_paths", "discover", "each_then", "manifest_info"]


def each_then(thens: dict[str, Then], trace: Trace, report: OverlapReport) -> dict[str, Any]:
    """Several ``then`` functions as one (``partial(each_then, {"png": ..., "json": ...})``):
    their results by name."""
    return {name: fn(trace, report) for name, fn in thens.items()}


def _is_trace_name(name: str) -> bool:
    return name != "manifest.json" and (name.endswith(".json") or name.endswith(".json.gz"))


_REPORT_HEAD = re.compile(rb'^\{\s*"schema":\s*\d+,\s*"traceprobe":')


def written_by_traceprobe(path: Path) -> bool:
    """Whether ``path`` is a file traceprobe wrote that is not a trace: ``manifest.json``,
    an ``export --json`` file (``*.perfetto.json[.gz]``) or an ``overlap-report --format
    json`` report (it begins ``{"schema": N, "traceprobe": ...``, see
    :mod:`traceprobe.report.json_document`). Folder scans skip these."""
    name = path.name
    if name == "manifest.json" or name.endswith((".perfetto.json", ".perfetto.json.gz")):
        return True
    if not name.endswith(".json"):
        return False
    try:
        with open(path, "rb") as f:
            return bool(_REPORT_HEAD.match(f.read(64)))
    except OSError:
        return False


def discover(paths: Iterable[str | Path]) -> tuple[list[str | Path], list[Failure]]:
    """Expand files and folders (recursively) into a sorted, de-duplicated list of trace files.

    A string of the form ``protocol://...`` is an fsspec URL (see
    :mod:`traceprobe.sources`): a file, a folder (searched recursively) or a glob;
    its files stay URL strings. Everything else is a local :class:`Path`.

    Returns:
        ``(files, failures)``: a path that does not exist, or a folder with no
        trace in it, is a :class:`Failure`.
    """
    files: list[str | Path] = []
    failures: list[Failure] = []
    for raw in paths:
        if is_url(raw):
            try:
                urls = expand_url(str(raw), lambda n: _is_trace_name(n) and not n.startswith("."))
            except OSError as e:
                failures.append(Failure(str(raw), str(e)))
                continue
            if urls is None:
                failures.append(Failure(str(raw), "no such file or folder"))
            elif not urls:
                failures.append(Failure(str(raw), "folder holds no trace files (*.json, *.json.gz)"))
            else:
                files.extend(urls)
            continue
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and _is_trace_name(f.name) and not f.name.startswith(".")
                           and not written_by_traceprobe(f))
            if not found:
                failures.append(Failure(str(p), "folder holds no trace files (*.json, *.json.gz)"))
            files.extend(found)
        elif p.exists():
            files.append(p)
        else:
            failures.append(Failure(str(p), "no such file or folder"))
    seen: set[str | Path] = set()
    unique = []
    for f in files:
        r = f if isinstance(f, str) else f.resolve()
        if r not in seen:
            seen.add(r)
            unique.append(f)
    return unique, failures


def analyze_file(
    path: str | Path, then: Then | None = None, max_bytes: int | None = None, all_device_work: bool = False,
    decoding: Pending | None = None, parallel: bool = False,
) -> OverlapReport | Failure | tuple[OverlapReport, Any]:
    """Load and analyse one trace (a path or an fsspec URL); a :class:`TraceFormatError` becomes a :class:`Failure`.

    ``max_bytes`` is :func:`~traceprobe.trace.load_trace`'s limit on the decompressed size.

    With ``then``, also ``then(trace, report)`` while the trace is loaded (for
    pictures and exports, so that no trace is parsed twice), and return
    ``(report, its result)``. ``all_device_work`` and ``parallel`` are passed to
    :func:`~traceprobe.analysis.per_trace.overlap_report`; ``decoding`` to
    :func:`~traceprobe.trace.load_trace`.
    """
    from .analysis.per_trace import overlap_report
    from .trace import load_trace

    p = path if is_url(path) else Path(path)  # (Path() would fold a URL's //)
    try:
        trace = load_trace(p, max_bytes, decoding)
        report = overlap_report(trace, manifest_info(p), all_device_work=all_device_work, parallel=parallel)
    except TraceFormatError as e:
        return Failure(str(p), e.reason)
    except MemoryError:
        return Failure(str(p), "not enough memory to load this trace")
    return report if then is None else (report, then(trace, report))


def _crash_failure(path: str | Path, reason: str) -> Failure:
    return Failure(str(path), reason)


def analyze_paths(
    paths: Iterable[str | Path],
    jobs: int | None = None,
    on_done: Callable[[Any], None] | None = None,
    then: Then | None = None,
    on_then: Callable[[OverlapReport, Any], None] | None = None,
    max_bytes: int | None = None,
    all_device_work: bool = False,
    scheduler: str | None = None,
    decode_ahead: bool = False,
    parallel: bool = False,
    on_files: Callable[[list[str]], None] | None = None,
) -> Summary:
    """Analyse every trace under ``paths`` and summarise them.

    Args:
        paths: trace files or folders, local or fsspec URLs (``s3://...``).
        jobs: worker processes (default: CPU count, at most one per file; 1 runs
            in this process); see :func:`traceprobe.execution.map_items`. A
            worker process that dies on a file (out of memory, ...) is replaced and
            the file tried once more; a second death makes it a Failure.
        on_done: called once per file as it completes (for progress bars).
        then: a module-level function ``then(trace, report)`` run on each trace
            that loaded, where it was analysed (see :func:`analyze_file`);
        on_then: receives ``(report, then's result)`` in this process, in file order.
        max_bytes: largest decompressed trace accepted (default: half the available memory).
        all_device_work: count every device event, not only the work launched
            inside the profiled steps (:mod:`traceprobe.analysis.profiled`).
        scheduler: run the per-file work on the Dask cluster at this address
            (``tcp://host:8786``) instead of local processes; each worker reads its
            files and sends back only their reports (and ``then``'s results).
        decode_ahead: a single local trace analysed in this process, before pandas
            is imported, is decoded by child processes while this one imports the
            analysis (:mod:`traceprobe.prefetch`); the result is the same. For
            commands: a library caller (a notebook, a threaded program) leaves it
            off, as forking such a process is not safe.
        parallel: where the traces are analysed in this process, one after the
            other, on a machine with 2 or more CPUs, each analysis runs half of its
            tables in a second thread (``overlap_report(parallel=True)``); the
            result is the same. Not in worker processes, which fill the CPUs
            already. For commands.
        on_files: called once with the trace files found, before any is analysed
            (a progress display's total).

    Returns:
        the :class:`~traceprobe.analysis.summary.Summary`: reports in the order of
        the sorted file list, runs, rank and variant tables, failures, warnings.
    """
    files, failures = discover(paths)
    if on_files is not None:
        on_files([str(f) for f in files])
    decoding = None
    if decode_ahead and len(files) == 1 and not is_url(files[0]) and not scheduler and prefetch.worthwhile():
        try:
            decoding = prefetch.start(files[0], max_bytes)
        except OSError:  # no fork here (a process limit): decode in this process
            decoding = None
    else:
        prefetch.drop_early()  # (a decoding started before the options were parsed, of no use here)
    try:
        from .analysis.per_trace import OverlapReport
        from .analysis.summary import summarize
        from .tuning import imports_done

        imports_done()

        beside = parallel and not scheduler and default_jobs(len(files), jobs) == 1 and usable_cpus() > 1
        plain = then is None and max_bytes is None and not all_device_work and decoding is None and not beside
        fn = analyze_file if plain else partial(analyze_file, then=then, max_bytes=max_bytes, all_device_work=all_device_work,
                                                decoding=decoding, parallel=beside)
        results = map_items(fn, files, jobs=jobs, scheduler=scheduler, on_done=on_done, on_crash=_crash_failure)  # one file: in this process
    finally:
        if decoding is not None:
            decoding.cancel()  # (no-op once its result was taken)
    for r in results:
        if isinstance(r, tuple) and on_then:
            on_then(*r)
    results = [r[0] if isinstance(r, tuple) else r for r in results]
    reports = [r for r in results if isinstance(r, OverlapReport)]
    failures += [r for r in results if isinstance(r, Failure)]
    return summarize(reports, failures)
