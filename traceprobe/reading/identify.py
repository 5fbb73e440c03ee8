"""Naming a file that is not a torch.profiler trace: one line saying what it looks like.

:func:`not_a_trace` is asked when the stream decoder (:mod:`.decode`) finds no
``traceEvents`` list, or bytes that are not JSON at all. It names what it
recognises, so that a folder scan says ``a PyTorch execution trace`` or ``a
Perfetto trace`` rather than ``not valid JSON``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

NOT_A_TRACE = "not a torch.profiler trace: no 'traceEvents' list"
"""What :func:`not_a_trace` says of JSON it does not recognise."""
PERFETTO = "a Perfetto trace (protobuf): traceprobe reads torch.profiler JSON"


def _looks_like_protobuf(head: bytes) -> bool:
    """A Perfetto trace is a ``Trace`` message: repeated field 1 (``packet``), length-delimited, so it starts with
    byte 0x0a and a varint length, and holds bytes no JSON text holds (below 0x20 but white space)."""
    return head[:1] == b"\x0a" and any(b < 0x20 and b not in b"\t\n\r" for b in head[1:64])


def not_json(path: str | Path, head: bytes, error: str) -> str:
    """Why a file whose first bytes ``head`` are not JSON is not a trace: a Perfetto protobuf is named,
    anything else is ``not valid JSON (error)``."""
    if str(path).endswith((".pftrace", ".perfetto-trace")) or _looks_like_protobuf(head):
        return PERFETTO
    return f"not valid JSON ({error})"


def not_a_trace(path: str | Path, raw: Any) -> str:
    """Why a JSON document (``raw``, its bytes) without a ``traceEvents`` list is not a trace, naming what it is where known.

    Recognised: PyTorch execution traces (``nodes`` and ``schema``, written by
    ``ExecutionTraceObserver``, often ``*_et.json``), memory-timeline exports
    (``export_memory_timeline``: ``[times, sizes]``), memory snapshots
    (``segments``/``device_traces``), traceprobe's ``manifest.json`` and JSON
    reports, serving engines' ``execution_details.json``-style summaries; any other
    object is named by its first keys.

    Raises:
        msgspec.DecodeError: ``raw`` is not JSON.
    """
    doc = msgspec.json.decode(raw, type=dict[str, msgspec.Raw] | list[msgspec.Raw])
    if isinstance(doc, list):
        if len(doc) == 2 and all(bytes(x).lstrip()[:1] == b"[" for x in doc):
            return "a PyTorch memory-timeline export, not a Kineto trace: skipped"
        return "unexpected trace content: a list of events expected"
    keys = set(doc)
    if "traceEvents" in keys:
        return "unexpected trace content: 'traceEvents' is not a list of events"
    if {"nodes", "schema"} <= keys:
        return "a PyTorch execution trace, not a Kineto trace: skipped"
    if {"segments", "device_traces"} & keys:
        return "a PyTorch memory snapshot, not a Kineto trace: skipped"
    if "variants" in keys and ("environment" in keys or "workload" in keys):
        return "a traceprobe manifest, not a trace: skipped"
    if "traceprobe" in keys or {"schema", "reports"} <= keys:
        return "a traceprobe report, not a trace: skipped"
    name = Path(str(path)).name
    if "execution_details" in name or {"requests", "config"} <= keys or "engine_args" in keys:
        return "not a torch.profiler trace (looks like a serving engine's execution details): skipped"
    shown = ", ".join(sorted(keys)[:5]) + (", ..." if len(keys) > 5 else "")
    return f"{NOT_A_TRACE} (top-level keys: {shown or 'none'})"
