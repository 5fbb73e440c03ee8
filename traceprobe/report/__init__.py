"""Renderers: one module per output format. They format; they compute nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import msgspec

    from ..analysis.report import OverlapReport
    from ..trace import Trace


def report_json(trace: Trace, report: OverlapReport) -> msgspec.Raw:
    """One trace's part of the JSON document, made where the trace was analysed.

    A ``then`` for :func:`traceprobe.collect.analyze_paths`: each worker process
    (or Dask worker) renders the reports of its own traces, and
    :func:`traceprobe.report.json_document.to_json` splices them in, so that the
    command's own process does not render every report after the last one
    arrives. The bytes are :func:`~traceprobe.report.json_document.report_dict`
    encoded compactly; the document is the same either way. Defined here, not in
    ``json_document``, so that naming it imports nothing (pandas is imported by the
    call, in the worker).
    """
    from .json_document import encoded_report

    return encoded_report(report)
