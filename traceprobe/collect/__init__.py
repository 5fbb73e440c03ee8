"""Finding trace files, reading manifests, and analysing many traces at once.

``analyze_paths`` is what ``traceprobe overlap-report`` runs: it expands files and folders into trace files, attaches
what a ``manifest.json`` beside them says (workload, variant, wall time), and analyses each file, in worker processes
when ``jobs > 1``, then groups them into runs (:func:`~traceprobe.analysis.summary.summarize`). A file that fails to
load becomes a :class:`~traceprobe.errors.Failure`; the others are still reported. Where the per-trace work runs is
:mod:`.execution`'s; :mod:`.parts` summarises each run as soon as its traces are in (``analyze_paths(on_part=...)``:
the first screen printed as it comes).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Failure, TraceFormatError
from ..manifest import info_for as manifest_info
from ..reading.files import is_url, url_filesystem
from .execution import map_items
from .processes import decoders, local_jobs, work_beside

if TYPE_CHECKING:  # the analysis (pandas) is imported where it is used: see analyze_paths
    from ..analysis.per_trace import OverlapReport
    from ..analysis.summary import Summary
    from ..reading import Trace

Then = Callable[["Trace", "OverlapReport"], Any]
"""Work done on each loaded trace beside its analysis (a module-level function, picklable)."""

__all__ = ["Failure", "analyze_file", "analyze_paths", "discover", "manifest_info", "timeline_lanes"]


def timeline_lanes(trace: Trace, report: OverlapReport) -> Any:
    """What a picture draws of one trace (:func:`traceprobe.analysis.device.picture.timeline_lanes`), as a ``then``:
    computed where the trace is analysed, drawn in the command's process (:mod:`traceprobe.report.plot`).
    Defined here so that naming it imports no pandas."""
    from ..analysis.device.picture import timeline_lanes as lanes

    return lanes(trace, report)


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


def _expand_url(url: str, is_trace_name: Callable[[str], bool]) -> list[str] | None:
    """Trace files at an fsspec URL: the URL itself if it is a file, every file below it
    whose name passes ``is_trace_name`` if it is a folder, the matches if it holds a glob
    (``*``, ``?``, ``[``), sorted. None when nothing exists there.

    Raises:
        OSError: the filesystem cannot be reached or its package is missing.
    """
    fs, root = url_filesystem(url)
    protocol = url.split("://", 1)[0]

    def unstrip(p: str) -> str:
        return fs.unstrip_protocol(p) if protocol != "file" else f"file://{p}"

    if any(c in root for c in "*?["):
        found = [p for p in fs.glob(root) if fs.isfile(p)]
    elif fs.isfile(root):
        return [url]
    elif fs.isdir(root):
        found = [p for p in fs.find(root) if is_trace_name(p.rsplit("/", 1)[-1])]
    else:
        return None
    return sorted(unstrip(p) for p in found)


def _inside(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


def _walk(folder: Path) -> tuple[list[Path], list[tuple[str, str]], list[tuple[str, str]]]:
    """Trace files below ``folder`` (sorted; regular files only, hidden ones and traceprobe's own files left out),
    the folders that could not be read, each with why, and the links to folders left out, each with its target.

    Links to folders are followed only while their target stays under ``folder`` (``up -> ..`` or ``slash -> /``
    would walk the parent or the whole machine); a link back up the tree is cut where it closes the cycle.
    """
    found: list[Path] = []
    unreadable: list[tuple[str, str]] = []
    escaped: list[tuple[str, str]] = []  # (links to folders outside it: their link and target)
    base = os.path.realpath(folder)

    def failed(e: OSError) -> None:
        unreadable.append((str(e.filename or folder), e.strerror or str(e)))

    seen: set[str] = set()
    for root, dirs, names in os.walk(folder, onerror=failed, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:  # (a link back up the tree)
            dirs.clear()
            continue
        seen.add(real)
        links = [(d, os.path.realpath(p)) for d in dirs if os.path.islink(p := os.path.join(root, d))]
        out = {d for d, target in links if not _inside(target, base)}
        escaped += [(os.path.join(root, d), target) for d, target in links if d in out]
        dirs[:] = [d for d in dirs if d not in out]
        for n in names:
            f = Path(root, n)
            if _is_trace_name(n) and not n.startswith(".") and f.is_file() and not written_by_traceprobe(f):
                found.append(f)
    return sorted(found), sorted(unreadable), sorted(escaped)


def _escaped_line(folder: Path, escaped: list[tuple[str, str]]) -> Failure:
    """One line for every link to a folder outside ``folder`` that its walk left out."""
    shown = ", ".join(f"{os.path.relpath(link, folder)} -> {target}" for link, target in escaped[:3])
    more = f" and {len(escaped) - 3} more" if len(escaped) > 3 else ""
    n = len(escaped)
    return Failure(str(folder), f"left out {n} link{'s' if n > 1 else ''} to folders outside it ({shown}{more}): "
                                "a folder is read within itself; name a link's target to read it")


def discover(paths: Iterable[str | Path]) -> tuple[list[str | Path], list[Failure]]:
    """Expand files and folders (recursively) into a sorted, de-duplicated list of trace files.

    A string of the form ``protocol://...`` is an fsspec URL (see
    :mod:`traceprobe.reading.files`): a file, a folder (searched recursively) or a glob;
    its files stay URL strings. Everything else is a local :class:`Path`.

    Returns:
        ``(files, failures)``: a path that does not exist, a folder with no
        trace in it, and a folder (or sub-folder) that cannot be read are each a
        :class:`Failure`; so are a folder's links to folders outside it, left out
        (one line per folder given, counting them), and a ``manifest.json`` beside
        traces that cannot be used.
    """
    files: list[str | Path] = []
    failures: list[Failure] = []
    for raw in paths:
        if is_url(raw):
            try:
                urls = _expand_url(str(raw), lambda n: _is_trace_name(n) and not n.startswith("."))
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
            found, unreadable, escaped = _walk(p)
            failures += [Failure(folder, f"cannot read this folder: {why}") for folder, why in unreadable]
            if escaped:
                failures.append(_escaped_line(p, escaped))
            if not found and not unreadable:
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
    return unique, failures + _bad_manifests(unique)


def _bad_manifests(files: list[str | Path]) -> list[Failure]:
    """A ``manifest.json`` beside local traces that cannot be used (unreadable, not JSON, not a manifest): one
    line each, saying the traces beside it are read without its facts (workload, variant, wall time)."""
    from ..manifest import ManifestError, load, path_of

    out = []
    for folder in sorted({f.parent for f in files if isinstance(f, Path)}):
        if not path_of(folder).exists():
            continue
        try:
            load(folder)
        except ManifestError as e:
            out.append(Failure(str(path_of(folder)), f"{e.reason}: the traces beside it are "
                                                     "read without its facts (workload, variant, wall time)"))
    return out


def analyze_file(
    path: str | Path, then: Then | None = None, max_bytes: int | None = None, all_device_work: bool = False, decoders: int = 1,
) -> OverlapReport | Failure | tuple[OverlapReport, Any]:
    """Load and analyse one trace (a path or an fsspec URL); a :class:`TraceFormatError` becomes a :class:`Failure`.

    ``max_bytes`` is :func:`~traceprobe.reading.load_trace`'s limit on the decompressed size.

    With ``then``, also ``then(trace, report)`` while the trace is loaded (for
    pictures and exports, so that no trace is parsed twice), and return
    ``(report, its result)``. ``all_device_work`` is passed to :func:`~traceprobe.analysis.per_trace.overlap_report`,
    ``decoders`` to :func:`~traceprobe.reading.load_trace` (its ``processes``: 1 decodes it here).
    """
    from ..analysis.per_trace import overlap_report
    from ..reading import load_trace
    from ..reading.files import release
    from ..summary_file import is_summary

    p = path if is_url(path) else Path(path)  # (Path() would fold a URL's //)
    if is_summary(p):  # a summary stands for its trace (traceprobe.summary_file)
        from ..analysis.job.summaries import load_summary

        if then is not None:
            return Failure(str(p), "a traceprobe summary holds no events: pictures and exports need its trace")
        try:
            return load_summary(p)
        except TraceFormatError as e:
            return Failure(str(p), e.reason)
        finally:
            release()  # (what its graph and transfers held of the command's shared limit: read)
    try:
        trace = load_trace(p, max_bytes, decoders)
        report = overlap_report(trace, manifest_info(p), all_device_work=all_device_work)
        return report if then is None else (report, then(trace, report))
    except TraceFormatError as e:
        return Failure(str(p), e.reason)
    except MemoryError:
        return Failure(str(p), "not enough memory to load this trace")
    except Exception as e:  # noqa: BLE001 - a defect of traceprobe on this trace: this file fails, the others are reported
        if os.environ.get(DEBUG_ENV):
            raise
        return Failure(str(p), f"traceprobe failed on this trace ({internal_error(e)}): please report it with the trace")
    finally:
        release()  # (what this trace held of the command's shared limit: its work is done)


def internal_error(e: BaseException) -> str:
    """One line for a defect of traceprobe: the exception's type and message, and the traceprobe frame it rose from."""
    import traceback

    frames = [f for f in traceback.extract_tb(e.__traceback__) if "traceprobe" in f.filename]
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    text = " ".join(str(e).split())[:200]
    return f"{type(e).__name__}: {text}{where}" if text else f"{type(e).__name__}{where}"


DEBUG_ENV = "TRACEPROBE_DEBUG"
"""Set (by ``--debug``): a defect of traceprobe on one trace raises with its traceback instead of failing that file."""
_TRACE_END = re.compile(r"(\.pt\.trace)?\.json(\.gz)?$")
_SUMMARY_END = re.compile(r"\.summary\.json(\.gz)?$")


def pair_summaries(files: list[str | Path], keep: str = "summary") -> list[str | Path]:
    """Where a trace and its summary (``<stem>.pt.trace.json[.gz]`` and ``<stem>.summary.json[.gz]``, one folder)
    are both listed, keep one: the ``summary`` (same figures, read in a fraction of the time) or the ``trace``
    (pictures and exports need its events). Order is kept."""
    def stem(f: str | Path) -> tuple[str, str, bool]:
        s = str(f)
        folder, _, name = s.rpartition("/")
        if _SUMMARY_END.search(name):
            return folder, _SUMMARY_END.sub("", name), True
        return folder, _TRACE_END.sub("", name), False

    keys = [stem(f) for f in files]
    present = {(k[0], k[1], k[2]) for k in keys}
    drop_summary = keep != "summary"
    return [f for f, (folder, name, is_sum) in zip(files, keys)
            if not ((is_sum == drop_summary) and (folder, name, not is_sum) in present)]


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
    on_files: Callable[[list[str]], None] | None = None,
    align_clocks: bool = False,
    on_part: Callable[[Summary], None] | None = None,
) -> Summary:
    """Analyse every trace under ``paths`` and summarise them.

    Args:
        paths: trace files or folders, local or fsspec URLs (``s3://...``).
        jobs: worker processes (default: CPU count, at most one per file, none for local files too small to pay for
            them, :func:`.processes.local_jobs`; 1 runs in this process); see :func:`.execution.map_items`. Where
            :func:`.processes.work_beside` says and the replay's kernels were not built ahead of time
            (:func:`~traceprobe.analysis.causal.sweep.ahead_of_time`), this process pays the replay's one-time cost
            while they read (:func:`~traceprobe.analysis.causal.sweep.warm`), and even one file goes to a worker. A
            worker process that dies on a file (out of memory, ...) is replaced and the file tried once more; a second
            death makes it a Failure. One large local trace analysed here is decoded by several processes
            (:func:`.processes.decoders`; ``jobs`` 1: by this one alone).
        on_done: called once per file as it completes (for progress bars).
        then: a module-level function ``then(trace, report)`` run on each trace
            that loaded, where it was analysed (see :func:`analyze_file`);
        on_then: receives ``(report, then's result)`` in this process, in file order.
        max_bytes: largest decompressed JSON accepted (default: the smaller of half the available memory and
            4 GiB), for the whole command: the local workers share it, what one holds the others may not take
            (:class:`traceprobe.reading.files.SharedLimit`).
        all_device_work: count every device event, not only the work launched
            inside the profiled steps (:mod:`traceprobe.analysis.device.profiled`).
        scheduler: run the per-file work on the Dask cluster at this address
            (``tcp://host:8786``) instead of local processes; each worker reads its
            files and sends back only their reports (and ``then``'s results).
        on_files: called once with the trace files found, before any is analysed
            (a progress display's total).
        align_clocks: compare ranks on one clock where their clocks differ
            (:func:`~traceprobe.analysis.summary.summarize`).
        on_part: called in this process with the summary of each run as soon as its traces are analysed, the runs
            in the first screen's order (:func:`~traceprobe.analysis.summary.display_order`), which is also the order
            the traces are handed to the workers in; the summary returned is then these parts merged
            (:func:`~traceprobe.analysis.summary.merge`: the same as one summary of every report, no window replayed
            twice). Where a summary file is among the inputs (its run is known only once read), the whole summary is
            its one part, at the end. Without it, where several files go to workers, runs are summarised so all the
            same (each while the workers analyse the others).

    Returns:
        the :class:`~traceprobe.analysis.summary.Summary`: reports in the order of
        the sorted file list, runs, rank and variant tables, failures, warnings.
    """
    files, failures = discover(paths)
    files = pair_summaries(files, keep="summary" if then is None else "trace")
    if on_files is not None:
        on_files([str(f) for f in files])
    from ..analysis.causal.sweep import ahead_of_time, warm
    from ..analysis.per_trace import OverlapReport
    from ..analysis.summary import summarize
    from ..reading.files import share_limit, unshare_limit

    if scheduler is None:  # one limit for the whole command, shared by its local workers (reading.files.SharedLimit)
        share_limit(max_bytes)
    from ..summary_file import is_summary
    from .parts import Parts

    local = local_jobs(files, jobs)  # (the files' sizes read once: work_beside takes the jobs it gave)
    parted = on_part is not None or (len(files) > 1 and local != 1)  # (runs summarised while workers analyse the rest)
    stream = Parts(files, on_part or (lambda _: None), align_clocks) if parted and not any(is_summary(f) for f in files) else None
    work = files if stream is None else stream.work
    beside = warm if work_beside(work, local) and not ahead_of_time() else None
    shared = decoders(work, jobs) if scheduler is None and beside is None else 1  # (one trace analysed here)
    fn = analyze_file if (then, max_bytes, all_device_work, shared) == (None, None, False, 1) else partial(analyze_file, then=then, max_bytes=max_bytes, all_device_work=all_device_work, decoders=shared)
    try:
        results = map_items(fn, work, jobs=local, scheduler=scheduler, on_done=on_done, on_crash=_crash_failure,
                            on_index=None if stream is None else stream.add, beside=beside)
    finally:
        unshare_limit()
    if stream is not None:
        results = stream.in_file_order(results)
    for r in results:
        if isinstance(r, tuple) and on_then:
            on_then(*r)
    results = [r[0] if isinstance(r, tuple) else r for r in results]
    reports = [r for r in results if isinstance(r, OverlapReport)]
    failures += [r for r in results if isinstance(r, Failure)]
    if any("summary_of" in r.info for r in reports):
        from ..analysis.job.summaries import foreign_jobs
        from ..analysis.run import TRACES_WITHOUT_JOB

        reports, foreign = foreign_jobs(reports)
        failures += foreign
        # traces beside summaries (none of theirs: a pair keeps one) are of another run or job: their own job,
        # named so, never counted in the summaries' windows
        with_summaries = {str(Path(str(r.path)).parent) for r in reports if "summary_of" in r.info}
        for r in reports:
            if "summary_of" not in r.info and str(Path(str(r.path)).parent) in with_summaries:
                r.info.setdefault("job", TRACES_WITHOUT_JOB)
    if stream is not None:
        from ..analysis.summary import merge

        return merge(stream.parts, [r.path for r in reports], failures)
    summary = summarize(reports, failures, align_clocks=align_clocks)
    if on_part is not None:
        on_part(summary)
    return summary
