"""Renderers: one module per output format. They format; they compute nothing (the contract: :mod:`.renderers`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..analysis.per_trace import OverlapReport
    from ..reading import Trace
    from .plot import Item

# The functions below are ``then``s for :func:`traceprobe.collect.analyze_paths`, run where
# each trace is analysed: pictures need the trace itself, which does not come back from a
# worker (every other output is rendered from the finished Summary, in the command's process,
# by a renderer: :mod:`.renderers`). They are defined here, not in their renderers, so that naming
# them imports nothing: pandas (and matplotlib) are imported by the call.


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
