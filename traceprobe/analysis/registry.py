"""Figures declared once: what a figure of one trace is, where its value comes from, and its JSON Schema.

A :class:`Figure` is one key of a trace's object in the JSON document. The figures the
report's own fields hold are declared in :data:`traceprobe.report.figures.TRACE`; a
figure computed by a function of its own is declared here, in :data:`COMPUTED`, and
needs nothing else:

1. write its function in its analysis module: a ``Trace`` in, a DataFrame out, the
   figure defined in its docstring (columns, dtypes, units);
2. add one ``Figure(key, schema=..., compute=...)`` to :data:`COMPUTED`.

:func:`~traceprobe.analysis.per_trace.overlap_report` then runs it on every trace
(:attr:`~traceprobe.analysis.per_trace.OverlapReport.extra` holds its table by key), the
JSON document and its generated schema carry it after the report's own figures
(:mod:`traceprobe.report.figures`), the CSV and Markdown outputs show it as a section
(:func:`traceprobe.report.sections.sections`) and summaries keep it
(:mod:`.summaries`). A column in the summary table (:data:`traceprobe.report.table.COLUMNS`)
or a gate (:data:`traceprobe.report.gates.GATES`) names its figure by its key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pandas as pd

from ..reading import Trace
from .device.idle_gaps import idle_gaps
from .work.efficiency import trace_efficiency

R = TypeVar("R")
"""What a figure's ``get`` reads its value off: one trace's report (:class:`.per_trace.OverlapReport`, which runs
:data:`COMPUTED` and so is not named here)."""


@dataclass(frozen=True)
class Inputs:
    """What a computed figure is computed from (built once per trace by :func:`.per_trace.overlap_report`).

    Attributes:
        trace: the whole trace, as loaded.
        kept: the trace with the device work the figures count (launched inside the
            profiled steps unless ``--all-device-work``, see :mod:`.profiled`); its
            ``window_ns`` is the report's trace window.
        windows: the steps' GPU intervals, columns ``step``, ``start_ns``, ``end_ns``
            (int64 ns, :func:`.per_trace.gpu_step_windows`); empty without steps.
    """

    trace: Trace
    kept: Trace
    windows: pd.DataFrame


@dataclass(frozen=True)
class Figure(Generic[R]):
    """One key of a trace's JSON object, declared once (``Figure[OverlapReport]`` in :data:`traceprobe.report.figures.TRACE`).

    Attributes:
        key: its name in the document (and its section name in CSV and Markdown, its key
            in :attr:`.per_trace.OverlapReport.extra` for a computed figure).
        get: reads the value off a report (a DataFrame through ``rows``; cleaned to JSON
            types after); None for a computed figure, whose value is its table in
            ``OverlapReport.extra``.
        schema: its JSON Schema (``$ref`` to ``#/$defs/ns``, ``ns_or_null`` and
            ``fraction`` allowed, :data:`traceprobe.report.figures.DEFS`); for a computed
            figure, the schema of one row of its table.
        required: every trace's object has it.
        compute: for a figure of :data:`COMPUTED`: its table (a DataFrame) from the
            trace's :class:`Inputs`.
    """

    key: str
    get: Callable[[R], Any] | None = None
    schema: dict[str, Any] = field(default_factory=dict)
    required: bool = False
    compute: Callable[[Inputs], pd.DataFrame] | None = None


COMPUTED: tuple[Figure[Any], ...] = (
    Figure("idle_gaps", compute=lambda x: idle_gaps(x.kept),
           schema={"type": "object",
                   "description": "per device, its idle gaps in the trace window and the longest (traceprobe.analysis.device.idle_gaps)",
                   "properties": {"device": {"type": "integer"},
                                  "gaps": {"type": "integer", "minimum": 0},
                                  "longest_gap_ns": {"$ref": "#/$defs/ns"},
                                  "longest_gap_start_ns": {"type": "integer", "description": "-1 without a gap"}},
                   "required": ["device", "gaps", "longest_gap_ns", "longest_gap_start_ns"]},
           required=True),
    Figure("kernel_classes", compute=lambda x: trace_efficiency(x.kept).classes,
           schema={"type": "object",
                   "description": "per device and kernel class, its time, work and fraction of the device's roofline "
                                  "(traceprobe.analysis.work.efficiency; FLOPs and bytes only where shapes were recorded)",
                   "properties": {"device": {"type": "integer"}, "klass": {"type": "string"}, "time_ns": {"$ref": "#/$defs/ns"},
                                  "share": {"type": ["number", "null"]}, "events": {"type": "integer"},
                                  "modelled_ns": {"$ref": "#/$defs/ns"}, "flops": {"type": "integer"}, "bytes": {"type": "integer"},
                                  "tflops": {"type": ["number", "null"]}, "tbps": {"type": ["number", "null"]},
                                  "roofline_ns": {"$ref": "#/$defs/ns_or_null"},
                                  "efficiency": {"type": ["number", "null"]}, "bound": {"type": "string"},
                                  "lost_ns": {"$ref": "#/$defs/ns_or_null"}},
                   "required": ["device", "klass", "time_ns", "share", "flops", "bytes", "efficiency", "bound", "lost_ns"]},
           required=True),
    Figure("kernel_ops", compute=lambda x: trace_efficiency(x.kept).ops,
           schema={"type": "object",
                   "description": "the ops losing most time against their roofline, per (device, op, recorded shapes) "
                                  "(traceprobe.analysis.work.efficiency); none without shapes",
                   "properties": {"device": {"type": "integer"}, "name": {"type": "string"}, "klass": {"type": "string"},
                                  "dtype": {"type": "string"}, "shape": {"type": "string"}, "count": {"type": "integer"},
                                  "time_ns": {"$ref": "#/$defs/ns"}, "flops": {"type": "integer"}, "bytes": {"type": "integer"},
                                  "tflops": {"type": ["number", "null"]}, "tbps": {"type": ["number", "null"]},
                                  "efficiency": {"type": ["number", "null"]}, "bound": {"type": "string"},
                                  "roofline_ns": {"$ref": "#/$defs/ns_or_null"}, "lost_ns": {"$ref": "#/$defs/ns_or_null"}},
                   "required": ["device", "name", "klass", "time_ns", "flops", "bytes", "lost_ns"]},
           required=True),
    Figure("mfu", compute=lambda x: trace_efficiency(x.kept).mfu,
           schema={"type": "object",
                   "description": "model FLOPs utilisation per device and step (step -1: the trace window): the matrix ops' "
                                  "FLOPs over the window over the peak of their main dtype, and hardware FLOPs utilisation "
                                  "(hfu: recomputed ops included; PaLM, Appendix B) (traceprobe.analysis.work.efficiency)",
                   "properties": {"device": {"type": "integer"}, "step": {"type": "integer"}, "window_ns": {"$ref": "#/$defs/ns"},
                                  "flops": {"type": "integer"}, "hardware_flops": {"type": "integer"}, "dtype": {"type": "string"},
                                  "peak_tflops": {"type": ["number", "null"]}, "mfu": {"type": ["number", "null"]},
                                  "hfu": {"type": ["number", "null"]}},
                   "required": ["device", "step", "window_ns", "flops", "dtype", "mfu"]},
           required=True),
)
"""The figures computed by a function of their own, in the document's order (after the report's own figures)."""


def compute_figures(inputs: Inputs) -> dict[str, pd.DataFrame]:
    """Every figure of :data:`COMPUTED` on one trace: its table by key."""
    return {f.key: f.compute(inputs) for f in COMPUTED if f.compute is not None}
