"""The JSON document's figures, declared once: each entry says where one trace's value comes from and what it is.

:data:`TRACE` lists the keys of a trace's object in the JSON document, in order: each
:class:`~traceprobe.analysis.registry.Figure` holds the function that reads it off an
:class:`~traceprobe.analysis.per_trace.OverlapReport` and its JSON Schema, and the figures
computed by a function of their own (:data:`traceprobe.analysis.registry.COMPUTED`) come
last. The document (:func:`trace_object`, used by :mod:`.json_document`), its JSON Schema
(:func:`schema`, printed by ``traceprobe schema``) come from this list, so they cannot drift
apart; the summary table's columns (:data:`.table.COLUMNS`) name the figure each shows by
its key, and the CLI's gates (:mod:`.gates`) read the values they judge through
:func:`figure` and :func:`value`. The parts of the document across traces are declared in
:mod:`.document_schema`.

Adding a figure to the report: its function in its analysis module and one entry in
:data:`traceprobe.analysis.registry.COMPUTED` (its key, schema and function); nothing here
changes. ``tests/test_cli.py`` validates the report of every sample trace against
:func:`schema`.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pandas as pd

from ..analysis.per_trace import OverlapReport
from ..analysis.registry import COMPUTED, Figure
from .document_schema import DOCUMENT
from .json_values import rows
from .sections import top_kernels


def _device_concurrency(r: OverlapReport) -> dict[str, Any]:
    dc = r.devices
    return {"device_count": dc.device_count, "any_busy_ns": dc.any_busy_ns, "concurrent_ns": dc.concurrent_ns,
            "concurrency": dc.concurrency}


def _cpu_gpu(r: OverlapReport) -> dict[str, Any]:
    c = r.cpu_gpu
    return {"host_compute_ns": c.host_compute_ns, "device_busy_ns": c.device_busy_ns, "overlapped_ns": c.overlapped_ns,
            "fraction": c.fraction, "fraction_of_device": c.fraction_of_device, "fraction_of_shorter": c.fraction_of_shorter}


def _verdicts(r: OverlapReport) -> list[dict[str, Any]]:
    return [{"figure": v.figure, "subject": v.subject, "value": v.value, "level": v.level, "text": v.text} for v in r.verdicts]


TRACE: tuple[Figure[OverlapReport], ...] = (
    Figure('path', lambda r: r.path,
           {'type': 'string'},
           required=True),
    Figure('workload', lambda r: r.info.get("workload"),
           {'type': ['string', 'null']}),
    Figure('variant', lambda r: r.info.get("variant"),
           {'type': ['string', 'null']}),
    Figure('wall_s', lambda r: r.info.get("wall_s"),
           {'type': ['number', 'null']}),
    Figure('rank', lambda r: r.rank,
           {'type': ['integer', 'null']}),
    Figure('event_count', lambda r: r.event_count,
           {'type': 'integer'}),
    Figure('window_ns', lambda r: list(r.window_ns),
           {'type': 'array', 'items': {'$ref': '#/$defs/ns'}, 'minItems': 2, 'maxItems': 2},
           required=True),
    Figure('duration_ns', lambda r: r.window_ns[1] - r.window_ns[0],
           {'$ref': '#/$defs/ns'},
           required=True),
    Figure('streams', lambda r: rows(r.streams),
           {'type': 'array',
            'items': {'type': 'object',
                      'properties': {'device': {'type': 'integer'},
                                     'stream': {'type': 'integer'},
                                     'busy_ns': {'$ref': '#/$defs/ns'},
                                     'utilization': {'$ref': '#/$defs/fraction'},
                                     'events': {'type': 'integer'},
                                     'kernels': {'type': 'integer'},
                                     'memcpys': {'type': 'integer'},
                                     'memsets': {'type': 'integer'}},
                      'required': ['busy_ns', 'device', 'events', 'kernels', 'memcpys', 'memsets', 'stream', 'utilization']}},
           required=True),
    Figure('copy_overlap', lambda r: rows(r.copy_overlap),
           {'type': 'array',
            'items': {'type': 'object',
                      'properties': {'device': {'type': 'integer'},
                                     'direction': {'type': 'string'},
                                     'copies': {'type': 'integer'},
                                     'bytes': {'type': 'integer'},
                                     'copy_ns': {'$ref': '#/$defs/ns'},
                                     'overlapped_ns': {'$ref': '#/$defs/ns'},
                                     'fraction': {'$ref': '#/$defs/fraction'}},
                      'required': ['bytes', 'copies', 'copy_ns', 'device', 'direction', 'fraction', 'overlapped_ns']}},
           required=True),
    Figure('devices', lambda r: rows(r.devices.devices),
           {'type': 'array',
            'items': {'type': 'object',
                      'properties': {'device': {'type': 'integer'},
                                     'busy_ns': {'$ref': '#/$defs/ns'},
                                     'utilization': {'$ref': '#/$defs/fraction'},
                                     'idle_ns': {'$ref': '#/$defs/ns'},
                                     'concurrent_ns': {'$ref': '#/$defs/ns'},
                                     'concurrency': {'$ref': '#/$defs/fraction'}},
                      'required': ['busy_ns', 'concurrency', 'concurrent_ns', 'device', 'idle_ns', 'utilization']}},
           required=True),
    Figure('device_concurrency', _device_concurrency,
           {'type': 'object',
            'properties': {'device_count': {'type': 'integer'},
                           'any_busy_ns': {'$ref': '#/$defs/ns'},
                           'concurrent_ns': {'$ref': '#/$defs/ns'},
                           'concurrency': {'$ref': '#/$defs/fraction'}},
            'required': ['any_busy_ns', 'concurrency', 'concurrent_ns', 'device_count']},
           required=True),
    Figure('stream_concurrency', lambda r: rows(r.stream_concurrency),
           {'type': 'array',
            'items': {'type': 'object',
                      'properties': {'device': {'type': 'integer'},
                                     'streams': {'type': 'integer'},
                                     'busy_ns': {'$ref': '#/$defs/ns'},
                                     'multi_stream_ns': {'$ref': '#/$defs/ns'},
                                     'concurrency': {'$ref': '#/$defs/fraction'},
                                     'kernel_busy_ns': {'$ref': '#/$defs/ns'},
                                     'multi_stream_kernel_ns': {'$ref': '#/$defs/ns'},
                                     'kernel_concurrency': {'$ref': '#/$defs/fraction'},
                                     'side_busy_ns': {'$ref': '#/$defs/ns'},
                                     'side_concurrency': {'$ref': '#/$defs/fraction'}},
                      'required': ['busy_ns',
                                   'concurrency',
                                   'device',
                                   'kernel_busy_ns',
                                   'kernel_concurrency',
                                   'multi_stream_kernel_ns',
                                   'multi_stream_ns',
                                   'side_busy_ns',
                                   'side_concurrency',
                                   'streams']}},
           required=True),
    Figure('comm_overlap', lambda r: rows(r.comm_overlap),
           {'type': 'array',
            'items': {'type': 'object',
                      'properties': {'device': {'type': 'integer'},
                                     'rank': {'type': ['integer', 'null']},
                                     'comm_kernels': {'type': 'integer'},
                                     'comm_ns': {'$ref': '#/$defs/ns'},
                                     'overlapped_ns': {'$ref': '#/$defs/ns'},
                                     'fraction': {'$ref': '#/$defs/fraction'}},
                      'required': ['comm_kernels', 'comm_ns', 'device', 'fraction', 'overlapped_ns', 'rank']}},
           required=True),
    Figure('cpu_gpu', _cpu_gpu,
           {'type': 'object',
            'properties': {'host_compute_ns': {'$ref': '#/$defs/ns'},
                           'device_busy_ns': {'$ref': '#/$defs/ns'},
                           'overlapped_ns': {'$ref': '#/$defs/ns'},
                           'fraction': {'$ref': '#/$defs/fraction'},
                           'fraction_of_device': {'$ref': '#/$defs/fraction'},
                           'fraction_of_shorter': {'$ref': '#/$defs/fraction'}},
            'required': ['device_busy_ns', 'fraction', 'fraction_of_shorter', 'host_compute_ns', 'overlapped_ns']},
           required=True),
    Figure('host_threads', lambda r: asdict(r.host_threads) if r.host_threads is not None else None,
           {'description': 'host-thread concurrency (traceprobe.analysis.host.host_threads); null only for reports built by hand',
            'oneOf': [{'type': 'null'},
                      {'type': 'object',
                       'properties': {'threads': {'type': 'integer', 'minimum': 0},
                                      'busy_ns': {'$ref': '#/$defs/ns'},
                                      'multi_thread_ns': {'$ref': '#/$defs/ns'},
                                      'thread_ns_sum': {'$ref': '#/$defs/ns'},
                                      'busiest_thread_ns': {'$ref': '#/$defs/ns'},
                                      'concurrency': {'$ref': '#/$defs/fraction'},
                                      'fair_concurrency': {'$ref': '#/$defs/fraction'}},
                       'required': ['threads',
                                    'busy_ns',
                                    'multi_thread_ns',
                                    'thread_ns_sum',
                                    'busiest_thread_ns',
                                    'concurrency',
                                    'fair_concurrency']}]}),
    Figure('steps', lambda r: rows(r.steps),
           {'type': 'array',
            'items': {'type': 'object',
                      'properties': {'step': {'type': 'integer'},
                                     'host_start_ns': {'$ref': '#/$defs/ns'},
                                     'host_end_ns': {'$ref': '#/$defs/ns'},
                                     'host_ns': {'$ref': '#/$defs/ns'},
                                     'gpu_start_ns': {'type': 'integer',
                                                      'description': "start of the step's GPU interval (its anchor: the first "
                                                                     'compute kernel it launched, else its first work; a later '
                                                                     "step's if earlier; the first step: the steps' first work); "
                                                                     '-1 for a step that launched no device work'},
                                     'gpu_end_ns': {'type': 'integer',
                                                    'description': "end of the step's GPU interval (the next step's start; the "
                                                                   'last step: the last end); -1 for a step that launched no '
                                                                   'device work'},
                                     'gpu_ns': {'$ref': '#/$defs/ns'},
                                     'gpu_busy_ns': {'$ref': '#/$defs/ns'},
                                     'events': {'type': 'integer', 'description': 'device events the step launched'},
                                     'launched_start_ns': {'type': 'integer',
                                                           'description': 'first start of the device work the step launched; -1 '
                                                                          'without'},
                                     'launched_end_ns': {'type': 'integer',
                                                         'description': 'last end of the device work the step launched; -1 '
                                                                        'without'},
                                     'launched_busy_ns': {'$ref': '#/$defs/ns'},
                                     'device_concurrency': {'$ref': '#/$defs/fraction'},
                                     'copy_overlap': {'$ref': '#/$defs/fraction'},
                                     'comm_overlap': {'$ref': '#/$defs/fraction'},
                                     'stream_concurrency': {'$ref': '#/$defs/fraction'}},
                      'required': ['events',
                                   'gpu_busy_ns',
                                   'gpu_end_ns',
                                   'gpu_ns',
                                   'gpu_start_ns',
                                   'host_end_ns',
                                   'host_ns',
                                   'host_start_ns',
                                   'launched_busy_ns',
                                   'launched_end_ns',
                                   'launched_start_ns',
                                   'step']},
            'description': "Per ProfilerStep: host window, GPU interval (the steps' intervals tile the device time, never "
                           'overlapping), the figures of the device work inside it whichever step launched it, and the work the '
                           'step launched.'},
           required=True),
    Figure('throughput_steps_per_s', lambda r: r.throughput,
           {'type': ['number', 'null']}),
    Figure('work_ns', lambda r: r.work_ns,
           {'$ref': '#/$defs/ns'},
           required=True),
    Figure('all_device_work', lambda r: r.all_device_work,
           {'type': 'boolean'},
           required=True),
    Figure('set_aside', lambda r: rows(r.set_aside),
           {'type': 'array',
            'items': {'type': 'object',
                      'properties': {'reason': {'type': 'string'},
                                     'device': {'type': 'integer'},
                                     'work': {'type': 'string'},
                                     'events': {'type': 'integer'},
                                     'busy_ns': {'$ref': '#/$defs/ns'}},
                      'required': ['busy_ns', 'device', 'events', 'reason', 'work']},
            'description': 'Device work left out of the figures (launched outside the profiled steps, or no launch in the '
                           'trace).'},
           required=True),
    Figure('notes', lambda r: list(r.notes),
           {'type': 'array', 'items': {'type': 'string'}},
           required=True),
    Figure('verdicts', _verdicts,
           {'type': 'array',
            'items': {'type': 'object',
                      'properties': {'figure': {'type': 'string'},
                                     'subject': {'type': 'string'},
                                     'value': {'type': 'number'},
                                     'level': {'enum': ['confirmed', 'partial', 'none', 'n/a']},
                                     'text': {'type': 'string'}},
                      'required': ['figure', 'level', 'subject', 'text', 'value']}},
           required=True),
    Figure('parallelism', lambda r: r.parallelism,
           {'type': 'boolean'},
           required=True),
    Figure('breakdown', lambda r: rows(r.breakdown),
           {'type': 'array', 'items': {'type': 'object', 'patternProperties': {'_ns$': {'$ref': '#/$defs/ns'}}}}),
    Figure('breakdown_steps', lambda r: rows(r.breakdown_steps),
           {'type': 'array', 'items': {'type': 'object', 'patternProperties': {'_ns$': {'$ref': '#/$defs/ns'}}}}),
    Figure('findings', lambda r: rows(r.findings),
           {'type': 'array',
            'items': {'type': 'object',
                      'properties': {'kind': {'type': 'string'},
                                     'subject': {'type': 'string'},
                                     'device': {'type': 'integer'},
                                     'headroom_ns': {'$ref': '#/$defs/ns'},
                                     'text': {'type': 'string'},
                                     'per_step_ns': {'type': 'integer',
                                                     'description': 'mean time per step over the steps in which it occurs, ns; '
                                                                    '-1 without steps'},
                                     'label': {'type': 'string', 'description': 'the cause and its time, short, for tables'}},
                      'required': ['device', 'headroom_ns', 'kind', 'subject', 'text']}}),
    Figure('idle_causes', lambda r: rows(r.idle_causes),
           {'type': 'array',
            'description': 'idle time by cause per device (step -1) and per device and step (traceprobe.analysis.host.idle_causes)',
            'items': {'type': 'object',
                      'properties': {'device': {'type': 'integer'},
                                     'step': {'type': 'integer'},
                                     'cause': {'enum': ['graph_capture',
                                                        'sync',
                                                        'profiler',
                                                        'compile',
                                                        'slow_call',
                                                        'warmup',
                                                        'pinned_alloc',
                                                        'device_alloc',
                                                        'other_rank',
                                                        'data_loading',
                                                        'optimizer',
                                                        'launch',
                                                        'cpu_op',
                                                        'host',
                                                        'dependency',
                                                        'queued',
                                                        'unattributed']},
                                     'ns': {'$ref': '#/$defs/ns'},
                                     'top': {'type': 'string'}},
                      'required': ['device', 'step', 'cause', 'ns', 'top']}}),
    Figure('kernels', lambda r: rows(top_kernels(r)),
           {'type': 'array', 'items': {'type': 'object', 'patternProperties': {'_ns$': {'$ref': '#/$defs/ns'}}}}),
    Figure('queue', lambda r: rows(r.queue),
           {'type': 'array', 'items': {'type': 'object', 'patternProperties': {'_ns$': {'$ref': '#/$defs/ns_or_null'}}}}),
    *(Figure(f.key, None, {'type': 'array', 'items': f.schema}, f.required, f.compute) for f in COMPUTED),
)
"""One trace's object in the JSON document, key by key, in the document's order (the computed figures last,
each an array of its table's rows)."""

_BY_KEY = {f.key: f for f in TRACE}

DEFS: dict[str, Any] = {'ns': {'type': 'integer', 'description': 'nanoseconds'},
     'ns_or_null': {'type': ['integer', 'null'], 'description': 'nanoseconds, or null where undefined'},
     'fraction': {'type': ['number', 'null'], 'minimum': 0, 'maximum': 1}}
"""Shared definitions the figures' schemas refer to."""


def figure(key: str) -> Figure[OverlapReport]:
    """The figure of :data:`TRACE` named ``key``.

    Raises:
        KeyError: no figure has that key.
    """
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"no figure {key!r} in the JSON document's figures (report/figures.py)") from None


def value(f: Figure[OverlapReport], r: OverlapReport) -> Any:
    """The value of figure ``f`` in report ``r``'s JSON object (before cleaning to JSON types): what ``f.get``
    reads, or for a computed figure the rows of its table (an empty list where the report has none: built
    by hand)."""
    if f.get is not None:
        return f.get(r)
    table = r.extra.get(f.key)
    return rows(table if table is not None else pd.DataFrame())


def trace_object(r: OverlapReport) -> dict[str, Any]:
    """One trace's object of the JSON document, from :data:`TRACE` (values still to be cleaned to JSON types)."""
    return {f.key: value(f, r) for f in TRACE}


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``overlap-report --format json``, made from :data:`DOCUMENT`,
    :data:`DEFS` and :data:`TRACE`."""
    trace = {"type": "object", "properties": {f.key: f.schema for f in TRACE}, "required": sorted(f.key for f in TRACE if f.required)}
    return {**DOCUMENT, "$defs": {**DEFS, "trace": trace}}
