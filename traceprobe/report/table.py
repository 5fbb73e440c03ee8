"""The per-trace table: one row per trace, its runs across ranks, each window's what-if (the rows ``--ranks`` shows).

The first screen (:mod:`.first_screen`) lays out each window's ranks with this module's :data:`COLUMNS` and notes
(:func:`note_lines`); :class:`TableRenderer` gives the whole table, one row per trace. Rendered from a :class:`~traceprobe.analysis.summary.Summary`; nothing is computed here.

1. One row per trace: its run (relative to the folder all traces share), rank,
   profiler window (``2-4`` for steps 2 to 4, ``#n`` for the n-th trace of a rank),
   ``busy`` (the mean over its devices of the device utilization, see
   :func:`traceprobe.analysis.device.concurrency.device_concurrency`), one column per
   judged figure (copy/compute, cross-device, streams, comm/compute, CPU/GPU,
   host threads) showing the verdict of that figure with the highest value and
   its level as a short word (``yes`` confirmed, ``some`` partial, ``no`` none;
   ``n/a`` copies not meant to overlap, shown only where nothing else of the figure
   is judged; ``-`` no verdict), and the trace's top finding with its unit. The figure
   columns are declared as data in :data:`COLUMNS` (the TSV lays out the same).
2. One row per window of each multi-rank run: ranks, the rank with the most device
   work outside collectives and the rank with the most time in collectives (no rank
   is called slowest: see ``analysis/ranks.py``), and min-max across ranks of step
   time, busy and the figures.
3. What would give time back: each window's top what-if (:mod:`.what_if_lines`).
4. The stopwatch comparison, the warnings and the clocks across ranks (:mod:`.clock_notes`: only
   where ranks' clocks differ or cannot be estimated), when there are any, and a legend.

Fitting a width (``width``; None: the natural width, as for a pipe or a file): the
table is laid out at its natural width if that fits, each figure cell with its level as a
word (``37% some``); else the top finding goes on its own line under its row (``↳``), the
levels still in words where that fits; else the headers shorten and each figure cell gives
its level as one letter (``37%s``, explained by the legend), so that the table reads the
same without colours; a run name longer than its column goes on its own line above its row. Under each top finding (once per window whose ranks
share it), a ``do`` line gives the one action it calls for (:mod:`.actions`), cut after a
whole word with ``…`` where the width is too small. No value is ever cut: a word too long for
the width overflows it. Failures are not here: the CLI prints them once, on stderr.
``--detail`` gives the panels of every trace (:mod:`.panels`).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from rich.text import Text

from ..analysis.advice.verdicts import NOT_JUDGED
from ..analysis.device.profiled import NOT_RECORDED
from ..analysis.per_trace import OverlapReport
from ..analysis.summary import Summary
from . import units
from .actions import fit, top_findings
from .clock_notes import clock_line, reported
from .grid import Column, cell, lines, natural_width, wrap
from .legend import DO_LEGEND, LEGEND, NOT_JUDGED_LEGEND, RANK_LEGEND, SHORT_LEGEND, SHORT_RANK_LEGEND, STOPWATCH, host_only_line
from .places import _places, base_folder, relative
from .what_if_lines import what_if_lines

FIGURES = (("copy_overlap", "copy", "copy"), ("device_concurrency", "devices", "devs"), ("stream_concurrency", "streams", "strm"),
           ("comm_overlap", "comm", "comm"), ("cpu_gpu", "cpu/gpu", "cpu"), ("host_threads", "threads", "thr"))
"""Verdict figures with a column, in order: (figure, header, short header)."""
WORD = {"confirmed": "yes", "partial": "some", "none": "no", "n/a": "n/a"}
LETTER = {"confirmed": "y", "partial": "s", "none": "n"}
"""The level's one letter in the narrow form (``37%s``), so that the table reads the same without colours."""
STYLE = {"confirmed": "green", "partial": "yellow", "none": "red", "n/a": "dim"}
RANK_FIGURES = (("mean_step_ns", "step ms", "step ms"), ("utilization", "busy", "busy%"), ("copy_overlap", "copy", "copy%"),
                ("comm_overlap", "comm", "comm%"), ("stream_concurrency", "2+ streams", "2strm%"), ("cpu_gpu_overlap", "cpu/gpu", "cpu%"))
"""Rank-summary figures shown per window: (figure, header, short header; the short form drops ``%`` from the cells)."""
MIN_FINDING = 18
"""Narrowest column the top finding is wrapped into; narrower, it goes on its own line."""
MIN_RUN = 16
"""Narrowest the run column is made: a longer name goes on its own line."""
def _pct(f: float) -> str:
    return units.percent(f)


def _window(label: str) -> str:
    if label.startswith("steps "):
        return label[6:]
    return "#" + label[6:] if label.startswith("trace ") else ""


def _best(r: OverlapReport, figure: str, short: bool) -> Text:
    vs = [v for v in r.verdicts if v.figure == figure]
    if not vs:
        return Text("-", style="dim")
    judged = [v for v in vs if v.level != NOT_JUDGED]
    v = max(judged or vs, key=lambda v: v.value)
    if v.level == NOT_JUDGED and short:  # (the number alone would read as a failed overlap)
        return Text(NOT_JUDGED, style=STYLE[NOT_JUDGED])
    word = LETTER.get(v.level, "") if short else " " + WORD.get(v.level, v.level)
    return Text(f"{v.value:.0%}{word}", style=STYLE.get(v.level, ""))


def finding_label(r: OverlapReport) -> str:
    """The top finding's short label with its unit: the findings' ``label`` where the
    analysis gives one, else its kind and headroom (``exposed copy 58.0 ms``); empty without one."""
    f = getattr(r, "findings", None)
    if f is None or len(f) == 0:
        return ""
    top = f.iloc[0]
    label = top["label"] if "label" in f.columns else None
    if isinstance(label, str) and label:
        return label
    return f"{str(top['kind']).replace('_', ' ')} {units.duration(top['headroom_ns'])}"


def _busy(r: OverlapReport) -> str:
    d = r.devices.devices
    return "-" if d.empty else _pct(float(d["utilization"].mean()))


@dataclass(frozen=True)
class TraceColumn:
    """A column of the trace table that shows a figure of each trace, declared as data.

    Attributes:
        figure: the key of the figure it shows (:data:`.figures.TRACE`; for a verdict
            column, the figure its verdicts judge).
        header, short: its header in the full and the short form of the table.
        read: a trace's cell: ``read(report, short)`` (short: the narrow form).
        right: right-aligned; None: in the short form only.
        optional: left out when every cell is ``-`` (no trace has the figure).
        wrap: the cell may wrap (the top finding, last).
    """

    figure: str
    header: str
    short: str
    read: Callable[[OverlapReport, bool], Text]
    right: bool | None = None
    optional: bool = False
    wrap: bool = False


def _verdict_column(figure: str, header: str, short: str) -> TraceColumn:
    return TraceColumn(figure, header, short, lambda r, narrow: _best(r, figure, narrow), optional=True)


COLUMNS: tuple[TraceColumn, ...] = (
    TraceColumn("devices", "busy", "busy", lambda r, _: Text(_busy(r)), right=True),
    *(_verdict_column(*f) for f in FIGURES),
    TraceColumn("findings", "top finding", "top finding", lambda r, _: cell(finding_label(r)), right=False, wrap=True),
)
"""The trace table's figure columns, after ``run``, ``rank`` and ``steps`` (module doc, part 1), the top finding last."""


def _trace_columns(summary: Summary, short: bool) -> tuple[list[Column], list[str]]:
    """The trace table's columns (the finding last) and the finding of each row."""
    places = _places(summary)
    runs, ranks, steps = [], [], []
    last = None
    for _, run, window, rank in places:
        runs.append(cell("" if run == last else run))
        last = run
        ranks.append(Text("-" if rank is None else str(rank)))
        steps.append(cell(_window(window)))
    cols = [Column("run", runs), Column("rank", ranks, right=True), Column("steps", steps)]
    for c in COLUMNS:
        cells = [c.read(r, short) for r, _, _, _ in places]
        if c.optional and all(t.plain == "-" for t in cells):
            continue
        cols.append(Column(c.short if short else c.header, cells, right=short if c.right is None else c.right, wrap=c.wrap))
    tops = top_findings(summary)
    labels = [tops[id(r)].label if id(r) in tops else "" for r, _, _, _ in places]
    cols[-1] = Column(cols[-1].header, [cell(x) for x in labels], right=cols[-1].right, wrap=cols[-1].wrap)
    return cols, labels


def _notes(summary: Summary, width: int | None, with_label: bool) -> dict[int, list[Text]]:
    """The lines under each row: its top finding (``with_label``: the narrow form) and the action it calls for
    (``do``), once under the last of the rows of one window that share them."""
    places = _places(summary)
    tops = top_findings(summary)
    out: dict[int, list[Text]] = {}
    keys = [(run, window, tops[id(r)]) if id(r) in tops else None for r, run, window, _ in places]
    for i, key in enumerate(keys):
        if key is None or (i + 1 < len(keys) and keys[i + 1] == key):
            continue
        top = key[2]
        rows: list[Text] = []
        if with_label:
            label = cell(top.label).plain  # (a name from a trace: control characters escaped)
            parts = wrap(label, max(width - 4, MIN_FINDING)) if width else [label]
            rows += [Text(("  ↳ " if k == 0 else "    ") + part, style="dim" if k else "") for k, part in enumerate(parts)]
        if top.do:
            lead = "    do: " if with_label else "  do: "
            rows.append(Text(lead + fit(top.do, width - len(lead) if width else None), style="cyan"))
        out[i] = rows
    return out


def _own_lines(summary: Summary, room: int) -> dict[int, list[Text]]:
    """Run names longer than ``room``, each on its own line above its first row (the row's run cell left blank)."""
    out: dict[int, list[Text]] = {}
    last = None
    for i, (_, run, _, _) in enumerate(_places(summary)):
        if run != last and len(run) > room:
            out[i] = [cell(run)]
        last = run
    return out


def trace_lines(summary: Summary, width: int | None = None) -> tuple[list[Text], bool]:
    """Part 1 of the module doc, fitted to ``width`` (module doc); and whether the short headers are used."""
    cols, _ = _trace_columns(summary, False)
    if width is None or natural_width(cols) <= width:
        return lines(cols, after=_notes(summary, width, False)), False
    if natural_width(cols[:-1]) <= width:  # the levels in words, the finding under its row
        return lines(cols[:-1], after=_notes(summary, width, True)), False
    cols, _ = _trace_columns(summary, True)
    cols = cols[:-1]  # (the finding goes under its row)
    room = max(width - natural_width(cols[1:]) - 1, MIN_RUN)
    own = _own_lines(summary, room)
    if own:
        cols[0] = Column(cols[0].header, [Text("") if i in own else c for i, c in enumerate(cols[0].cells)])
    return lines(cols, after=_notes(summary, width, True), before=own), True


def _span(lo: float, hi: float, figure: str, short: bool) -> str:
    if units.missing(lo):
        return "-"
    if figure.endswith("_ns"):
        return f"{lo / 1e6:,.1f}" if round(lo / 1e5) == round(hi / 1e5) else f"{lo / 1e6:,.1f}-{hi / 1e6:,.1f}"
    sign = "" if short else "%"
    if round(lo * 100) == round(hi * 100):
        return f"{lo * 100:.0f}{sign}"
    return f"{lo * 100:.0f}{sign}-{hi * 100:.0f}{sign}"


@dataclass
class _Window:
    """One window's row of the rank summary: rank count, busiest and most-comm rank, each figure's (min, max)."""

    ranks: object
    busiest: object
    most_comm: object
    figures: dict[str, tuple[float, float]]


def _windows(rs: pd.DataFrame) -> dict[tuple[str, str], _Window]:
    """The rank summary by (run, window), in its order (one pass over its columns, no DataFrame per window)."""
    out: dict[tuple[str, str], _Window] = {}
    cols = ("run", "window", "ranks", "busiest_rank", "most_comm_rank", "figure", "min", "max")
    nan = float("nan")
    for run, window, ranks, busiest, most_comm, figure, lo, hi in zip(*(rs[c].tolist() for c in cols)):
        w = out.setdefault((str(run), str(window)), _Window(ranks, busiest, most_comm, {}))
        w.figures[str(figure)] = (nan if units.missing(lo) else float(lo), nan if units.missing(hi) else float(hi))
    return out


def _rank(v: object) -> str:
    return "-" if units.missing(v) else str(int(v))  # pyright: ignore[reportArgumentType]


def _rank_columns(summary: Summary, short: bool, with_run: bool = True) -> tuple[list[Column], list[str]]:
    windows = _windows(summary.rank_summary)
    base = base_folder(summary)
    shown = [f for f in RANK_FIGURES if any(not units.missing(w.figures.get(f[0], (0.0, float("nan")))[1]) for w in windows.values())]
    runs, labels, steps, ranks, work, comm = [], [], [], [], [], []
    figs: list[list[Text]] = [[] for _ in shown]
    last = None
    for (run, window), w in windows.items():
        label = relative(run, base)
        labels.append("" if label == last else label)
        runs.append(cell("" if label == last else label))
        last = label
        steps.append(cell(_window(window)))
        ranks.append(Text(_rank(w.ranks)))
        b, c = _rank(w.busiest), _rank(w.most_comm)
        work.append(Text(f"r{b}/r{c}" if short else f"rank {b}"))
        comm.append(Text(f"rank {c}" if c != "-" else "-"))
        for out, (f, _, _) in zip(figs, shown):
            lo, hi = w.figures.get(f, (float("nan"), float("nan")))
            out.append(Text(_span(lo, hi, f, short)))
    cols = [Column("run", runs)] if with_run else []
    cols += [Column("steps", steps), Column("ranks", ranks, right=True)]
    cols += [Column("work/comm", work)] if short else [Column("most work", work), Column("most comm", comm)]
    cols += [Column(s if short else h, c, right=True) for (_, h, s), c in zip(shown, figs)]
    return cols, labels


def rank_lines(summary: Summary, width: int | None = None) -> list[Text]:
    """Part 2 of the module doc, fitted to ``width`` like the trace table; empty without a multi-rank run."""
    if summary.rank_summary.empty:
        return []
    title = [Text("across ranks", style="bold")]
    cols, _ = _rank_columns(summary, False)
    if width is None or natural_width(cols) <= width:
        return title + lines(cols)
    cols, _ = _rank_columns(summary, True)
    if natural_width(cols) <= width:
        return title + lines(cols)
    cols, labels = _rank_columns(summary, True, with_run=False)  # each run on its own line above its windows
    out = lines(cols)
    merged = [out[0]]
    for label, row in zip(labels, out[1:]):
        if label:
            merged.append(cell(label, style="bold"))
        merged.append(row)
    return title + merged


def note_lines(summary: Summary, short: bool = False, short_ranks: bool = False, legend: bool = True) -> list[Text]:
    """Part 4 of the module doc: the stopwatch, warnings and (``legend``) the legend, one text each."""
    out = []
    v = summary.variants
    host_only = bool(summary.reports) and all(r.streams.empty for r in summary.reports)
    if host_only:  # (a trace that launched device work and recorded none says how to record it)
        unrecorded = [n for r in summary.reports for n in r.notes if n.startswith(NOT_RECORDED)]
        out.append(Text(host_only_line(unrecorded, len(summary.reports)), style="yellow"))
    if len(v) and not host_only:  # (GPU variants run on the CPU: their stopwatch says nothing about GPUs)
        judged = v[v["agreement"].isin(["agrees", "disagrees"])]
        off = judged[judged["agreement"] == "disagrees"]
        if len(judged):
            base = base_folder(summary)
            names = ", ".join(f"{relative(str(Path(run) / f'{w}.{x}'), base)} {s:.2f}x"
                              for run, w, x, s in zip(off["run"], off["workload"], off["variant"], off["speedup"]))
            out.append(cell(f"stopwatch: {STOPWATCH}: {len(off)} of {len(judged)} timed variants disagree"
                            + (f": {names}" if names else ""), style="yellow" if len(off) else ""))
    if summary.warnings:
        out.append(Text(f"{len(summary.warnings)} warning(s) about the traces' data: see --detail", style="yellow"))
    for c in reported(summary):  # (only where there is an offset to report, or none could be estimated)
        out.append(cell(clock_line(c, relative(c.run, base_folder(summary))), style="yellow" if c.differ else "dim"))
    if not legend:
        return out
    if summary.reports:
        out.append(Text(SHORT_LEGEND if short else LEGEND, style="dim"))
    if top_findings(summary):
        out.append(Text(DO_LEGEND, style="dim"))
    if any(v.level == NOT_JUDGED for r in summary.reports for v in r.verdicts):
        out.append(Text(NOT_JUDGED_LEGEND, style="dim"))
    if not summary.rank_summary.empty:
        out.append(Text(SHORT_RANK_LEGEND if short_ranks else RANK_LEGEND, style="dim"))
    return out


def table_lines(summary: Summary, width: int | None = None) -> list[Text]:
    """Parts 1-4 of the module doc, each line fitted to ``width`` (None: natural width)."""
    out: list[Text] = []
    short = False
    if summary.reports:
        rows, short = trace_lines(summary, width)
        out += rows
    ranks = rank_lines(summary, width)
    if ranks:
        out += [Text(""), *ranks] if out else ranks
    gains = what_if_lines(summary, width)
    if gains:
        out += [Text(""), *gains] if out else gains
    if out:
        out.append(Text(""))
    for note in note_lines(summary, short, any("work/comm" in t.plain for t in ranks[:3])):
        if width is None:
            out.append(note)
        else:
            out += [Text(x, style=str(note.style)) for x in wrap(note.plain, width)]
    return out


def to_text(text_lines: list[Text], color: bool) -> str:
    """Lines as one string, with ANSI colours when ``color`` (for a terminal), else plain."""
    if not color:
        return "".join(t.plain + "\n" for t in text_lines)
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, color_system="standard", width=1 << 16, legacy_windows=False)
    for t in text_lines:
        console.print(t, soft_wrap=True, highlight=False)
    return buf.getvalue()


@dataclass(frozen=True)
class TableRenderer:
    """The summary table (module doc) as text.

    Attributes:
        width: columns to fit (None: natural width, never shortened: for pipes and files).
        color: ANSI colours (for a terminal).
    """

    width: int | None = None
    color: bool = False
    name: str = "table"

    def render(self, summary: Summary) -> str:
        """The table, its runs across ranks and its notes (module doc)."""
        return to_text(table_lines(summary, self.width), self.color)
