"""The second analysis engine: copy/compute overlap and cross-device concurrency in SQL.

The trace is written as a native ``.pftrace`` (:func:`traceprobe.report.perfetto.write_perfetto`),
loaded by Perfetto's ``trace_processor_shell`` through ``perfetto.trace_processor``, and
the figures are computed by :data:`COPY_SQL` and :data:`DEVICE_SQL` over its ``slice``
table. They are defined as in :func:`traceprobe.analysis.device.overlap.copy_overlap` and
:func:`traceprobe.analysis.device.concurrency.device_concurrency` and agree to the ns
(``tests/test_perfetto.py`` checks the SQL against the native figures). Used by
``overlap-report --engine perfetto``; nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..reading import Trace
from .perfetto import write_perfetto

ENV_TRACE_PROCESSOR = "TRACEPROBE_TRACE_PROCESSOR"
"""Environment variable naming the trace_processor_shell binary."""

def find_trace_processor(path: str | Path | None = None) -> str | None:
    """The trace_processor_shell to use: ``path``, else ``$TRACEPROBE_TRACE_PROCESSOR``,
    else one on ``PATH``; None if there is none (nothing is downloaded).

    Raises:
        FileNotFoundError: ``path`` or the variable names a file that does not exist.
    """
    for given in (path, os.environ.get(ENV_TRACE_PROCESSOR)):
        if given:
            if not Path(given).is_file():
                raise FileNotFoundError(f"trace processor not found: {given}")
            return str(given)
    return shutil.which("trace_processor_shell") or shutil.which("trace_processor")


def _union(name: str, src: str) -> str:
    """SQL CTEs: the union of ``src``'s intervals (device, grp, s, e) per (device, grp),
    touching intervals joined, as in :func:`traceprobe.intervals.union`."""
    return f"""{name}_o AS (SELECT device, grp, s, e, MAX(e) OVER (PARTITION BY device, grp ORDER BY s, e
    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS pm FROM {src} WHERE e > s),
{name}_g AS (SELECT device, grp, s, e, SUM(CASE WHEN pm IS NULL OR s > pm THEN 1 ELSE 0 END)
    OVER (PARTITION BY device, grp ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS gid FROM {name}_o),
{name} AS (SELECT device, grp, MIN(s) AS s, MAX(e) AS e FROM {name}_g GROUP BY device, grp, gid)"""


_EV = """ev AS (SELECT ts AS s, ts + dur AS e, EXTRACT_ARG(arg_set_id, 'debug.device') AS device,
    EXTRACT_ARG(arg_set_id, 'debug.kind') AS kind, lower(name) AS lname,
    COALESCE(EXTRACT_ARG(arg_set_id, 'debug.direction'), 'unknown') AS direction
    FROM slice WHERE EXTRACT_ARG(arg_set_id, 'debug.kind') IS NOT NULL)"""

COPY_SQL = f"""WITH {_EV},
cp AS (SELECT device, direction AS grp, s, e FROM ev WHERE kind = 'memcpy'
    UNION ALL SELECT device, 'all' AS grp, s, e FROM ev WHERE kind = 'memcpy'),
kp AS (SELECT device, 'compute' AS grp, s, e FROM ev
    WHERE kind = 'kernel' AND NOT (lname GLOB '*nccl*' OR lname GLOB '*rccl*')),
{_union('cu', 'cp')},
{_union('ku', 'kp')},
n AS (SELECT device, grp, COUNT(*) AS copies FROM cp GROUP BY device, grp),
t AS (SELECT device, grp, SUM(e - s) AS copy_ns FROM cu GROUP BY device, grp),
o AS (SELECT c.device, c.grp, SUM(MIN(c.e, k.e) - MAX(c.s, k.s)) AS overlapped_ns FROM cu c
    JOIN ku k ON k.device = c.device AND k.s < c.e AND c.s < k.e GROUP BY c.device, c.grp)
SELECT n.device AS device, n.grp AS direction, n.copies AS copies, COALESCE(t.copy_ns, 0) AS copy_ns,
    COALESCE(o.overlapped_ns, 0) AS overlapped_ns
FROM n LEFT JOIN t ON t.device = n.device AND t.grp = n.grp
    LEFT JOIN o ON o.device = n.device AND o.grp = n.grp ORDER BY device, direction"""

DEVICE_SQL = f"""WITH {_EV},
dv AS (SELECT device, 'busy' AS grp, s, e FROM ev),
{_union('du', 'dv')},
p AS (SELECT s AS t, 1 AS d FROM du UNION ALL SELECT e AS t, -1 AS d FROM du),
w AS (SELECT t, SUM(d) OVER (ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS c, LEAD(t) OVER (ORDER BY t, d) AS nt FROM p)
SELECT COALESCE(SUM(CASE WHEN c >= 1 THEN nt - t ELSE 0 END), 0) AS any_busy_ns,
    COALESCE(SUM(CASE WHEN c >= 2 THEN nt - t ELSE 0 END), 0) AS concurrent_ns,
    (SELECT COUNT(DISTINCT device) FROM ev) AS device_count
FROM w WHERE nt IS NOT NULL"""


@dataclass(frozen=True)
class SqlFigures:
    """Figures computed by trace_processor SQL from the exported device slices:
    ``copy_overlap`` with the columns of :func:`~traceprobe.analysis.copy_overlap` but
    ``bytes``, and cross-device concurrency as in :class:`~traceprobe.analysis.DeviceConcurrency`."""

    path: str
    copy_overlap: pd.DataFrame
    any_busy_ns: int
    concurrent_ns: int
    concurrency: float
    device_count: int


def sql_figures(trace: Trace, bin_path: str) -> SqlFigures:
    """Export ``trace`` to a temporary .pftrace and compute copy/compute overlap and
    cross-device concurrency in SQL through ``perfetto.trace_processor.TraceProcessor``."""
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig

    with tempfile.TemporaryDirectory(prefix="traceprobe-") as tmp:
        pf = Path(tmp) / "trace.pftrace"
        write_perfetto(trace, pf, None)
        with TraceProcessor(trace=str(pf), config=TraceProcessorConfig(bin_path=bin_path)) as tp:
            copy = tp.query(COPY_SQL).as_pandas_dataframe()
            dev = tp.query(DEVICE_SQL).as_pandas_dataframe()
    copy = copy.astype({"device": np.int64, "copies": np.int64, "copy_ns": np.int64, "overlapped_ns": np.int64})
    copy["fraction"] = np.where(copy["copy_ns"] > 0, copy["overlapped_ns"] / copy["copy_ns"].where(copy["copy_ns"] > 0, 1), np.nan)
    any_ns, conc = (int(dev[c].iloc[0]) if len(dev) and pd.notna(dev[c].iloc[0]) else 0 for c in ("any_busy_ns", "concurrent_ns"))
    count = int(dev["device_count"].iloc[0]) if len(dev) else 0
    return SqlFigures(trace.path, copy, any_ns, conc, conc / any_ns if any_ns else float("nan"), count)


def format_sql_figures(f: SqlFigures) -> str:
    """Plain-text lines of :class:`SqlFigures` for the terminal (times in ms, 3 decimals)."""
    out = [f"{f.path} (trace_processor SQL)"]
    for r in f.copy_overlap.itertuples(index=False):
        out.append(f"  cuda:{r.device} {r.direction:8} copies {r.copies:6,}  copy {r.copy_ns / 1e6:12,.3f} ms  "  # pyright: ignore  (pandas/matplotlib stubs)
                   f"under compute {r.overlapped_ns / 1e6:12,.3f} ms  {r.fraction:7.1%}")  # pyright: ignore  (pandas/matplotlib stubs)
    if f.device_count:
        out.append(f"  {f.device_count} device(s): any busy {f.any_busy_ns / 1e6:,.3f} ms, 2+ busy "
                   f"{f.concurrent_ns / 1e6:,.3f} ms ({f.concurrency:.1%})")
    return "\n".join(out)
