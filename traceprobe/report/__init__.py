"""Renderers: one module per output format. They format; they compute nothing."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import msgspec

    from ..analysis.report import OverlapReport
    from ..trace import Trace
    from .plot import Item

# The functions below are ``then``s for :func:`traceprobe.collect.analyze_paths`, run where
# each trace is analysed. They are defined here, not in their renderers, so that naming
# them imports nothing: pandas (and matplotlib) are imported by the call. A command that
# analyses one trace then decodes it in child processes while it imports the analysis
# (:mod:`traceprobe.prefetch`), which it cannot do once pandas is imported.


def report_json(trace: Trace, report: OverlapReport) -> msgspec.Raw:
    """One trace's part of the JSON document, made where the trace was analysed.

    A ``then`` for :func:`traceprobe.collect.analyze_paths`: each worker process
    (or Dask worker) renders the reports of its own traces, and
    :func:`traceprobe.report.json_document.to_json` splices them in, so that the
    command's own process does not render every report after the last one
    arrives. The bytes are :func:`~traceprobe.report.json_document.report_dict`
    encoded compactly; the document is the same either way.
    """
    from .json_document import encoded_report

    return encoded_report(report)


def timeline_image(trace: Trace, report: OverlapReport, fmt: str = "png") -> bytes:
    """One trace's timeline picture (:func:`traceprobe.report.plot.timeline_of`), drawn where
    the trace was analysed; ``fmt`` is a matplotlib format (:func:`image_format`)."""
    from .plot import timeline_of

    return timeline_of(trace, report, fmt)


def timeline_item(trace: Trace, report: OverlapReport) -> Item:
    """What ``plot --compare`` draws of one trace (:func:`traceprobe.report.plot.item_of`)."""
    from .plot import item_of

    return item_of(trace, report)


def image_format(output: str | Path) -> str:
    """The image format named by ``output``'s suffix (``png`` without one)."""
    return Path(output).suffix.lstrip(".").lower() or "png"
