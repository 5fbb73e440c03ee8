"""traceprobe: prove whether parallelism actually happened on GPUs.

Library API (the CLI is a thin layer over it)::

    import traceprobe
    trace = traceprobe.load_trace("compute-copy.overlapped.pt.trace.json.gz")
    report = traceprobe.overlap_report(trace)
    report.copy_overlap          # DataFrame: device, direction, copy_ns, overlapped_ns, fraction
    [v.text for v in report.verdicts]

Profiling your own code: ``with traceprobe.capture("runs/mine") as cap: ... cap.step()``
(see :mod:`traceprobe.capture`); a script run by ``traceprobe record --script`` calls
``traceprobe.step()``.

Reading and analysing traces never imports torch; ``traceprobe.record`` and a
running capture do.
"""

from .analysis import OverlapReport, Verdict, overlap_report
from .errors import TraceFormatError
from .trace import Trace, load_trace

__version__ = "0.1.0"

__all__ = ["Capture", "OverlapReport", "Trace", "TraceFormatError", "Verdict", "capture", "load_trace", "overlap_report", "step", "__version__"]

_LAZY = {"capture", "Capture", "step"}


def __getattr__(name: str):
    # traceprobe.capture (a callable module: traceprobe.capture(...) is traceprobe.capture.capture(...)),
    # Capture and step are loaded on first use; none of them imports torch until a capture starts.
    if name in _LAZY:
        import importlib

        mod = importlib.import_module(f"{__name__}.capture")
        return mod if name == "capture" else getattr(mod, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
