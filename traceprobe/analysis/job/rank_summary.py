"""One rank's summary as the whole-job report keeps it (:func:`rank_item`): its headline figures, its collectives as
arrays and the columns its causes read, each file read and checked once, in a worker process where ``job`` runs them
(:func:`.job.job_report_from_summaries`)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import msgspec
import numpy as np

from ...errors import Failure, TraceFormatError
from ...summary_file import Int64, Rank, SummaryDoc, read_summary
from .cause_tables import RANK_TABLES, RankColumns, rank_columns
from .summaries import TableView, check_transfers, members_of

BREAKDOWN_PARTS = ("compute_ns", "exposed_comm_ns", "exposed_copy_ns", "other_ns", "idle_ns")
"""Parts of the GPU time breakdown given per step."""
FIGURES = ("mean_step_ns", "duration_ns", "utilization", "gpu_busy_ns", "work_ns", "comm_ns", "comm_overlap", "copy_overlap",
           "stream_concurrency", "cpu_gpu_overlap", "mfu", *(p.replace("_ns", "_per_step_ns") for p in BREAKDOWN_PARTS))
"""The figures distributed across ranks (:mod:`.job`)."""

_VIEW_TABLES = ("collectives", "breakdown", "steps", "breakdown_steps", "exposed_comm", "idle_causes", "kernels", "pg_members")
"""The tables of a summary the whole-job report reads (:class:`_JobView`)."""


class _JobView(msgspec.Struct):
    """The fields of a summary (:class:`traceprobe.summary_file.SummaryDoc`) the whole-job report reads, its tables of
    :data:`_VIEW_TABLES` by name (:func:`_view`)."""

    job: str = ""
    rank: Rank | None = None
    window_ns: tuple[Int64, Int64] = (0, 0)
    event_count: Int64 = 0
    info: dict = msgspec.field(default_factory=dict)
    headline: dict[str, float | None] = msgspec.field(default_factory=dict)
    tables: Any = None
    """Its tables of :data:`_VIEW_TABLES` as attributes (:class:`~traceprobe.summary_file.Table`, None where missing)."""


def _view(doc: SummaryDoc) -> _JobView:
    """The fields of a checked summary the whole-job report reads (its other tables are let go with the doc)."""
    return _JobView(doc.job, doc.rank, doc.window_ns, doc.event_count, doc.info, doc.headline,
                    SimpleNamespace(**{n: doc.tables.get(n) for n in _VIEW_TABLES}))


COLL = ("pg", "pg_desc", "collective", "start_ns", "end_ns", "bytes", "pg_ranks", "group_size", "p2p")
"""The columns of a rank's collectives kept (:func:`_coll_arrays`), as :func:`.collectives.match_rows` reads them."""


def _col(t: TableView | None, name: str) -> list:
    """One column of a table view ([] where the table or column is missing)."""
    if t is None or name not in t.columns:
        return []
    return t.data[t.columns.index(name)]


def _view_figures(v: _JobView) -> list[float]:
    steps = max(len(_col(v.tables.steps, "step")), 1)
    b = v.tables.breakdown
    h = {k: (np.nan if x is None else float(x)) for k, x in v.headline.items()}
    for p in BREAKDOWN_PARTS:
        vals = _col(b, p)
        h[p.replace("_ns", "_per_step_ns")] = float(sum(x for x in vals if x is not None)) / steps if b is not None and p in b.columns else np.nan
    return [h.get(f, np.nan) for f in FIGURES]


def interned(_: int, got: Any) -> None:
    """A summary's :func:`rank_item` as it arrives from a worker process, its collectives' names and member lists made
    this process's one string each (:data:`_INTERN`), as where it is read here: unpickled, every rank held its own copy
    of its process groups' member lists (40 KB of text a rank for the world group of 8,192 ranks, 330 MB in all, held
    until the last rank came). In place; anything else (a failure) is let be."""
    if isinstance(got, tuple):
        coll = got[3][4]
        for c in ("pg", "pg_desc", "collective", "pg_ranks", "p2p"):
            coll[c] = _shared(coll[c])


def rank_item(path: str) -> tuple[str, str, int, tuple[int, str, str, list[float], dict[str, np.ndarray], RankColumns, int]] | Failure:
    """What the whole-job report keeps of one summary file (:func:`.job.job_report_from_summaries`), read and checked once:
    ``(run, window, steps, (rank, path, job, figures, collectives, cause columns, events))``, or its :class:`Failure`
    (a file that cannot be read, without a rank, or that does not fit its format). A module-level function of the
    path alone: the files are read in worker processes (``mapper``), their figures and arrays sent back."""
    from ..run import _run_of

    try:  # every file read and checked once, as overlap-report checks it: each one left out is one line naming it
        v = _view(read_summary(path))
        if v.rank is None:
            raise TraceFormatError(path, "traceprobe summary without a rank: the whole-job report compares ranks, left out")
        check_transfers(path, _col(v.tables.collectives, "p2p"))  # (their pairing's memory, within the command's limit)
    except TraceFormatError as e:
        return Failure(str(path), e.reason)
    except (OSError, msgspec.DecodeError) as e:
        return Failure(str(path), f"traceprobe summary truncated or unreadable ({e})")
    try:  # (checked above: a value that still does not fit is this file's failure, never the whole report's)
        steps = _col(v.tables.steps, "step")
        window = f"steps {min(steps)}-{max(steps)}" if steps else "trace"
        run = _run_of(_Named(str(path), v.info))  # type: ignore[arg-type]
        # kept per rank: its figures and its collectives as arrays (the decoded lists go at once)
        tables = {name: _table(getattr(v.tables, name)) for name in RANK_TABLES}
        coll = _coll_arrays(v)
        item = (int(v.rank), str(path), v.job, _view_figures(v), coll, rank_columns(int(v.rank), v.window_ns, tables), max(int(v.event_count), 0))
        return run, window, int(max(steps)) - int(min(steps)) + 1 if steps else 1, item
    except (ValueError, TypeError, OverflowError, IndexError, KeyError) as e:
        return Failure(str(path), f"traceprobe summary that does not fit its format ({type(e).__name__}: {e})")


class _Named:
    """What :func:`.run._run_of` reads of a report: its path and manifest facts."""

    def __init__(self, path: str, info: dict) -> None:
        self.path, self.info = path, info


def _table(t: TableView | None) -> dict[str, list] | None:
    return None if t is None else dict(zip(t.columns, t.data))


def _coll_arrays(v: _JobView) -> dict[str, np.ndarray]:
    """One rank's collectives as arrays (:data:`_COLL`); repeated names share one string."""
    t = v.tables.collectives
    out, n = {}, len(_col(t, "start_ns"))
    for c in COLL:
        vals = _col(t, c)
        if len(vals) != n:  # (a column that summaries of older versions do not carry)
            vals = [-1 if c == "group_size" else ""] * n
        if c == "pg_ranks" and v.tables.pg_members is not None and n:  # (rows of the group members' table, each list
            listed = [str(m) for m in _col(v.tables.pg_members, "pg_ranks")]  # interned once: the rows share one string)
            vals = members_of(vals, list(map(_INTERN.setdefault, listed, listed))).tolist()
        out[c] = np.array(vals, dtype=np.int64) if c in ("start_ns", "end_ns", "bytes", "group_size") else _shared(vals)
    return out


def _shared(values: Any) -> np.ndarray:
    """``values`` (strings) as an object array of this process's one object each (:data:`_INTERN`)."""
    return np.array(list(map(_INTERN.setdefault, values, values)), dtype=object)


_INTERN: dict = {}
"""Strings read from summaries, each kept once: names and member lists repeated across ranks share one object."""
