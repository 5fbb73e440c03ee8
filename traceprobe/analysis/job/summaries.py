"""Summaries from reports and reports from summaries (the format: :mod:`traceprobe.summary_file`).

:func:`to_summary` turns an :class:`~.per_trace.OverlapReport` into a :class:`~traceprobe.summary_file.SummaryDoc`
holding every table and figure of the report and its part of the job's dependency graph (:mod:`.graph_tables`);
:func:`from_summary` gives the report back, equal to the one it
was written from in every field but ``path`` (the summary's own path, so that runs, windows and errors name the
file read). The cross-rank analysis (:mod:`.summary`, :mod:`.collectives`, :mod:`.causes`, :mod:`.clocks`,
:mod:`.job`) needs nothing more than these reports.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from ...errors import Failure, TraceFormatError
from ...summary_file import (
    FORMAT,
    VERSION,
    CpuGpuFigures,
    DeviceConcurrencyFigures,
    HostThreadFigures,
    SummaryDoc,
    Table,
    VerdictDoc,
    encode,
    read_summary,
)
from ..advice.verdicts import Verdict
from ..causal.dependency_graph import RankGraph
from ..device.concurrency import DeviceConcurrency
from ..device.overlap import CpuGpuOverlap
from ..host.host_threads import HostThreadConcurrency
from ..per_trace import OverlapReport
from ..registry import COMPUTED
from .graph_tables import MAX_INFLATED, graph_blob, graph_from_blob, inflated_size
from .graph_tables import TABLE as GRAPH_TABLE

TABLES = ("streams", "copy_overlap", "stream_concurrency", "comm_overlap", "steps", "breakdown", "breakdown_steps", "findings",
          "kernels", "queue", "collectives", "set_aside", "exposed_comm", "idle_causes")
"""The report's DataFrame fields a summary carries by name (and ``devices``, the table of ``OverlapReport.devices``, and
the tables of :attr:`.per_trace.OverlapReport.extra`, by their keys in :data:`.registry.COMPUTED`)."""


def _num(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else float(x)


def _unnum(x: float | None) -> float:
    return math.nan if x is None else float(x)


def _column(s: pd.Series) -> list[Any]:
    if isinstance(s.dtype, np.dtype) and s.dtype.kind in "iub":
        return s.to_numpy().tolist()
    if isinstance(s.dtype, np.dtype) and s.dtype.kind == "f":
        v = s.to_numpy()
        out = v.tolist()
        for i in np.flatnonzero(~np.isfinite(v)).tolist():
            out[i] = None
        return out
    vals = s.astype(object).tolist()
    return [None if (v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))) else
            (int(v) if isinstance(v, np.integer) else float(v) if isinstance(v, np.floating) else bool(v) if isinstance(v, np.bool_) else v)
            for v in vals]


def table_doc(df: pd.DataFrame | None) -> Table:
    """One DataFrame as a :class:`~traceprobe.summary_file.Table` (its index is not kept: every report table has a RangeIndex)."""
    if df is None:
        return Table([], [], [])
    return Table([str(c) for c in df.columns], [str(df[c].dtype) for c in df.columns], [_column(df[c]) for c in df.columns])


def table_frame(t: Table) -> pd.DataFrame:
    """The DataFrame of a :class:`~traceprobe.summary_file.Table`, with its dtypes."""
    cols = {}
    for name, dtype, values in zip(t.columns, t.dtypes, t.data):
        if dtype == "float64":
            cols[name] = pd.Series(np.array([np.nan if v is None else v for v in values], dtype=np.float64))
        elif dtype in ("int64", "int32", "bool", "uint8"):
            cols[name] = pd.Series(np.array(values, dtype=dtype))
        elif dtype == "object":
            cols[name] = pd.Series(values, dtype=object)
        else:
            cols[name] = pd.Series(values, dtype=dtype)
    return pd.DataFrame(cols, columns=t.columns) if cols else pd.DataFrame(columns=t.columns)


def _clean_info(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _clean_info(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean_info(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v if isinstance(v, (str, int, float, bool)) or v is None else str(v)


def to_summary(report: OverlapReport, job: str = "", source: str | None = None) -> SummaryDoc:
    """The summary of ``report`` (:mod:`traceprobe.summary_file`).

    Args:
        report: one trace's report.
        job: the job it belongs to (:func:`traceprobe.summary_file.default_job` when writing during training).
        source: the trace file it summarises (default: the report's path's name; "" when no trace was kept).
    """
    from ...version import __version__

    dc, cpu, th = report.devices, report.cpu_gpu, report.host_threads
    tables = {name: table_doc(getattr(report, name)) for name in TABLES}
    coll = report.collectives
    if coll is not None and "pg_ranks" in coll.columns and len(coll):  # (a group's members once, not on every collective)
        codes, members = pd.factorize(coll["pg_ranks"].fillna("").astype(str))
        tables["collectives"] = table_doc(coll.assign(pg_ranks=codes.astype(np.int64)))
        tables[PG_MEMBERS] = table_doc(pd.DataFrame({"pg_ranks": pd.Series([str(m) for m in members], dtype=coll["pg_ranks"].dtype)}))
    tables["devices"] = table_doc(dc.devices)
    tables.update({key: table_doc(df) for key, df in report.extra.items()})
    if report.graph is not None:  # (the rank's part of the dependency graph: what-ifs and the critical path from summaries)
        tables[GRAPH_TABLE] = Table(["npz"], ["object"], [[graph_blob(report.graph)]])
    return SummaryDoc(
        format=FORMAT, version=VERSION, job=job, traceprobe=__version__,
        source=Path(report.path).name if source is None else source,
        rank=report.rank, window_ns=(int(report.window_ns[0]), int(report.window_ns[1])), event_count=int(report.event_count),
        throughput=_num(report.throughput), work_ns=int(report.work_ns), backend=report.backend, training=report.training, wrapper=report.wrapper,
        forward_allreduce=list(report.forward_allreduce),
        all_device_work=bool(report.all_device_work), warnings=list(report.warnings), notes=list(report.notes),
        info=_clean_info(report.info), headline={k: _num(v) for k, v in report.headline.items()},
        device_concurrency=DeviceConcurrencyFigures(int(dc.any_busy_ns), int(dc.concurrent_ns), _num(dc.concurrency), int(dc.device_count)),
        cpu_gpu=CpuGpuFigures(int(cpu.host_compute_ns), int(cpu.device_busy_ns), int(cpu.overlapped_ns), _num(cpu.fraction),
                              _num(cpu.fraction_of_device), _num(cpu.fraction_of_shorter)),
        host_threads=None if th is None else HostThreadFigures(int(th.threads), int(th.busy_ns), int(th.multi_thread_ns), int(th.thread_ns_sum),
                                                              int(th.busiest_thread_ns), _num(th.concurrency), _num(th.fair_concurrency)),
        verdicts=[VerdictDoc(v.figure, v.subject, _num(v.value), v.level, v.text) for v in report.verdicts],
        tables=tables,
    )


def from_summary(doc: SummaryDoc, path: str | Path, graph_limit: int = MAX_INFLATED) -> OverlapReport:
    """The report a summary was written from; ``path`` (the summary's) becomes its ``path``, and ``info`` gains
    ``job`` and ``summary_of`` (the trace summarised); its graph may inflate to ``graph_limit`` bytes."""
    t = doc.tables
    frame = {name: table_frame(t[name]) if name in t else pd.DataFrame() for name in (*TABLES, "devices")}
    if PG_MEMBERS in t and "pg_ranks" in frame["collectives"].columns:
        members = table_frame(t[PG_MEMBERS])["pg_ranks"]
        frame["collectives"]["pg_ranks"] = members_of(frame["collectives"]["pg_ranks"].tolist(), members.tolist()).astype(members.dtype)
    dc, cpu, th = doc.device_concurrency, doc.cpu_gpu, doc.host_threads
    info = {**doc.info, "job": doc.job, "summary_of": doc.source}
    report = OverlapReport(
        path=str(path), window_ns=(int(doc.window_ns[0]), int(doc.window_ns[1])), streams=frame["streams"],
        copy_overlap=frame["copy_overlap"],
        devices=DeviceConcurrency(frame["devices"], dc.any_busy_ns, dc.concurrent_ns, _unnum(dc.concurrency), dc.device_count),
        stream_concurrency=frame["stream_concurrency"], comm_overlap=frame["comm_overlap"],
        cpu_gpu=CpuGpuOverlap(cpu.host_compute_ns, cpu.device_busy_ns, cpu.overlapped_ns, _unnum(cpu.fraction),
                              _unnum(cpu.fraction_of_device), _unnum(cpu.fraction_of_shorter)),
        steps=frame["steps"], throughput=_unnum(doc.throughput),
        verdicts=[Verdict(v.figure, v.subject, _unnum(v.value), v.level, v.text) for v in doc.verdicts],
        rank=doc.rank, info=info, event_count=doc.event_count, warnings=tuple(doc.warnings),
        breakdown=frame["breakdown"], breakdown_steps=frame["breakdown_steps"], findings=frame["findings"], kernels=frame["kernels"],
        queue=frame["queue"], collectives=frame["collectives"], set_aside=frame["set_aside"], notes=tuple(doc.notes),
        all_device_work=doc.all_device_work, work_ns=doc.work_ns,
        host_threads=None if th is None else HostThreadConcurrency(th.threads, th.busy_ns, th.multi_thread_ns, th.thread_ns_sum,
                                                                   th.busiest_thread_ns, _unnum(th.concurrency), _unnum(th.fair_concurrency)),
        exposed_comm=frame["exposed_comm"], idle_causes=frame["idle_causes"], backend=doc.backend, training=doc.training, wrapper=doc.wrapper,
        forward_allreduce=tuple(int(d) for d in doc.forward_allreduce),
        extra={f.key: table_frame(t[f.key]) if f.key in t else pd.DataFrame() for f in COMPUTED},
        graph=_graph(t.get(GRAPH_TABLE), graph_limit),
    )
    report.headline  # noqa: B018 - computed where the summary is read, as overlap_report does
    return report


PG_MEMBERS = "pg_members"
"""The summary table of the process groups' member lists (column ``pg_ranks``, str): a collective's ``pg_ranks`` in the
summary is a row of it (int64), not the list itself (a group of 4,096 ranks names 20 KB of members)."""


def members_of(codes: list, members: list) -> pd.Series:
    """The ``pg_ranks`` strings of ``codes`` (int: rows of a summary's :data:`PG_MEMBERS`).

    Raises:
        ValueError: a code that is not an integer row of the table.
    """
    c = np.asarray(codes)
    if c.size and (c.dtype.kind not in "iu" or int(c.min()) < 0 or int(c.max()) >= len(members)):
        raise ValueError(f"a process group's members beyond its table of {len(members)}")
    return pd.Series(np.asarray([str(m) for m in members] or [""], dtype=object)[c.astype(np.int64)], dtype=object)


def summary_bytes(report: OverlapReport, job: str = "", source: str | None = None) -> bytes:
    """The JSON bytes of ``report``'s summary (:func:`to_summary`)."""
    return encode(to_summary(report, job, source))


def write_summary(report: OverlapReport, path: str | Path, job: str = "", source: str | None = None) -> Path:
    """Write ``report``'s summary to ``path`` atomically (a temporary file renamed; gzipped if it ends in ``.gz``).

    Raises:
        traceprobe.fileio.WriteError: the folder cannot be written (read-only, full...); no partial file is left.
    """
    from ...fileio import atomic_write

    atomic_write(path, summary_bytes(report, job, source), compress=str(path).endswith(".gz"))
    return Path(path)


def load_summary(path: str | Path) -> OverlapReport:
    """The report of a summary file (:func:`traceprobe.summary_file.read_summary`, :func:`from_summary`).

    Raises:
        TraceFormatError: as :func:`~traceprobe.summary_file.read_summary` says, or a value the decode let through
            that no table can hold (one line naming the file).
    """
    doc = read_summary(path)
    graph_limit = check_memory(doc, path)
    try:
        return from_summary(doc, path, graph_limit)
    except (ValueError, TypeError, OverflowError, IndexError, KeyError, RecursionError, MemoryError) as e:  # (the decode checks what it can)
        raise TraceFormatError(path, f"traceprobe summary that does not fit its format ({type(e).__name__}: {e})") from None


def foreign_jobs(reports: list[OverlapReport]) -> tuple[list[OverlapReport], list[Failure]]:
    """Summaries of another job than the others of their folder, each a :class:`Failure` naming it.

    In each folder, the job most of its summaries carry (the first by path on a tie) is the folder's; a summary
    of another job is left out with one line. Reports read from traces (no ``job`` in ``info``) are kept.
    """
    by_folder: dict[str, list[OverlapReport]] = {}
    for r in reports:
        if "summary_of" in r.info:
            by_folder.setdefault(str(Path(r.path).parent), []).append(r)
    bad: set[int] = set()
    failures = []
    for _, group in sorted(by_folder.items()):
        counts = Counter(str(r.info.get("job", "")) for r in sorted(group, key=lambda r: r.path))
        top = max(counts.values())
        job = next(j for j in counts if counts[j] == top)
        for r in group:
            if str(r.info.get("job", "")) != job:
                bad.add(id(r))
                failures.append(Failure(r.path, f"traceprobe summary of another job ({r.info.get('job')!r}; "
                                                f"the other summaries of this folder are of {job!r}): left out"))
    return [r for r in reports if id(r) not in bad], sorted(failures, key=lambda f: f.path)


GRAPH_RATIO = 64
"""A summary's graph may inflate to at most this many times the summary's size on disk (gzipped where the file is;
its blob's length where the file's size is unknown): real summaries' graphs inflate to 0.4-8x their file (1.7-12x a
gzipped one; 62 summaries of sample_traces), a blob of zeros to 1,000x."""
TRANSFER_BYTES = 512
"""Memory counted per point-to-point transfer a summary's ``p2p`` column names (pairing them took 453 bytes a transfer,
measured on one column of 10^6 ``send:1``)."""


def check_memory(doc: SummaryDoc, path: str | Path) -> int:
    """Count what a summary will take beyond its JSON against the command's memory limit (the one ``--max-bytes`` sets
    and the workers share, :func:`traceprobe.reading.files.reserve`): its graph inflated and its transfers at
    :data:`TRANSFER_BYTES` each; the graph must also inflate to at most :data:`GRAPH_RATIO` times the file's size.

    Returns:
        the most the summary's graph may inflate to (bytes), for :func:`from_summary`.

    Raises:
        TraceFormatError: the graph inflates past its share of the file, or the whole passes the limit (one line
            naming the file).
    """
    from ...reading.files import is_url, reserve

    t = doc.tables
    graph = t.get(GRAPH_TABLE)
    blob = graph.data[0][0] if graph is not None and len(graph.data) == 1 and len(graph.data[0]) == 1 else None
    inflated = 0
    if isinstance(blob, str):
        try:
            inflated = inflated_size(blob)
        except ValueError as e:
            raise TraceFormatError(path, f"traceprobe summary whose graph does not fit its format ({e})") from None
        size = len(blob) if is_url(path) else max(Path(path).stat().st_size, 1)
        if inflated > GRAPH_RATIO * size:
            raise TraceFormatError(path, f"traceprobe summary whose graph inflates to {inflated:,} bytes, more than {GRAPH_RATIO}x "
                                         f"its file's {size:,} (a real summary's graph: at most about 12x): refused")
    coll = t.get("collectives")
    transfers = count_transfers(coll.data[coll.columns.index("p2p")] if coll is not None and "p2p" in coll.columns else [])
    reserve(path, inflated + TRANSFER_BYTES * transfers,
            f"its graph ({inflated:,} bytes inflated) and {transfers:,} point-to-point transfers")
    return max(inflated, 1)


def count_transfers(p2p: list) -> int:
    """How many point-to-point transfers a summary's ``p2p`` column names (``send:1;recv:0``: one per ``;``-separated
    item of each non-empty string)."""
    return sum(v.count(";") + 1 for v in p2p if isinstance(v, str) and v)


def check_transfers(path: str | Path, p2p: list) -> None:
    """Count a summary's transfers (its ``p2p`` column, :func:`count_transfers`) at :data:`TRANSFER_BYTES` each against
    the command's memory limit, as :func:`check_memory` does, for a reader that decodes the collectives alone (the
    whole-job report from summaries).

    Raises:
        TraceFormatError: past the limit (one line naming the file).
    """
    from ...reading.files import reserve

    n = count_transfers(p2p)
    reserve(path, TRANSFER_BYTES * n, f"its {n:,} point-to-point transfers")


def _graph(t: Any, limit: int = MAX_INFLATED) -> RankGraph | None:
    """The graph of a summary's ``graph`` table (a :class:`Table` or a decoded view of one), None without one.

    Raises:
        ValueError: a table that holds no packed graph (the caller names the file).
    """
    if t is None:
        return None
    if list(t.columns) != ["npz"] or len(t.data) != 1 or len(t.data[0]) != 1 or not isinstance(t.data[0][0], str):
        raise ValueError("a graph table that is not one packed graph")
    return graph_from_blob(t.data[0][0], limit)


class TableView(msgspec.Struct):
    """A summary's table as a decoder reads it without building a DataFrame: ``columns``, their ``dtypes`` and one
    list per column (checked as the full decode checks them: :func:`traceprobe.summary_file.tables_problem`)."""

    columns: list[str]
    data: list[list]
    dtypes: list[str] = msgspec.field(default_factory=list)


class _GraphTables(msgspec.Struct):
    graph: TableView | None = None


class _GraphSummary(msgspec.Struct):
    tables: _GraphTables = msgspec.field(default_factory=_GraphTables)


def graph_of_file(path: str | Path) -> RankGraph | None:
    """The rank's graph of the summary file at ``path`` (its graph table alone decoded), None where it carries none.

    Raises:
        TraceFormatError: as :func:`~traceprobe.summary_file.read_summary` says, a graph table that holds no graph,
            or a graph that inflates past :data:`GRAPH_RATIO` times the file's size.
        OSError, msgspec.DecodeError: the file cannot be read or is not JSON.
    """
    raw = Path(path).read_bytes() if not str(path).endswith(".gz") else msgspec.json.encode(read_summary(path))
    try:
        limit = GRAPH_RATIO * max(Path(path).stat().st_size, 1)  # (as check_memory's: a multiple of the file's size)
        return _graph(msgspec.json.decode(raw, type=_GraphSummary).tables.graph, limit)
    except ValueError as e:
        raise TraceFormatError(path, f"traceprobe summary whose graph does not fit its format ({e})") from None
