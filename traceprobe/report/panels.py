"""``overlap-report --detail``: every table of every trace as rich panels, then the across-rank, collective and stopwatch tables.

Every text that comes from a trace or a path is printed literally, control characters
escaped (:func:`traceprobe.report.grid.cell`). Verdict levels read as in the summary table
(``yes``, ``some``, ``no``), so a cell there and its line here say the same thing. Notes
are said once: the work a trace's analysis set aside is one line per reason, and a note
(or set-aside line) of several ranks of one window is one line after their panels listing
the ranks.
"""

from __future__ import annotations

import io
import math
import re
from collections import defaultdict
from dataclasses import dataclass

import pandas as pd
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..analysis.device.profiled import NOT_RECORDED
from ..analysis.per_trace import OverlapReport
from ..analysis.summary import Summary
from .actions import per_step
from .grid import cell
from .job_text import figure_label
from .roofline_text import roofline_parts
from .sections import trace_notes
from .table import WORD
from .what_if_lines import what_if_lines

TOP_FINDINGS = 3
"""Findings shown per trace in the table (JSON, CSV and Markdown list them all)."""

LEVEL_STYLE = {"confirmed": "bold green", "partial": "yellow", "none": "bold red", "n/a": "dim"}


def _ms(ns: float) -> str:
    return "-" if ns is None or (isinstance(ns, float) and math.isnan(ns)) else f"{ns / 1e6:,.3f}"


def _pct(f: float) -> str:
    return "-" if f is None or (isinstance(f, float) and math.isnan(f)) else f"{f:.1%}"


def _table(title: str, df: pd.DataFrame, cols: list[tuple[str, str, str]]) -> Table:
    """cols: (column, header, format) with format ``ms``, ``pct``, ``int`` or ``str``."""
    t = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for _, header, fmt in cols:
        t.add_column(header, justify="left" if fmt == "str" else "right")
    fmts = {"ms": _ms, "pct": _pct, "int": lambda v: f"{int(v):,}", "str": str}
    for rec in df.to_dict(orient="records"):
        t.add_row(*[cell(fmts[f](rec[c])) for c, _, f in cols])
    return t


def finding_text(rec: dict) -> str:
    """A finding's text with its figure per step first and its window total labelled (``0.4 ms/step (1.2 ms in 3
    steps): collectives ...``); a finding without steps keeps its total, labelled (``58.0 ms in the trace: ...``)."""
    text = str(rec["text"])
    head, sep, rest = text.partition(": ")
    if not sep or not re.fullmatch(r"[\d,.]+ (ns|µs|ms|s)( \([\d,.]+ (ns|µs|ms|s) per step\))?", head):
        return text  # (a share of the window, a bubble: as it is)
    total, per = float(rec["headroom_ns"]), float(rec.get("per_step_ns", -1))
    steps = round(total / per) if per > 0 else 0
    return f"{per_step(per, total, steps)}: {rest}"


def render_report(r: OverlapReport, skip: frozenset[str] = frozenset()) -> Panel:
    """One trace as a rich Panel; ``skip``: notes said once elsewhere (for several ranks)."""
    parts: list = []
    head = Text()
    wall = r.info.get("wall_s")
    if wall is not None:
        head.append(f"wall clock (one timed run, outside the profiler): {wall * 1e3:,.1f} ms   ")
    lo, hi = r.window_ns
    head.append(f"trace window: {_ms(hi - lo)} ms   events: {r.event_count:,}")
    if r.rank is not None:
        head.append(f"   rank: {r.rank}")
    parts.append(head)
    if r.streams.empty:
        if not any(n.startswith(NOT_RECORDED) for n in r.notes):  # (else its note says why, and what to do)
            parts.append(Text("no device activity in this trace (CPU-only, or the profiler recorded no device activity)", style="dim"))
    else:
        parts.append(_table("busy time per stream (times over the whole trace window)", r.streams, [("device", "device", "int"), ("stream", "stream", "int"), ("busy_ns", "busy ms", "ms"), ("utilization", "utilization", "pct"), ("kernels", "kernels", "int"), ("memcpys", "memcpys", "int"), ("memsets", "memsets", "int")]))
        parts.append(_table("devices (times over the whole trace window)", r.devices.devices, [("device", "device", "int"), ("busy_ns", "busy ms", "ms"), ("utilization", "utilization", "pct"), ("idle_ns", "idle ms", "ms"), ("concurrent_ns", "with another device ms", "ms"), ("concurrency", "concurrency", "pct")]))
    if not r.copy_overlap.empty:
        parts.append(_table("copy/compute overlap (times over the whole trace window)", r.copy_overlap, [("device", "device", "int"), ("direction", "direction", "str"), ("copies", "copies", "int"), ("copy_ns", "copy ms", "ms"), ("overlapped_ns", "under compute ms", "ms"), ("fraction", "overlap", "pct")]))
    multi = r.stream_concurrency[r.stream_concurrency["streams"] > 1] if not r.stream_concurrency.empty else r.stream_concurrency
    if not multi.empty:
        parts.append(_table("stream concurrency (times over the whole trace window)", multi, [("device", "device", "int"), ("streams", "streams", "int"), ("busy_ns", "busy ms", "ms"), ("multi_stream_ns", "2+ streams ms", "ms"), ("concurrency", "concurrency", "pct"), ("kernel_concurrency", "kernels only", "pct")]))  # pyright: ignore  (pandas/matplotlib stubs)
    if not r.comm_overlap.empty:
        parts.append(_table("communication/compute overlap (times over the whole trace window)", r.comm_overlap, [("device", "device", "int"), ("comm_kernels", "comm kernels", "int"), ("comm_ns", "comm ms", "ms"), ("overlapped_ns", "under compute ms", "ms"), ("fraction", "overlap", "pct")]))
    parts += [_table(*x) if isinstance(x, tuple) else Text(x, style="dim") for x in roofline_parts(r)]
    c = r.cpu_gpu
    parts.append(Text(f"CPU/GPU: host compute {_ms(c.host_compute_ns)} ms, device busy {_ms(c.device_busy_ns)} ms, both at once {_ms(c.overlapped_ns)} ms ({_pct(c.fraction)} of host compute, {_pct(c.fraction_of_shorter)} of the shorter side)"))
    if not r.steps.empty:
        st = r.steps
        parts.append(Text(f"steps: {len(st)}, mean host step {_ms(st['host_ns'].mean())} ms, mean GPU step {_ms(st['gpu_ns'].mean())} ms "
                          f"(GPU busy {_ms(st['gpu_busy_ns'].mean())} ms), throughput {r.throughput:,.2f} steps/s"))
    verdicts = Text()
    for v in r.verdicts:
        verdicts.append(f"[{WORD.get(v.level, v.level)}] ", style=LEVEL_STYLE.get(v.level, ""))
        verdicts.append(cell(v.text))
        verdicts.append("\n")
    notes = [n for n in trace_notes(r) if n not in skip]
    for note in notes:
        verdicts.append(cell(f"[note] {note}", style="dim"))
        verdicts.append("\n")
    if not r.verdicts and not notes:
        verdicts.append("no figure to judge: no copies, no second device or stream, no host compute beside device work", style="dim")
    parts.append(verdicts)
    if not r.findings.empty:
        found = Text("findings (largest first; a replayed what-if's gain, or a span's headroom: at most recoverable):\n", style="bold")
        for rec in r.findings.head(TOP_FINDINGS).to_dict(orient="records"):
            found.append(cell(f"  {finding_text(rec)}"))
            found.append("\n")
        parts.append(found)
    name = ".".join(x for x in (r.info.get("workload"), r.info.get("variant")) if x) or r.path
    return Panel(Group(*parts), title=cell(name, style="bold"), subtitle=cell(r.path) if name != r.path else None, title_align="left")


def _shared_notes(reports: list[OverlapReport], ranks: list[int | None]) -> dict[str, list[int | None]]:
    """Notes that two or more traces of one window share, each with the ranks that have it."""
    have: dict[str, list[int | None]] = defaultdict(list)
    for r, rank in zip(reports, ranks):
        for n in dict.fromkeys(trace_notes(r)):
            have[n].append(rank)
    return {n: rs for n, rs in have.items() if len(rs) > 1}


def render(console: Console, summary: Summary) -> None:
    """Print every report, the across-rank, collective and stopwatch tables, then every warning about the traces'
    data (``summary.warnings``, which the table only counts); failures go to stderr, from the CLI."""
    for run in summary.runs:
        for w in run.windows:
            shared = _shared_notes(list(w.reports), list(w.ranks))
            for r in w.reports:
                console.print(render_report(r, frozenset(shared)))
            for note, ranks in shared.items():
                who = ", ".join("?" if x is None else str(x) for x in ranks)
                console.print(cell(f"[note] ranks {who} of {run.name}, {w.label}: {note}", style="dim"), soft_wrap=False)
    if not summary.rank_summary.empty:
        for (run, window), g in summary.rank_summary.groupby(["run", "window"], sort=False):  # pyright: ignore  (pandas/matplotlib stubs)
            most_comm = g["most_comm_rank"].iloc[0]
            t = Table(title=cell(f"across {int(g['ranks'].iloc[0])} ranks in {run}, {window} (most GPU work: rank {int(g['busiest_rank'].iloc[0])}"
                                 + ("" if pd.isna(most_comm) else f"; most time in collectives: rank {int(most_comm)}") + ")"),
                      title_justify="left", show_edge=False)
            for h in ("figure", "min", "median", "max"):
                t.add_column(h, justify="left" if h == "figure" else "right")
            for rec in g.to_dict(orient="records"):
                is_time = rec["figure"].endswith("_ns")
                fmt = (lambda v: f"{_ms(v)} ms") if is_time else _pct
                label = figure_label(str(rec["figure"]))[0]  # (the names job gives them: no key on screen)
                t.add_row(*map(Text, (label, fmt(rec["min"]), fmt(rec["median"]), fmt(rec["max"]))))
            console.print(t)
    for c in summary.collectives:
        straggler = f"rank {c.straggler_rank}" if c.straggler_rank is not None else "none"
        t = Table(title=cell(f"collectives across ranks {', '.join(map(str, c.ranks))} in {c.run}, {c.window}: {c.matched} matched, "
                             f"straggler {straggler}"), title_justify="left", show_edge=False)
        for h in ("collective", "bytes", "count", "mean skew ms", "time ms", "busbw GB/s", "vs best"):
            t.add_column(h, justify="left" if h == "collective" else "right")
        for rec in c.by_size.to_dict(orient="records"):
            t.add_row(cell(rec["collective"]), f"{rec['bytes']:,}", f"{rec['count']:,}", _ms(rec["mean_skew_ns"]), _ms(rec["time_ns"]),
                      "-" if math.isnan(rec["busbw_gbps"]) else f"{rec['busbw_gbps']:,.1f}", _pct(rec["vs_best"]))
        console.print(t)
        waits = ", ".join(f"rank {k} {_ms(v)} ms" for k, v in c.wait_ns.items())
        console.print(Text(f"  waiting for the last rank: {waits}; clocks: {c.clock}", style="dim"))
        for m in c.mismatched:
            console.print(cell(f"  {m}", style="yellow"))
        if c.implausible:
            console.print(Text(f"  {c.implausible} collective(s) end on one rank before they start on another: "
                               f"the clocks disagree by at least {_ms(c.max_offset_ns)} ms", style="yellow"))
    variants = summary.variants
    for run, g in variants.groupby("run", sort=False):
        if not (g["agreement"] != "baseline").any():
            continue
        t = Table(title=cell(f"stopwatch against evidence in {run}: wall clock (manifest, one timed run) vs the workload's first variant"),
                  title_justify="left", show_edge=False)
        for h in ("variant", "wall ms", "speed-up", "agreement"):
            t.add_column(h, justify="right" if h in ("wall ms", "speed-up") else "left", no_wrap=True)
        style = {"agrees": "green", "disagrees": "bold yellow", "baseline": "dim", "too short": "dim"}
        for rec in g.to_dict(orient="records"):
            t.add_row(cell(f"{rec['workload']}.{rec['variant']}"), f"{rec['wall_s'] * 1e3:,.1f}", f"{rec['speedup']:.2f}x",
                      Text(rec["agreement"], style=style[rec["agreement"]]))
        console.print(t)
        for rec in g[g["agreement"] == "disagrees"].to_dict(orient="records"):  # pyright: ignore  (pandas/matplotlib stubs)
            console.print(cell(f"  {rec['workload']}.{rec['variant']}: {rec['speedup']:.2f}x against {rec['baseline']}; {rec['reading']}",
                               style="yellow"))
    for w in summary.warnings:  # every one the table counts ("N warning(s) ...: see --detail")
        console.print(cell(f"[warning] {w}", style="yellow"))


DETAIL_WIDTH = 140
"""Columns of ``--detail`` written to a pipe or a file (rich tables wrap their cells into it; nothing is cut)."""


@dataclass(frozen=True)
class DetailRenderer:
    """``--detail`` (module doc) as text, behind the renderer contract.

    Attributes:
        width: columns (None: :data:`DETAIL_WIDTH`).
        color: ANSI colours (for a terminal).
    """

    width: int | None = None
    color: bool = False
    name: str = "table"

    def render(self, summary: Summary) -> str:
        """Every panel and table (module doc)."""
        buf = io.StringIO()
        console = Console(file=buf, width=self.width or DETAIL_WIDTH, force_terminal=self.color, no_color=not self.color,
                          color_system="standard" if self.color else None, legacy_windows=False)
        render(console, summary)
        for line in what_if_lines(summary, self.width or DETAIL_WIDTH):  # (each window's top what-if, its advice in full)
            console.print(line, soft_wrap=True, highlight=False)
        return buf.getvalue()
