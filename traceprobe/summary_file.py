"""Summaries: the compact, versioned file that stands for one rank's trace of one profiler window.

A summary (``<name>.summary.json``) holds everything a report and the cross-rank analysis take from a trace
(:class:`traceprobe.analysis.per_trace.OverlapReport`'s tables and figures, its collectives with their process
group, sequence, bytes, start and end), a few KB to a few hundred KB instead of tens of MB. It is written
during training by :func:`traceprobe.on_trace_ready`, or from any report by
:func:`traceprobe.analysis.summaries.write_summary`, and read back into the same report by
:func:`traceprobe.analysis.summaries.load_summary`: ``overlap-report``, ``diff`` and the gates read folders of
summaries, traces or both.

This module defines the format (msgspec structs; :func:`json_schema` is its JSON Schema, draft 2020-12) and
decodes a file, checking it; it needs neither pandas nor the analysis.

Format (``format`` = :data:`FORMAT`, ``version`` = :data:`VERSION`):

- ``job``: the job the summary belongs to (``on_trace_ready``'s ``job``, else ``TORCHELASTIC_RUN_ID``, else
  ``SLURM_JOB_ID``, else the folder's name); the summaries of one folder must share it.
- ``traceprobe``: the version that wrote it; ``source``: the trace it summarises (file name, "" if none was kept).
- ``rank``, ``window_ns``, ``event_count``, ``throughput``, ``work_ns``, ``backend``, ``training``,
  ``all_device_work``, ``warnings``, ``notes``, ``info`` (the manifest's facts): as in the report.
- ``tables``: the report's tables by name (``streams``, ``copy_overlap``, ``devices``, ``stream_concurrency``,
  ``comm_overlap``, ``steps``, ``breakdown``, ``breakdown_steps``, ``findings``, ``kernels``, ``queue``,
  ``collectives``, ``set_aside``, ``exposed_comm``, ``idle_causes``), each column-major: ``columns``, their
  pandas ``dtypes`` and ``data`` (one list per column; ``null`` for NaN or missing). Times are int64 ns,
  fractions 0..1; each column is defined where its table is computed (:mod:`traceprobe.analysis`).
- ``headline``: the report's headline figures (``OverlapReport.headline``: what the whole-job report
  distributes across ranks without building the tables); ``device_concurrency``, ``cpu_gpu``, ``host_threads``:
  the report's scalar figures; ``verdicts``: its verdicts.

Errors: a file that is truncated or not JSON, of another format or version, is a
:class:`~traceprobe.errors.TraceFormatError` naming it (one line); one from another job is named when a
folder is read (:func:`traceprobe.analysis.summaries.foreign_jobs`).
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path
from typing import Any, Literal

import msgspec

from .errors import TraceFormatError

FORMAT = "traceprobe-summary"
"""The ``format`` field of every summary."""
VERSION = 1
"""The format version this traceprobe writes and reads."""
SUFFIXES = (".summary.json", ".summary.json.gz")
"""File names of summaries end with one of these."""
MAX_BYTES = 256 << 20
"""Largest summary read (256 MiB decompressed): a summary is a few hundred KB at most."""

Value = int | float | str | bool | None


class Table(msgspec.Struct, forbid_unknown_fields=True):
    """One DataFrame, column-major: names, pandas dtypes (``int64``, ``float64``, ``Int64``, ``str``, ``object``,
    ``bool``, ``category``), and one list of values per column (``null`` for NaN or missing)."""

    columns: list[str]
    dtypes: list[str]
    data: list[list[Value]]


class DeviceConcurrencyFigures(msgspec.Struct, forbid_unknown_fields=True):
    """:class:`traceprobe.analysis.concurrency.DeviceConcurrency` without its table (``tables.devices``)."""

    any_busy_ns: int
    concurrent_ns: int
    concurrency: float | None
    device_count: int


class CpuGpuFigures(msgspec.Struct, forbid_unknown_fields=True):
    """:class:`traceprobe.analysis.overlap.CpuGpuOverlap`."""

    host_compute_ns: int
    device_busy_ns: int
    overlapped_ns: int
    fraction: float | None
    fraction_of_device: float | None
    fraction_of_shorter: float | None


class HostThreadFigures(msgspec.Struct, forbid_unknown_fields=True):
    """:class:`traceprobe.analysis.host_threads.HostThreadConcurrency`."""

    threads: int
    busy_ns: int
    multi_thread_ns: int
    thread_ns_sum: int
    busiest_thread_ns: int
    concurrency: float | None
    fair_concurrency: float | None


class VerdictDoc(msgspec.Struct, forbid_unknown_fields=True):
    """:class:`traceprobe.analysis.verdicts.Verdict`."""

    figure: str
    subject: str
    value: float | None
    level: str
    text: str


class SummaryDoc(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One summary file (module docstring)."""

    format: Literal["traceprobe-summary"]
    version: int
    job: str
    traceprobe: str
    source: str
    rank: int | None
    window_ns: tuple[int, int]
    event_count: int
    throughput: float | None
    work_ns: int
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
        TraceFormatError: truncated or not JSON, not a summary, another format version, or fields that do not fit.
    """
    try:
        head = msgspec.json.decode(raw, type=_Head)
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
        return msgspec.json.decode(raw, type=SummaryDoc)
    except msgspec.DecodeError as e:
        raise TraceFormatError(path, f"traceprobe summary version {VERSION} that does not fit its format ({e})") from None


def read_summary(path: str | Path) -> SummaryDoc:
    """Read, check and decode one summary file (``.gz``: gzipped), local or an fsspec URL.

    Raises:
        TraceFormatError: unreadable, larger than :data:`MAX_BYTES`, or as :func:`decode` says.
    """
    from .reading.files import open_binary

    try:
        with open_binary(path) as f:
            raw = f.read(MAX_BYTES + 1)
        if str(path).endswith(".gz"):
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            raw = d.decompress(raw, MAX_BYTES + 1)
            if not d.eof:
                raise TraceFormatError(path, "traceprobe summary truncated (the gzip stream ends early)")
    except OSError as e:
        raise TraceFormatError(path, f"cannot read: {e.strerror or e}") from None
    except (zlib.error, gzip.BadGzipFile) as e:
        raise TraceFormatError(path, f"traceprobe summary truncated or not gzip ({e})") from None
    if len(raw) > MAX_BYTES:
        raise TraceFormatError(path, f"larger than {MAX_BYTES >> 20} MiB: not a traceprobe summary")
    return decode(raw, path)


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a summary, generated from :class:`SummaryDoc`."""
    schema = msgspec.json.schema(SummaryDoc)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "traceprobe summary",
            "description": (__doc__ or "").split("\n\n")[1].replace("\n", " "), **schema}
