"""The table's "what would give time back" part: each window's top what-if, in words (:mod:`traceprobe.analysis.what_if`).

One line per window whose top cause gives back more than its noise floor: where (the run and window, relative to
the folder every trace shares, and the trace for a window of one trace), then :meth:`.WindowWhatIf.finding`. Nothing
is computed here.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from ..analysis.summary import Summary
from .grid import cell


def what_if_lines(summary: Summary, base: str, relative) -> list[Text]:
    """The part's lines, a title first; empty where no window has a what-if above its noise floor.

    Args:
        summary: the summary.
        base, relative: the folder every trace shares and the function naming a path relative to it (:mod:`.table`).
    """
    rows = []
    for w in summary.what_ifs:
        text = w.finding()
        if not text:
            continue
        where = relative(w.run, base)
        if w.path and len([x for x in summary.what_ifs if x.run == w.run and x.window == w.window]) > 1:
            where += f" {Path(w.path).name}"
        rows.append(cell(f"{where} {w.window}: {text}"))
    if not rows:
        return []
    return [Text("what would give time back (the dependency graph replayed)", style="bold"), *rows]
