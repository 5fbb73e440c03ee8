"""traceprobe: prove whether parallelism actually happened on GPUs.

Library API (the CLI is a thin layer over it)::

    import traceprobe
    trace = traceprobe.load_trace("compute-copy.overlapped.pt.trace.json.gz")
    report = traceprobe.overlap_report(trace)   # print(report): the text overlap-report prints
    report.copy_overlap          # DataFrame: device, direction, copy_ns, overlapped_ns, fraction
    [v.text for v in report.verdicts]

Profiling your own code: ``with traceprobe.capture("runs/mine") as cap: ... cap.step()``
(see :mod:`traceprobe.recording.profiler`); a script run by ``traceprobe record --script``
calls ``traceprobe.step()``. ``torch.profiler.profile(on_trace_ready=traceprobe.on_trace_ready("runs/job"))``
writes each window's summary and trace off the training thread (:mod:`traceprobe.recording.handler`).

Every name here is loaded on first use: ``import traceprobe`` (and
``traceprobe.step()`` in a script run without traceprobe) costs next to nothing.
Reading and analysing traces never imports torch; recording does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:
    from .analysis import OverlapReport, Verdict
    from .errors import TraceFormatError
    from .reading import Trace, load_trace
    from .recording.handler import on_trace_ready
    from .recording.profiler import Capture, capture, step
    from .report.text import overlap_report

__all__ = ["Capture", "OverlapReport", "Trace", "TraceFormatError", "Verdict", "capture", "load_trace", "on_trace_ready", "overlap_report", "step", "__version__"]

_LAZY = {
    "OverlapReport": ".analysis", "Verdict": ".analysis", "overlap_report": ".report.text",
    "TraceFormatError": ".errors", "Trace": ".reading", "load_trace": ".reading",
    "on_trace_ready": ".recording.handler",
    "capture": ".recording.profiler", "Capture": ".recording.profiler", "step": ".recording.profiler",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # once loaded, a plain attribute
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
