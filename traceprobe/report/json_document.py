"""The JSON document of ``overlap-report --format json``, rendered from a :class:`~traceprobe.analysis.summary.Summary`.

Times are int64 nanoseconds (``*_ns``), fractions are floats in 0..1, and an
undefined figure (no copies, no second device...) is ``null``.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..analysis.causal.what_if_windows import WindowWhatIf
from ..analysis.job.causes import WindowCauses
from ..analysis.job.clocks import ClockEstimate
from ..analysis.job.collectives import WindowCollectives
from ..analysis.per_trace import OverlapReport
from ..analysis.summary import Summary
from ..version import __version__
from .actions import tops_by_path
from .figures import trace_object
from .json_values import clean as _clean
from .json_values import rows
from .sections import rank_rows

SCHEMA_VERSION = 5


def report_dict(r: OverlapReport) -> dict[str, Any]:
    """One trace's report as a JSON-ready dict: the figures declared in :data:`traceprobe.report.figures.TRACE`."""
    return _clean(trace_object(r))


def collectives_dict(c: WindowCollectives) -> dict[str, Any]:
    """One window's collectives across ranks as a JSON-ready dict."""
    return _clean({
        "run": c.run,
        "window": c.window,
        "ranks": list(c.ranks),
        "matched": c.matched,
        "mismatched": list(c.mismatched),
        "straggler_rank": c.straggler_rank,
        "wait_ns": {str(k): v for k, v in c.wait_ns.items()},
        "by_type": rows(c.by_type),
        "by_size": rows(c.by_size),
        "implausible": c.implausible,
        "max_offset_ns": c.max_offset_ns,
        "clock": c.clock,
    })


def causes_dict(c: WindowCauses) -> dict[str, Any]:
    """One window's waits, transfer, straggler and blame (:mod:`traceprobe.analysis.job.causes`) as a JSON-ready dict."""
    return _clean({
        "run": c.run,
        "window": c.window,
        "steps": c.steps,
        "waits": rows(c.waits),
        "exposed_waits": rows(c.exposed),
        "exposed_transfer_ns": {str(k): v for k, v in c.exposed_transfer_ns.items()},
        "straggler_rank": c.straggler,
        "cause": c.cause,
        "gain_ns": c.gain_ns,
        "gain_per_step_ns": c.gain_per_step_ns,
        "excess_ns": c.excess_ns,
        "excess_per_step_ns": c.excess_per_step_ns,
        "caused_wait_ns": c.caused_wait_ns,
        "kernels": list(c.kernels),
        "label": c.label,
        "text": c.text,
        "blame": rows(c.blame),
    })


def clocks_dict(c: ClockEstimate) -> dict[str, Any]:
    """One window's clock estimate (:func:`traceprobe.analysis.job.clocks.estimate_clocks`) as a JSON-ready dict."""
    return _clean({
        "run": c.run,
        "window": c.window,
        "reference": c.reference,
        "mid_ns": c.mid_ns,
        "supported": c.supported,
        "differ": c.differ,
        "reason": c.reason,
        "spread_ns": c.spread_ns,
        "outliers": c.outliers,
        "ranks": rows(c.ranks),
    })


def what_if_dict(w: WindowWhatIf) -> dict[str, Any]:
    """One window's what-ifs (:mod:`traceprobe.analysis.causal.what_if`) as a JSON-ready dict."""
    return _clean({"run": w.run, "window": w.window, "path": w.path, "ranks": list(w.ranks), "steps": w.steps,
                   "window_ns": w.window_ns, "finding": w.finding(), "causes": rows(w.table), "causes_by_step": rows(w.by_step),
                   "graph_of_step": rows(w.graph_of_step), "critical_path": rows(w.critical_path)})


def document(summary: Summary) -> dict[str, Any]:
    """The whole JSON document: ``schema``, ``traceprobe``, ``traces``, ``rank_summary``, ``variants``, ``collectives``,
    ``causes``, ``clocks``, ``what_if``, ``failures``, ``top_claims`` (each trace's first-screen claim: the same list,
    in the same words, as the text, Markdown and TSV views, :func:`.actions.tops_by_path`)."""
    return {
        "schema": SCHEMA_VERSION,
        "traceprobe": __version__,
        "traces": [report_dict(r) for r in summary.reports],
        "rank_summary": rows(rank_rows(summary.rank_summary)),
        "variants": rows(summary.variants),
        "collectives": [collectives_dict(c) for c in summary.collectives],
        "causes": [causes_dict(c) for c in summary.causes],
        "clocks": [clocks_dict(c) for c in summary.clocks],
        "what_if": [what_if_dict(w) for w in summary.what_ifs],
        "failures": [{"path": f.path, "error": f.error} for f in summary.failures],
        "top_claims": [{"path": p, "claim": t.label, "cause": t.cause, "do": t.do, "what_if": t.what_if, "gain_ns": int(t.gain_ns),
                        "share": float(t.share), "bound_ns": int(t.bound_ns)} for p, t in tops_by_path(summary).items()],
    }


def to_json(summary: Summary) -> str:
    """:func:`document` as indented JSON text (UTF-8: names from traces are written as they are, not as ``\\u`` escapes).

    Rendered here, in the command's process, from the finished summary: the one route to the document."""
    doc = document(summary)
    try:
        raw = msgspec.json.encode(doc)
    except UnicodeEncodeError:  # a file name that is not UTF-8: its bytes as \xNN (traceprobe.console.shown_names)
        from ..console import shown_names

        raw = msgspec.json.encode(shown_names(doc))
    return msgspec.json.format(raw, indent=2).decode() + "\n"
