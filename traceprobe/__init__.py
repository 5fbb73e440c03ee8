"""traceprobe: prove whether parallelism actually happened on GPUs.

Library API (the CLI is a thin layer over it)::

    import traceprobe
    trace = traceprobe.load_trace("compute-copy.overlapped.pt.trace.json.gz")
    report = traceprobe.overlap_report(trace)
    report.copy_overlap          # DataFrame: device, direction, copy_ns, overlapped_ns, fraction
    [v.text for v in report.verdicts]

Reading and analysing traces never imports torch; ``traceprobe.record`` does.
"""

from .analysis import OverlapReport, Verdict, overlap_report
from .errors import TraceFormatError
from .trace import Trace, load_trace

__version__ = "0.1.0"

__all__ = ["OverlapReport", "Trace", "TraceFormatError", "Verdict", "load_trace", "overlap_report", "__version__"]
