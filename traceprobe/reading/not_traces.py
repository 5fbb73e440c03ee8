"""What a file that is no Kineto trace is, in words: a Perfetto or Nsight Systems file, a PyTorch execution trace,
memory export or snapshot, a traceprobe manifest or report, a serving engine's summary.

Used by :mod:`.decode` where a file is not JSON or holds no ``traceEvents`` list, so that the error names what the file
is and what to do, rather than saying ``not valid JSON``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec


def not_json(path: str | Path, head: bytes, error: str) -> str:
    """Why a file whose first bytes ``head`` are not JSON is not a trace: a Perfetto protobuf is named (by its
    suffix, or as a ``Trace`` message: field 1, ``packet``, length-delimited, so byte 0x0a, a varint length, and
    bytes no JSON text holds) and an Nsight Systems report (by its suffix, ``.nsys-rep``, ``.qdrep``), each with what
    to do; anything else is ``not valid JSON (error)``."""
    protobuf = head[:1] == b"\x0a" and any(b < 0x20 and b not in b"\t\n\r" for b in head[1:64])
    if str(path).endswith((".nsys-rep", ".qdrep", ".qdstrm")):
        return ("an Nsight Systems report, not a torch.profiler trace: traceprobe reads torch.profiler (Kineto) JSON; "
                "record the run with torch.profiler (traceprobe record --script SCRIPT), or read this report with nsys "
                "(nsys stats, nsys export --type sqlite)")
    if str(path).endswith((".pftrace", ".perfetto-trace")) or protobuf:
        return ("a Perfetto trace (protobuf), not a torch.profiler trace: open it with traceprobe view PATH (the Perfetto "
                "UI); traceprobe's figures need the torch.profiler JSON it was made from")
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
    return f"not a torch.profiler trace: no 'traceEvents' list (top-level keys: {shown or 'none'})"
