"""Summaries: the compact, versioned file that stands for one rank's trace of one profiler window.

A summary (``<name>.summary.json``) holds everything a report and the cross-rank analysis take from a trace
(:class:`traceprobe.analysis.per_trace.OverlapReport`'s tables and figures, its collectives with their process
group, sequence, bytes, start and end; its part of the job's dependency graph), a few KB to a few hundred KB instead
of tens of MB. It is written
during training by :func:`traceprobe.on_trace_ready`, or from any report by
:func:`traceprobe.analysis.job.summaries.write_summary`, and read back into the same report by
:func:`traceprobe.analysis.job.summaries.load_summary`: ``overlap-report``, ``diff`` and the gates read folders of
summaries, traces or both.

This module defines the format (msgspec structs; :func:`json_schema` is its JSON Schema, draft 2020-12) and
decodes a file, checking it; it needs neither pandas nor the analysis.

Format (``format`` = :data:`FORMAT`, ``version`` = :data:`VERSION`):

- ``job``: the job the summary belongs to (``on_trace_ready``'s ``job``, else ``TORCHELASTIC_RUN_ID``, else
  ``SLURM_JOB_ID``, else the folder's name); the summaries of one folder must share it.
- ``traceprobe``: the version that wrote it; ``source``: the trace it summarises (file name, "" if none was kept).
- ``rank``, ``window_ns``, ``event_count``, ``throughput``, ``work_ns``, ``backend``, ``training``, ``wrapper`` (absent
  from summaries written before it: ``""``), ``forward_allreduce`` (absent from summaries written before it: none),
  ``all_device_work``, ``warnings``, ``notes``, ``info`` (the manifest's facts): as in the report.
- ``tables``: the report's tables by name (``streams``, ``copy_overlap``, ``devices``, ``stream_concurrency``,
  ``comm_overlap``, ``steps``, ``breakdown``, ``breakdown_steps``, ``findings``, ``kernels``, ``queue``,
  ``collectives``, ``set_aside``, ``exposed_comm``, ``idle_causes``; ``pg_members``, each process group's member list
  once, which a collective's ``pg_ranks`` names by its row; ``graph``, the rank's part of the dependency graph
  packed in one string, :mod:`traceprobe.analysis.job.graph_tables`, absent from summaries written before it), each
  column-major: ``columns``, their
  pandas ``dtypes`` and ``data`` (one list per column; ``null`` for NaN or missing). Times are int64 ns,
  fractions 0..1; each column is defined where its table is computed (:mod:`traceprobe.analysis`).
- ``headline``: the report's headline figures (``OverlapReport.headline``: what the whole-job report
  distributes across ranks without building the tables); ``device_concurrency``, ``cpu_gpu``, ``host_threads``:
  the report's scalar figures; ``verdicts``: its verdicts.

Errors: a file that is truncated or not JSON, of another format or version, or whose values do not fit their
fields (a known table's column, :data:`traceprobe.summary_tables.COLUMNS`, of another kind than its meaning: a string among times, a ``null``
among steps, a process group's members that are not ranks) is a :class:`~traceprobe.errors.TraceFormatError` naming
it (one line); one from another job is named when a folder is read
(:func:`traceprobe.analysis.job.summaries.foreign_jobs`).
"""

from __future__ import annotations

import gzip
import inspect
import json
import os
import zlib
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from .errors import TraceFormatError
from .summary_tables import COLUMNS as COLUMNS  # (the tables' checks: summary_tables; their names kept here)
from .summary_tables import DTYPES as DTYPES
from .summary_tables import table_problem as table_problem
from .summary_tables import tables_problem

FORMAT = "traceprobe-summary"
"""The ``format`` field of every summary."""
VERSION = 1
"""The format version this traceprobe writes and reads."""
SUFFIXES = (".summary.json", ".summary.json.gz")
"""File names of summaries end with one of these."""
MAX_BYTES = 256 << 20
"""Largest summary read (256 MiB decompressed): a summary is a few hundred KB at most."""

MAX_RANK = 1 << 28
"""A summary's ``rank`` lies within this in magnitude, as a trace's (:data:`traceprobe.reading.trace.MAX_RANK`)."""
MAX_DEPTH = 32
"""Deepest nesting of ``info`` (the manifest's facts: a few levels at most)."""
Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
"""Every integer of a summary fits int64 (times in ns, counts, bytes, ids)."""
Rank = Annotated[int, msgspec.Meta(gt=-MAX_RANK, lt=MAX_RANK)]
Value = Int64 | float | str | bool | None


class Table(msgspec.Struct, forbid_unknown_fields=True):
    """One DataFrame, column-major: names, pandas dtypes (``int64``, ``float64``, ``Int64``, ``str``, ``object``,
    ``bool``, ``category``), and one list of values per column (``null`` for NaN or missing)."""

    columns: list[str]
    dtypes: list[str]
    data: list[list[Value]]


class DeviceConcurrencyFigures(msgspec.Struct, forbid_unknown_fields=True):
    """:class:`traceprobe.analysis.device.concurrency.DeviceConcurrency` without its table (``tables.devices``)."""

    any_busy_ns: Int64
    concurrent_ns: Int64
    concurrency: float | None
    device_count: Int64


class CpuGpuFigures(msgspec.Struct, forbid_unknown_fields=True):
    """:class:`traceprobe.analysis.device.overlap.CpuGpuOverlap`."""

    host_compute_ns: Int64
    device_busy_ns: Int64
    overlapped_ns: Int64
    fraction: float | None
    fraction_of_device: float | None
    fraction_of_shorter: float | None


class HostThreadFigures(msgspec.Struct, forbid_unknown_fields=True):
    """:class:`traceprobe.analysis.host.host_threads.HostThreadConcurrency`."""

    threads: Int64
    busy_ns: Int64
    multi_thread_ns: Int64
    thread_ns_sum: Int64
    busiest_thread_ns: Int64
    concurrency: float | None
    fair_concurrency: float | None


class VerdictDoc(msgspec.Struct, forbid_unknown_fields=True):
    """:class:`traceprobe.analysis.advice.verdicts.Verdict`."""

    figure: str
    subject: str
    value: float | None
    level: str
    text: str


class SummaryDoc(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One summary file (module docstring)."""

    format: Literal["traceprobe-summary"]
    version: Int64
    job: str
    traceprobe: str
    source: str
    rank: Rank | None
    window_ns: tuple[Int64, Int64]
    event_count: Int64
    throughput: float | None
    work_ns: Int64
    backend: str
    training: str
    all_device_work: bool
    warnings: list[str]
    notes: list[str]
    info: dict[str, Any]
    headline: dict[str, float | None]
    device_concurrency: DeviceConcurrencyFigures
    cpu_gpu: CpuGpuFigures
    host_threads: HostThreadFigures | None
    verdicts: list[VerdictDoc]
    tables: dict[str, Table]
    wrapper: str = ""
    forward_allreduce: list[Int64] = msgspec.field(default_factory=list)


class _Head(msgspec.Struct):
    format: str = ""
    version: int = -1
    job: str = ""


def default_job(folder: str | Path = "") -> str:
    """The job a summary belongs to when none is given: ``TORCHELASTIC_RUN_ID`` (torchrun; not ``none``), else
    ``SLURM_JOB_ID``, else the name of ``folder``."""
    for var in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"):
        v = os.environ.get(var, "")
        if v and v != "none":
            return v
    return Path(str(folder)).resolve().name if str(folder) else ""


def is_summary(path: str | Path) -> bool:
    """Whether ``path`` names a summary (by its name: :data:`SUFFIXES`)."""
    return str(path).endswith(SUFFIXES)


def encode(doc: SummaryDoc) -> bytes:
    """The JSON bytes of ``doc`` (UTF-8)."""
    return msgspec.json.encode(doc)


def decode(raw: bytes, path: str | Path) -> SummaryDoc:
    """Check and decode the bytes of a summary (module docstring).

    Raises:
        TraceFormatError: truncated or not JSON, not a summary, another format version, or fields that do not fit
            (:func:`tables_problem`: a table's columns of its dtypes, a known table's of their meaning).
    """
    try:
        head = msgspec.json.decode(raw, type=_Head)
    except RecursionError:
        raise TraceFormatError(path, f"traceprobe summary nested too deep (more than {MAX_DEPTH} levels): does not fit its format") from None
    except msgspec.ValidationError as e:
        raise TraceFormatError(path, f"not a traceprobe summary ({e})") from None
    except msgspec.DecodeError as e:
        what = "truncated" if "truncated" in str(e).lower() or "unexpected end" in str(e).lower() else "not valid JSON"
        raise TraceFormatError(path, f"traceprobe summary {what} ({e})") from None
    if head.format != FORMAT:
        raise TraceFormatError(path, f"not a traceprobe summary (format {head.format!r}, expected {FORMAT!r})")
    if head.version != VERSION:
        raise TraceFormatError(path, f"traceprobe summary of format version {head.version}; this traceprobe reads version {VERSION}")
    try:
        doc = msgspec.json.decode(raw, type=SummaryDoc)
    except msgspec.DecodeError as e:
        raise TraceFormatError(path, f"traceprobe summary version {VERSION} that does not fit its format ({e})") from None
    except RecursionError:
        raise TraceFormatError(path, f"traceprobe summary nested too deep (more than {MAX_DEPTH} levels): does not fit its format") from None
    problem = _depth_problem(doc.info, "$.info") or tables_problem(doc.tables)
    if problem:
        raise TraceFormatError(path, f"traceprobe summary version {VERSION} that does not fit its format ({problem})")
    return doc


def _depth_problem(value: Any, where: str) -> str:
    """"" if ``value`` nests at most :data:`MAX_DEPTH` levels, else the words saying so (walked level by level, no recursion)."""
    level, depth = [value], 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            return f"{where}: nested more than {MAX_DEPTH} levels"
        level = [x for v in level for x in (v.values() if isinstance(v, dict) else v if isinstance(v, list) else ())
                 if isinstance(x, (dict, list))]
    return ""


def read_summary(path: str | Path) -> SummaryDoc:
    """Read, check and decode one summary file (``.gz``: gzipped), local or an fsspec URL.

    As a trace: anything but a regular file (a FIFO, a device, a folder) is refused from its ``stat`` before any
    open, and the JSON is refused as soon as it passes :data:`MAX_BYTES` (a plain file from its size, before any
    read; a gzip as it inflates).

    Raises:
        TraceFormatError: not a regular file, unreadable, larger than :data:`MAX_BYTES`, or as :func:`decode` says.
    """
    from .reading.files import is_url, open_regular

    too_big = f"more than {MAX_BYTES >> 20} MiB of JSON (the limit of a summary, a few hundred KB at most): refused"
    try:
        with open_regular(path) as f:
            if not is_url(path) and not str(path).endswith(".gz") and os.fstat(f.fileno()).st_size > MAX_BYTES:
                raise TraceFormatError(path, too_big)
            raw = f.read(MAX_BYTES + 1)
        if str(path).endswith(".gz"):
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            raw = d.decompress(raw, MAX_BYTES + 1)
            if len(raw) > MAX_BYTES:
                raise TraceFormatError(path, too_big)
            if not d.eof:
                raise TraceFormatError(path, "traceprobe summary truncated (the gzip stream ends early)")
    except OSError as e:
        raise TraceFormatError(path, f"cannot read: {e.strerror or e}") from None
    except (zlib.error, gzip.BadGzipFile) as e:
        raise TraceFormatError(path, f"traceprobe summary truncated or not gzip ({e})") from None
    if len(raw) > MAX_BYTES:
        raise TraceFormatError(path, too_big)
    return decode(raw, path)


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a summary, generated from :class:`SummaryDoc`.

    The schema is the same whatever version of msgspec or Python generates it: every ``description`` (a struct's
    docstring) goes through :func:`inspect.cleandoc` (msgspec before 0.23 copies a docstring as written, 0.23 and
    Python 3.13's compiler strip its indentation first; cleandoc gives the same text from either), and the branches
    of every ``anyOf`` are sorted (their order means nothing, and msgspec 0.18 puts ``null`` last, 0.23 first)."""
    schema = _canonical(msgspec.json.schema(SummaryDoc))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "traceprobe summary",
            "description": (__doc__ or "").split("\n\n")[1].replace("\n", " "), **schema}


def _canonical(node: Any) -> Any:
    """``node`` with, at any depth, every ``description`` string passed through inspect.cleandoc and every ``anyOf``
    list sorted by its branches' JSON text."""
    if isinstance(node, dict):
        out = {k: inspect.cleandoc(v) if k == "description" and isinstance(v, str) else _canonical(v) for k, v in node.items()}
        if isinstance(out.get("anyOf"), list):
            out["anyOf"] = sorted(out["anyOf"], key=lambda b: json.dumps(b, sort_keys=True))
        return out
    if isinstance(node, list):
        return [_canonical(v) for v in node]
    return node
