"""``overlap-report --format tsv``: the summary table as tab-separated values, for ``cut``, ``sort`` and spreadsheets.

One header line, then one line per trace with the table's columns in their full form
(:mod:`.table`), the trace's path first; nothing shortened or wrapped. Tabs, newlines
and other control characters in names are escaped (``\\t``, ``\\n``), so a line is
always one trace.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis.summary import Summary
from ..console import one_line
from .actions import top_findings
from .places import _places
from .table import COLUMNS, _window


def to_tsv(summary: Summary) -> str:
    """The trace table as TSV (module doc): ``path, run, rank, steps``, then every column of
    :data:`.table.COLUMNS` (``busy, <figures...>, top finding``: the table's, per step first), then ``do``: the one
    action the top finding calls for (:mod:`.actions`; empty where none is known)."""
    head = ["path", "run", "rank", "steps", *(c.header for c in COLUMNS), "do"]
    out = ["\t".join(head)]
    tops = top_findings(summary)  # (the top finding as the table gives it: its window's what-if, else its own)
    for r, run, window, rank in _places(summary):
        cells = [r.path, run, "-" if rank is None else str(rank), _window(window), *(c.read(r, False).plain for c in COLUMNS[:-1]),
                 tops[id(r)].label if id(r) in tops else "", tops[id(r)].do if id(r) in tops else ""]
        out.append("\t".join(one_line(c) for c in cells))
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class TsvRenderer:
    """:func:`to_tsv` behind the renderer contract (:mod:`traceprobe.report.renderers`)."""

    name: str = "tsv"

    def render(self, summary: Summary) -> str:
        """The TSV text (module doc)."""
        return to_tsv(summary)
