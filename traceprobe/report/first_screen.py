"""``overlap-report``'s default output: per window of a run, one block, and a folder summary (the first screen).

Rendered from a :class:`~traceprobe.analysis.summary.Summary` (:mod:`.windows` collapses each window's ranks);
nothing is computed here.

- A *block* per window: its run and steps, its ranks collapsed (``2 ranks, busy 96-99%`` and the judged figures'
  ranges; one trace: its figures with their level as a word, ``copy/compute 98% yes``), its top claim (the window's
  top what-if, else its largest finding, per step first), the ``do:`` line of the one action it calls for, the
  ranks the analysis names (the straggler, the most device work, the most time in collectives, a rank far less busy),
  and where its critical path ran.
  With ``ranks``, every rank's row under it (the figures of :data:`.table.COLUMNS`).
- How much is shown depends on how many traces there are (:func:`mode`): up to :data:`BLOCKS` traces, every window's
  block; up to :data:`LINES`, one line per window, then the blocks of the :data:`WORST` windows whose claims give
  back the largest share of their window; more, one line per folder (its windows, their busy range, its worst
  window's claim), then the worst blocks. A line says how to see every window (``--all``) and every rank
  (``--ranks``).
- The folder summary: how many traces, runs and windows, and the causes that lead most windows, each with the
  window where it gives back the largest share; then the stopwatch, warnings and clocks (:func:`.table.note_lines`), and a short
  legend.

:class:`FirstScreen` lays it out part by part, as :func:`traceprobe.collect.analyze_paths` hands out each run's
summary (``on_part``): the windows first, as they come, the worst blocks and the folder summary at the end
(:meth:`FirstScreen.end`); :meth:`FirstScreen.render` lays out a whole summary with the folder summary first. Every
line fits ``width`` (None: natural width): text wraps between words, a name longer than its room is shortened in the
middle (:func:`.grid.shorten`).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

from rich.text import Text

from ..analysis.advice.verdicts import NOT_JUDGED
from ..analysis.summary import Summary
from .grid import NARROWEST, Column, cell, lines, natural_width, para, shorten, wrap
from .places import base_folder
from .table import COLUMNS, WORD, note_lines, to_text
from .windows import WindowView, busy_text, claims_by_cause, counts, short_claim, window_views

BLOCKS, LINES, WORST = 16, 120, 5
"""Up to ``BLOCKS`` traces every window is a block; up to ``LINES`` a line each; beyond, a line per folder; the
``WORST`` windows' blocks follow the lines."""
CAUSES = 6
"""Causes listed in the folder summary."""
MIN_NAME = NARROWEST
"""The narrowest a name is shortened to."""
NAMES = (("copy_overlap", "copy/compute"), ("device_concurrency", "cross-device"), ("stream_concurrency", "streams"),
         ("comm_overlap", "comm/compute"), ("cpu_gpu", "CPU/GPU"), ("host_threads", "host threads"))
"""The verdict figures a block names, in words."""
LEGEND = ("busy: mean GPU utilization, min-max across a window's ranks; the figures: the highest verdict of each "
          "(yes >= 50%, some >= 5%, no < 5%); a claim: what removing its cause would give back (the dependency graph "
          "replayed) or the time a finding lost, per step first, the window's total in brackets; do: the one action "
          "it calls for (its full advice: --detail, under 'what would give time back')")


def mode(traces: int, every: bool = False) -> str:
    """``blocks``, ``lines`` or ``groups`` for a folder of ``traces`` traces (module doc); ``every``: blocks."""
    return "blocks" if every or traces <= BLOCKS else "lines" if traces <= LINES else "groups"


def _best(r, figure: str) -> tuple[float, str] | None:
    vs = [v for v in r.verdicts if v.figure == figure]
    if not vs:
        return None
    judged = [v for v in vs if v.level != NOT_JUDGED]
    v = max(judged or vs, key=lambda v: v.value)
    return float(v.value), str(v.level)


def _figures(v: WindowView) -> list[str]:
    """The judged figures of a window: one trace's with its level in words, several ranks' as a range."""
    out = []
    for key, name in NAMES:
        got = [b for b in (_best(r, key) for r in v.reports) if b is not None]
        if not got:
            continue
        if len(v.reports) == 1:
            value, level = got[0]
            out.append(f"{name} {value:.0%} {WORD.get(level, level)}")
        else:
            lo, hi = min(x for x, _ in got), max(x for x, _ in got)
            out.append(f"{name} {busy_text(lo, hi)}")
    return out


def head(v: WindowView) -> str:
    """A block's first line: ``causes/ddp-compute 2-4: 2 ranks, busy 99%, comm/compute 58-80%``."""
    ranks = f"{v.rank_count} ranks, " if v.rank_count >= 2 else f"rank {v.ranks[0]}, " if v.ranks[0] is not None else ""
    if len(v.reports) > 1 and v.rank_count < 2:
        ranks = f"{len(v.reports)} traces, "
    return f"{v.where()}: {ranks}busy {busy_text(*v.busy)}" + "".join(f", {f}" for f in _figures(v))


def _rank_rows(v: WindowView, width: int) -> list[Text]:
    """Every rank's row of a window (``--ranks``): its rank and :data:`.table.COLUMNS` but the finding, indented."""
    cols = [Column("rank", [Text("-" if k is None else str(k)) for k in v.ranks], right=True)]
    for short in (False, True):
        cols = cols[:1]
        for c in COLUMNS[:-1]:
            cells = [c.read(r, short) for r in v.reports]
            if c.optional and all(t.plain == "-" for t in cells):
                continue
            cols.append(Column(c.short if short else c.header, cells, right=short if c.right is None else c.right))
        if natural_width(cols) + 4 <= width:
            break
    return [Text("    ") + t for t in lines(cols)]


_IDEAL = re.compile(r"ideal for (\d+) stages x (\d+) microbatches: ([\d.]+%)")


def bubble_line(v: WindowView) -> str:
    """The window's largest pipeline bubble as a claim beside its top (``pipeline bubble 17.2% of the window on rank 0,
    ideal 11.1% for 2 stages x 8 microbatches``): the share of the window its stage waited for the neighbouring one
    (:mod:`traceprobe.analysis.advice.findings`, ``bubble``), and the ideal share of its schedule where the trace tells
    it; ``""`` where no trace of the window holds a bubble. A bubble beyond the ideal is the stages' imbalance (the top
    claim names the stage with more work); the ideal part goes only with more microbatches or an interleaved schedule."""
    best: tuple[int, str, str] | None = None
    for r in v.reports:
        f = getattr(r, "findings", None)
        if f is None or len(f) == 0:
            continue
        b = f[f["kind"] == "bubble"]
        for label, text, ns, subject in zip(b["label"], b["text"], b["headroom_ns"], b["subject"]):
            if best is None or int(ns) > best[0]:
                m = _IDEAL.search(str(text))
                ideal = f", ideal {m.group(3)} for {m.group(1)} stages x {m.group(2)} microbatches" if m else ""
                best = (int(ns), f"pipeline {label} of the window on {subject}{ideal}", str(text))
    return best[1] if best else ""


def block(v: WindowView, width: int, ranks: bool = False) -> list[Text]:
    """A window's block (module doc)."""
    out = para(head(v), width, 0, "bold")
    if ranks:
        out += _rank_rows(v, width)
    if v.top is not None:
        out += para(v.top.label, width, 2)
        if v.top.do:
            out += para(f"do: {v.top.do}", width, 2, "cyan")
    elif v.reports and any(not r.streams.empty for r in v.reports):
        out += para("no claim: no cause gives back more than its noise floor", width, 2, "green")
    bubble = bubble_line(v)
    if bubble and not (v.top is not None and v.top.cause.startswith("pipeline bubble")):
        out += para(bubble, width, 2)
    if v.named:
        out += para("ranks: " + ", ".join(v.named), width, 2, "dim")
    if v.path and v.top is not None:
        out += para(v.path, width, 2, "dim")
    return out


PIPE_WIDTH = 80
"""The width the first screen is laid out in where no terminal says one (a pipe, a file): ``$COLUMNS`` overrides it."""


def name_width(width: int) -> int:
    """The name column of the one-line rows at ``width``: three eighths of it, at least :data:`MIN_NAME`. The columns
    are fixed by the width alone, so that rows printed as their windows finish line up."""
    return max(width * 3 // 8, MIN_NAME)


def _row(name: Text, cells: list[tuple[str, int]], last: Text, width: int, nw: int = 0) -> list[Text]:
    """One row of fixed columns (module doc): ``name`` in :func:`name_width` (on its own line above where longer, cut in
    the middle only where longer than the whole width), right-aligned ``cells`` (text, width), ``last`` wrapped into
    what is left, its further lines under it; ``nw``: the name column's width where not :func:`name_width`."""
    nw = nw or name_width(width)
    lead = sum(w + 1 for _, w in cells) + nw + 1
    room = max(width - lead, MIN_NAME)
    out = []
    shown = name.plain
    if len(shown) > nw:
        out.append(cell(shorten(shown, width), str(name.style)))
        shown = ""
    parts = [shorten(x, room) for x in wrap(last.plain, room)] if last.plain else [""]
    line = Text(shown.ljust(nw), style=str(name.style))
    for text, w in cells:
        line.append(" " + text.rjust(w))
    line.append(" ")
    line.append(parts[0], style=str(last.style))
    out.append(_rstrip(line))
    out += [Text(" " * lead + x, style=str(last.style)) for x in parts[1:]]
    return out


def _rstrip(t: Text) -> Text:
    t.rstrip()
    return t


def window_lines(views: list[WindowView], width: int, header: bool = True) -> list[Text]:
    """One line per window: where, ranks, busy, its claim without the window's total (fixed columns, :func:`_row`)."""
    out = _row(Text("window", style="bold"), [("ranks", 5), ("busy", 7)], Text("top claim", style="bold"), width) if header else []
    for v in views:
        claim = cell(short_claim(v.top)) if v.top else Text("-", style="dim")
        out += _row(cell(v.where()), [(str(max(v.rank_count, 1)), 5), (busy_text(*v.busy), 7)], claim, width)
    return out


def group_lines(groups: list[tuple[str, list[WindowView]]], width: int, header: bool = True) -> list[Text]:
    """One line per folder: its windows, their busy range, its worst window and that window's claim."""
    def worst(vs: list[WindowView]) -> Text:
        w = max(vs, key=lambda v: v.share)
        if w.top is None:
            return Text("no claim", style="dim")
        name = w.run[len(w.group) + 1:] if w.group and w.run.startswith(w.group + "/") else w.run
        return cell(f"{f'{name} {w.window}'.rstrip()}: {short_claim(w.top)}")

    def span(vs: list[WindowView]) -> str:
        lo = [v.busy[0] for v in vs if not math.isnan(v.busy[0])]
        hi = [v.busy[1] for v in vs if not math.isnan(v.busy[1])]
        return busy_text(min(lo), max(hi)) if lo else "-"

    out = _row(Text("folder", style="bold"), [("windows", 7), ("busy", 7)], Text("its worst window's claim", style="bold"),
               width) if header else []
    for g, vs in groups:
        out += _row(cell(g), [(str(len(vs)), 7), (span(vs), 7)], worst(vs), width)
    return out


def claims_lines(views: list[WindowView], width: int) -> list[Text]:
    """The causes that lead most windows (:func:`.windows.claims_by_cause`), :data:`CAUSES` at most, each with how many
    windows it leads and the window where it gives back the largest share; empty without a claim."""
    rows = claims_by_cause(views)
    if not rows:
        return []
    out = para("top claims: the windows each cause leads, and where it gives back the largest share of its window:", width)
    shown = rows[:CAUSES]
    cw = min(max(len(c) for c, _, _ in shown) + 2, name_width(width))
    for c, n, v in shown:
        head = cell(f"  {c}")
        if len(head.plain) > cw:  # (its own line: the row under it)
            out.append(head)
            head = Text("")
        out += _row(Text(head.plain.ljust(cw)), [(str(n), 3)], cell(f"{v.top.figure if v.top else ''} {v.where()}"), width, cw)
    if len(rows) > CAUSES:
        out += para(f"  and {len(rows) - CAUSES} more causes", width, 0, "dim")
    return out


def folder_lines(summary: Summary, views: list[WindowView], width: int, causes: bool = True) -> list[Text]:
    """The folder summary (module doc): the counts, then (``causes``) the causes that lead most windows."""
    return para(counts(summary).line(), width, 0, "bold") + (claims_lines(views, width) if causes else [])


@dataclass
class FirstScreen:
    """The first screen laid out part by part (module doc).

    Attributes:
        width: columns to fit (:data:`PIPE_WIDTH` where no terminal says).
        traces: how many traces the command reads (:func:`mode`).
        base: the folder every trace shares (names are shown relative to it).
        ranks: every rank's row under its window's block (``--ranks``).
        every: every window's block (``--all``).
    """

    width: int
    traces: int
    base: str
    ranks: bool = False
    every: bool = False
    views: list[WindowView] = field(default_factory=list)
    _groups: list[tuple[str, list[WindowView]]] = field(default_factory=list)
    _started: bool = False

    @property
    def mode(self) -> str:
        """:func:`mode` of this screen."""
        return "blocks" if self.ranks else mode(self.traces, self.every)

    def part(self, summary: Summary) -> list[Text]:
        """The lines of one part's windows (a run's summary), as far as they can be printed now: every block, every
        line, or the lines of the folders complete before this part's."""
        views = window_views(summary, self.base)
        self.views += views
        m = self.mode
        if m == "blocks":
            out = [x for v in views for x in [*block(v, self.width, self.ranks), Text("")]]
            return out
        if m == "lines":
            out = window_lines(views, self.width, header=not self._started)
            self._started = True
            return out
        done: list[tuple[str, list[WindowView]]] = []
        for v in views:
            if not self._groups or self._groups[-1][0] != v.group:
                done += self._groups
                self._groups = [(v.group, [])]
            self._groups[-1][1].append(v)
        if not done:
            return []
        out = group_lines(done, self.width, header=not self._started)
        self._started = True
        return out

    def after(self) -> list[Text]:
        """What follows the windows: the last folders' lines, the worst windows' blocks and how to see every one."""
        out: list[Text] = []
        if self._groups:
            out += group_lines(self._groups, self.width, header=not self._started)
            self._groups = []
        if self.mode == "blocks":
            return out
        worst = sorted((v for v in self.views if v.top is not None), key=lambda v: -v.share)[:WORST]
        if worst:
            out += [Text(""), *para(f"the {len(worst)} windows whose claims give back the largest share of their window:", self.width, 0, "bold")]
            for v in worst:
                out += [Text(""), *block(v, self.width)]
        return [*out, Text(""), *para("every window's block: --all; every rank's row: --ranks; every table: --detail"
                                       + ("; each figure across ranks, outliers, stragglers: traceprobe job PATHS"
                                          if any(v.rank_count >= 2 for v in self.views) else ""), self.width, 0, "dim")]

    def folder(self, summary: Summary) -> list[Text]:
        """The folder summary, where there are two windows or more (the causes where there are many)."""
        return folder_lines(summary, self.views, self.width, causes=self.mode != "blocks") if len(self.views) >= 2 else []

    def notes(self, summary: Summary) -> list[Text]:
        """The stopwatch, warnings and clocks (:func:`.table.note_lines`), then the legend."""
        out: list[Text] = []
        for n in note_lines(summary, legend=False):
            out += para(n.plain, self.width, 0, str(n.style))
        return out + (para(LEGEND, self.width, 0, "dim") if summary.reports else [])

    def end(self, summary: Summary) -> list[Text]:
        """After the windows, as they were printed part by part: :meth:`after`, the folder summary, the notes."""
        out = self.after()
        for part in (self.folder(summary), self.notes(summary)):
            if part:
                out += [Text(""), *part] if out else part
        return out

    def render(self, summary: Summary, color: bool = False) -> str:
        """A whole summary: the folder summary first, then the windows, the worst blocks, the notes and the legend."""
        self.views, self._groups, self._started = [], [], False
        body = self.part(summary)
        body += self.after()
        while body and not body[-1].plain:
            body.pop()
        first = self.folder(summary)
        out = [*first, Text("")] if first else []
        out += body
        notes = self.notes(summary)
        return to_text(out + ([Text("")] if out and notes else []) + notes, color)


@dataclass(frozen=True)
class FirstScreenRenderer:
    """The first screen (module doc) of a whole summary, as text.

    Attributes:
        width: columns to fit (None: :data:`PIPE_WIDTH`, for pipes and files).
        color: ANSI colours (for a terminal).
        ranks: every rank's row (``--ranks``); every: every window's block (``--all``).
    """

    width: int | None = None
    color: bool = False
    ranks: bool = False
    every: bool = False
    name: str = "table"

    def render(self, summary: Summary) -> str:
        """The first screen of ``summary``."""
        traces = len(summary.reports) + len(summary.failures)
        return FirstScreen(self.width or PIPE_WIDTH, traces, base_folder(summary), self.ranks, self.every).render(summary, self.color)


def stream_base(files: list[str]) -> str:
    """The folder every one of ``files`` lies in (what :func:`.places.base_folder` gives once they are analysed)."""
    from ..analysis.run import _folder

    try:
        return os.path.commonpath([_folder(str(f)) for f in files]) if files else ""
    except ValueError:  # (absolute and relative paths mixed)
        return ""
