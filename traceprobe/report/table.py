"""``overlap-report``'s default output: a summary a person reads in ten seconds.

Rendered from a :class:`~traceprobe.analysis.summary.Summary`; nothing is computed here.

1. One row per trace: its run (relative to the folder all traces share), rank,
   profiler window (``2-4`` for steps 2 to 4, ``#n`` for the n-th trace of a rank),
   ``busy`` (the mean over its devices of the device utilization, see
   :func:`traceprobe.analysis.concurrency.device_concurrency`), one column per
   judged figure (copy/compute, cross-device, streams, comm/compute, CPU/GPU,
   host threads) showing the verdict of that figure with the highest value and
   its level as a short word (``yes`` confirmed, ``some`` partial, ``no`` none;
   ``-`` no verdict), and the trace's top finding with its headroom in ms.
2. One row per window of each multi-rank run: ranks, ``work/comm``: the rank
   with the most device work outside collectives and the rank with the most
   time in collectives (no rank is called slowest: see ``analysis/ranks.py``), and
   min-max across ranks of step time, busy and the figures.
3. One line on the stopwatch comparison and the warnings, when there are any.

Failures are not here: the CLI prints them once, on stderr. ``--detail`` gives
every table (:mod:`.panels`). Every text from a trace or a path is a rich
``Text``, never markup. At 100 columns the table fits (long names and findings
are cut with an ellipsis); nothing wraps.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis.report import OverlapReport
from ..analysis.summary import Summary

FIGURES = (("copy_overlap", "copy"), ("device_concurrency", "devices"), ("stream_concurrency", "streams"),
           ("comm_overlap", "comm"), ("cpu_gpu", "cpu/gpu"), ("host_threads", "threads"))
"""Verdict figures with a column, in order, and their headers."""
WORD = {"confirmed": "yes", "partial": "some", "none": "no"}
STYLE = {"confirmed": "green", "partial": "yellow", "none": "red"}
RANK_FIGURES = (("mean_step_ns", "step ms"), ("utilization", "busy"), ("copy_overlap", "copy"), ("comm_overlap", "comm"),
                ("stream_concurrency", "streams"), ("cpu_gpu_overlap", "cpu/gpu"))
"""Rank-summary figures shown per window, and their headers."""
RUN_WIDTH = 34
"""Longest run label shown; longer ones end in an ellipsis."""


def _nan(v: object) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _pct(f: float) -> str:
    return "-" if _nan(f) else f"{f:.0%}"


def _window(label: str) -> str:
    if label.startswith("steps "):
        return label[6:]
    return "#" + label[6:] if label.startswith("trace ") else ""


def _stem(path: str) -> str:
    name = Path(path).name
    for suffix in (".gz", ".json", ".trace", ".pt"):
        name = name[: -len(suffix)] if name.endswith(suffix) else name
    return name


def _base(summary: Summary) -> str:
    folders = [str(Path(r.path).parent) for r in summary.reports]
    try:
        return os.path.commonpath(folders) if folders else ""
    except ValueError:  # absolute and relative paths mixed
        return ""


def _rel(name: str, base: str) -> str:
    rel = os.path.relpath(name, base) if base and not name.startswith(("s3:", "gs:")) else name
    return name if rel.startswith("..") else rel


def _places(summary: Summary) -> dict[int, tuple[str, str, int | None]]:
    """id(report) -> (run label, window label, rank)."""
    base = _base(summary)
    out: dict[int, tuple[str, str, int | None]] = {}
    for run in summary.runs:
        for w in run.windows:
            for rank, r in zip(w.ranks, w.reports):
                named = r.info.get("workload") or rank is not None
                label = _rel(run.name, base) if named else _rel(str(Path(r.path).parent / _stem(r.path)), base)
                out[id(r)] = (label, w.label if named else "", rank)
    return out


def _best(r: OverlapReport, figure: str) -> Text:
    vs = [v for v in r.verdicts if v.figure == figure]
    if not vs:
        return Text("-", style="dim")
    v = max(vs, key=lambda v: v.value)
    return Text(f"{v.value:.0%} {WORD.get(v.level, v.level)}", style=STYLE.get(v.level, ""))


def _finding(r: OverlapReport) -> Text:
    f = getattr(r, "findings", None)
    if f is None or len(f) == 0:
        return Text("")
    top = f.iloc[0]
    return Text(f"{str(top['kind']).replace('_', ' ')} {top['headroom_ns'] / 1e6:,.1f} ms")


def _busy(r: OverlapReport) -> str:
    d = r.devices.devices
    return "-" if d.empty else _pct(float(d["utilization"].mean()))


def _table(title: str | None = None) -> Table:
    return Table(box=None, pad_edge=False, collapse_padding=True, header_style="bold", show_edge=False,
                 title=Text(title, style="bold") if title else None, title_justify="left")


def trace_table(summary: Summary) -> Table:
    """Part 1 of the module doc: one row per trace."""
    shown = [(f, h) for f, h in FIGURES if any(v.figure == f for r in summary.reports for v in r.verdicts)]
    t = _table()
    t.add_column("run", no_wrap=True, overflow="ellipsis", max_width=RUN_WIDTH)
    t.add_column("rank", justify="right", no_wrap=True, min_width=4)
    t.add_column("steps", no_wrap=True, min_width=5)
    t.add_column("busy", justify="right", no_wrap=True, min_width=4)
    for _, h in shown:
        t.add_column(h, no_wrap=True, min_width=8)
    t.add_column("top finding", no_wrap=True, overflow="ellipsis")
    places = _places(summary)
    last = None
    for r in [r for run in summary.runs for w in run.windows for r in w.reports]:
        run, window, rank = places[id(r)]
        t.add_row(Text("" if run == last else run), "-" if rank is None else str(rank), Text(_window(window)), _busy(r),
                  *[_best(r, f) for f, _ in shown], _finding(r))
        last = run
    return t


def _value(g: pd.DataFrame, figure: str, column: str) -> float:
    vals = g.loc[g["figure"] == figure, column].to_numpy(dtype=float)
    return float(vals[0]) if len(vals) else math.nan


def _span(g: pd.DataFrame, figure: str) -> str:
    lo, hi = _value(g, figure, "min"), _value(g, figure, "max")
    if _nan(lo):
        return "-"
    if figure.endswith("_ns"):
        return f"{lo / 1e6:,.1f}" if round(lo / 1e5) == round(hi / 1e5) else f"{lo / 1e6:,.1f}-{hi / 1e6:,.1f}"
    return _pct(lo) if round(lo * 100) == round(hi * 100) else f"{lo:.0%}-{hi:.0%}"


def _straggler(g: pd.DataFrame) -> str:
    """Most device work outside collectives, and most time in collectives (which includes waiting for peers)."""
    busiest, most_comm = g["busiest_rank"].iloc[0], g["most_comm_rank"].iloc[0]
    return f"{int(busiest)}/" + ("-" if pd.isna(most_comm) else f"{int(most_comm)}")


def rank_table(summary: Summary) -> Table | None:
    """Part 2 of the module doc: one row per window of each multi-rank run; None without one."""
    rs = summary.rank_summary
    if rs.empty:
        return None
    base = _base(summary)
    t = _table("across ranks")
    t.add_column("run", no_wrap=True, overflow="ellipsis", max_width=RUN_WIDTH)
    t.add_column("steps", no_wrap=True, min_width=5)
    t.add_column("ranks", justify="right", no_wrap=True)
    t.add_column("work/comm", no_wrap=True, min_width=9)
    for _, h in RANK_FIGURES:
        t.add_column(h, justify="right", no_wrap=True, min_width=7)
    last = None
    for _, g in rs.groupby(["run", "window"], sort=False):
        label = _rel(str(g["run"].to_numpy()[0]), base)
        t.add_row(Text("" if label == last else label), Text(_window(str(g["window"].to_numpy()[0]))), str(int(g["ranks"].to_numpy()[0])),
                  _straggler(g),
                  *[_span(g, f) for f, _ in RANK_FIGURES])
        last = label
    return t


def notes(summary: Summary) -> list[Text]:
    """Part 3 of the module doc: the stopwatch and warnings, one line each (empty when there is nothing to say)."""
    out = []
    v = summary.variants
    if len(v):
        judged = v[v["agreement"].isin(["agrees", "disagrees"])]
        off = judged[judged["agreement"] == "disagrees"]
        if len(judged):
            base = _base(summary)
            names = ", ".join(f"{_rel(str(Path(run) / f'{w}.{x}'), base)} {s:.2f}x"
                              for run, w, x, s in zip(off["run"], off["workload"], off["variant"], off["speedup"]))
            out.append(Text(f"stopwatch: {len(off)} of {len(judged)} timed variants disagree with their traces"
                            + (f": {names}" if names else ""), style="yellow" if len(off) else ""))
    if summary.warnings:
        out.append(Text(f"{len(summary.warnings)} warning(s) about the traces' data: see --detail", style="yellow"))
    out.append(Text("figures: the highest verdict of each (yes >= 50%, some >= 5%, no < 5%); busy: mean GPU utilization; "
                    "--detail for every table", style="dim"))
    return out


def render(console: Console, summary: Summary) -> None:
    """Print parts 1-3 of the module doc."""
    if summary.reports:
        console.print(trace_table(summary))
    ranks = rank_table(summary)
    if ranks is not None:
        console.print()
        console.print(ranks)
    if summary.reports:
        console.print()
    for line in notes(summary):
        console.print(line, no_wrap=True, overflow="ellipsis", crop=True)
