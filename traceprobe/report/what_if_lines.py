"""The table's "what would give time back" part: each window's top what-if, in words (:mod:`traceprobe.analysis.causal.what_if`).

One line per window whose top cause gives back more than its noise floor: where (the run and window, relative to
the folder every trace shares, and the trace for a window of one trace), then :meth:`traceprobe.analysis.causal.what_if_windows.WindowWhatIf.finding`;
under it, where the window's critical path ran (:meth:`~traceprobe.analysis.causal.what_if_windows.WindowWhatIf.path_line`).
Nothing is computed here.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from ..analysis.summary import Summary
from .grid import cell, wrap
from .places import base_folder, relative


def what_if_lines(summary: Summary, width: int | None = None) -> list[Text]:
    """The part's lines, a title first, each fitted to ``width`` (None: natural width); empty where no window has a
    what-if above its noise floor."""
    base = base_folder(summary)
    rows = []
    for w in summary.what_ifs:
        text = w.finding()
        if not text:
            continue
        where = relative(w.run, base)
        if w.path and len([x for x in summary.what_ifs if x.run == w.run and x.window == w.window]) > 1:
            where += f" {Path(w.path).name}"
        rows.append(cell(f"{where} {w.window}: {text}"))
        if line := w.path_line():  # (where the critical path ran: the work to shorten, whatever the what-ifs say)
            rows.append(cell(f"  {line}"))
    if not rows:
        return []
    out = [Text("what would give time back (the dependency graph replayed)", style="bold"), *rows]
    return out if width is None else [Text(x, style=str(t.style)) for t in out for x in wrap(t.plain, width)]

