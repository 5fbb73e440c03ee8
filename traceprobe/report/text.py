"""A trace's report that prints as ``overlap-report`` prints it: what the Python API hands a person.

:func:`overlap_report` (``traceprobe.overlap_report``) and ``Capture.report()`` return a :class:`TextReport`: the
:class:`~traceprobe.analysis.per_trace.OverlapReport` itself (every field, table and cached figure), whose ``str()``
(``print(report)``) and :meth:`TextReport.summary` give the text the command prints for that trace (:mod:`.first_screen`),
instead of the dataclass's repr. Nothing is computed here beyond the analysis the report already holds.
"""

from __future__ import annotations

from typing import Any

from ..analysis.per_trace import OverlapReport
from ..reading import Trace


class TextReport(OverlapReport):
    """An :class:`~traceprobe.analysis.per_trace.OverlapReport` whose ``str()`` is ``overlap-report``'s text."""

    def summary(self, width: int | None = None) -> str:
        """The text ``traceprobe overlap-report`` prints for this trace (its window's block: figures, top claim and
        action; the legend), fitted to ``width`` columns (None: :data:`.first_screen.PIPE_WIDTH`), without colours."""
        from ..analysis.summary import summarize
        from .first_screen import FirstScreenRenderer

        return FirstScreenRenderer(width=width).render(summarize([self]))

    def __str__(self) -> str:
        """:meth:`summary`: ``print(report)`` prints what the command prints."""
        return self.summary()


def as_text(report: OverlapReport) -> TextReport:
    """``report`` as a :class:`TextReport`: the same fields and cached figures, not copied (its tables are shared)."""
    if isinstance(report, TextReport):
        return report
    out = object.__new__(TextReport)
    out.__dict__.update(report.__dict__)  # (frozen: the fields set as the dataclass's own __init__ would)
    return out


def overlap_report(trace: Trace, info: dict[str, Any] | None = None, all_device_work: bool = False) -> TextReport:
    """:func:`traceprobe.analysis.per_trace.overlap_report` (same arguments and errors), as a :class:`TextReport`."""
    from ..analysis.per_trace import overlap_report as analyse

    return as_text(analyse(trace, info, all_device_work=all_device_work))
