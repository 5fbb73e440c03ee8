"""The loaded trace: :class:`Trace` and :func:`load_trace`.

:mod:`.decode` streams a trace file into columns (exact int64 ns times among
them); here they become the trace's DataFrames, rows sorted by start, names and
labels converted once per distinct value, never once per event. Reading a trace
never imports torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import TraceFormatError
from . import side_tables as st
from .columns import CAT_CODE, DMA_DIRECTIONS, KINDS, NO_ID, STEP_NAME, is_step_name, mtia_kind, thread_ids
from .comm_kernels import comm_op_launches, device_name_facts
from .decode import Decoded, read_events
from .files import is_url
from .limits import MAX_STREAMS, too_many
from .shares import read_events_shared
from .side_tables import categorical, empty_frame
from .splitter import HEAD_FIELDS

__all__ = ["MAX_STREAMS", "Trace", "backend_of", "load_trace"]

MAX_STEP = 2**62
"""Step numbers at or beyond this are not steps: their annotations are ignored, with a warning."""
MAX_RANK = 1 << 28
"""``distributedInfo.rank`` must be an integer below this in magnitude, else the trace has no rank (with a warning)."""

KIND_NAMES = ("kernel", "memcpy", "memset")
"""Device event kinds, by code."""
MAX_DEVICE = 1 << 24
"""Device ids at or beyond this (in magnitude) are not device indices: their events are dropped, with a warning
(exports give each device a 32-bit process id above 2^24)."""


@dataclass(frozen=True)
class Trace:
    """One loaded trace.

    Attributes:
        path: the file read.
        device_events: one row per device activity (Kineto ``cat`` kernel, gpu_memcpy or gpu_memset; on MTIA
            ``mtia_ccp_events``: DMA requests as memcpy, stream events left out, the rest as kernels), sorted by
            ``start_ns``. Columns:

            - ``device`` (int64): GPU index, from ``args.device`` (else ``pid``).
            - ``stream`` (int64): CUDA stream id, from ``args.stream`` (else ``tid``).
            - ``kind`` (category): ``kernel``, ``memcpy`` or ``memset``.
            - ``name`` (category): kernel or copy name as Kineto wrote it.
            - ``start_ns``, ``end_ns`` (int64): [start, end) in ns.
            - ``bytes`` (int64): bytes moved or set; -1 where not given (kernels).
            - ``correlation`` (int64): CUPTI correlation id linking the event to the host runtime call that
              launched it; -1 where absent.
            - ``direction`` (category): memcpy direction from the name: HtoD, DtoH, DtoD, PtoP or HtoH; NaN for
              kernels and memsets.
            - ``src_kind``, ``dst_kind`` (category): memory kinds from the memcpy name (Pageable, Pinned,
              Device, ...); NaN where not a memcpy.
            - ``is_comm`` (bool): a communication kernel, by what the trace says (:mod:`.comm_kernels`): a
              ``kernel`` launched by a communication host op (``record_param_comms``, ``nccl:*``, ``c10d::*``: the
              innermost op around its launch call), or that carries Kineto's ``Collective name`` arg, or whose
              name is of a known communication library (NCCL/RCCL, DeepEP, NVSHMEM; custom, quick,
              symmetric-memory, multimem all-reduce; ...). Every other kernel is compute.
        host_events: one row per host activity (``cpu_op``, ``cuda_runtime``, ``cuda_driver``,
            ``user_annotation``; a ``ProfilerStep#N`` is always a ``user_annotation``, though torch 1.8/1.9 wrote it
            as an ``Operator``: :data:`.columns.STEP_NAME`), sorted by ``start_ns``. Columns ``pid`` and ``tid`` (str: Kineto may write
            either numbers or labels), ``cat`` (category), ``name`` (category), ``start_ns``, ``end_ns`` (int64
            ns), ``correlation`` and ``external_id`` (int64, -1 if absent); where shapes or FLOPs were recorded,
            ``args`` (int32, a row of ``op_args``, -1: none), and ``seq``, ``fwd_thread`` (int64, a ``cpu_op``'s
            ``Sequence number`` and ``Fwd thread id``, -1 if absent: autograd's link from a backward op, ``fwd_thread``
            above 0, to the forward op of the same sequence number on that forward thread, ``fwd_thread`` 0).
        op_args: the host ops' recorded shapes and FLOPs, one row per distinct tuple (:func:`.side_tables.op_args_frame`).
        devices: ``deviceProperties`` as a DataFrame (one row per GPU, Kineto's keys as columns: ``id``,
            ``name``, ``totalGlobalMem`` in bytes, ...); empty if the trace has none.
        metadata: other top-level fields (``distributedInfo``, ``schemaVersion``, ``cuda_runtime_version``,
            ``baseTimeNanoseconds``, ``traceName``, ...), plus ``event_count`` (length of ``traceEvents``) and
            ``warnings`` (list of str: what the loader dropped, guessed or found odd).
        collective_args: one row per event whose args name a collective (Kineto's ``Collective name``: torch's
            ``record_param_comms`` host op, and the NCCL kernels of newer torch): ``side`` (``device`` or
            ``host``), ``name`` (str), ``start_ns`` (int64), ``collective`` (str), ``in_nelems``,
            ``out_nelems``, ``group_size`` (int64, -1 if absent), ``dtype``, ``pg_name`` (str, ``""`` if absent;
            from ``Process Group Name``), ``correlation``, ``external_id``, ``src_rank``, ``dst_rank`` (int64, -1 if
            absent; the last two a receive's ``Src Rank`` and a send's ``Dst Rank``: the peer's rank in its group).
        backend: the device runtime, ``cuda``, ``hip`` (ROCm) or ``mtia``, read at load (:func:`backend_of`);
            devices are named ``<backend>:<id>`` (:meth:`device_label`).
        python_events: one row per Python stack frame of a trace recorded with ``with_stack=True`` (Kineto ``cat``
            ``python_function``: one event per call, nested on its thread), sorted by ``start_ns``: ``tid`` (str),
            ``name`` (category: ``file.py(line): function``, or ``<built-in method ...>``), ``start_ns``, ``end_ns``
            (int64 ns). Empty (those columns) for a trace without stacks.
        sync_events: one row per CUDA synchronization event of a trace recorded with Kineto's
            ``enable_cuda_sync_events`` (``cat`` ``cuda_sync``), sorted by ``start_ns``: ``kind`` (category: ``Stream
            Wait Event``, ``Event Sync``, ``Stream Sync``, ``Context Sync``), ``start_ns``, ``end_ns`` (int64 ns),
            ``device``, ``stream`` (the stream that waits; -1 for a host-side sync), ``correlation`` (the runtime
            call's, int64), ``wait_correlation`` (the ``cudaEventRecord`` call waited for, Kineto's
            ``wait_on_cuda_event_record_corr_id``), ``wait_stream`` (the stream it recorded on); -1 where absent (newer
            torch records ``cudaEventRecordWithFlags``, which Kineto does not resolve). Empty for a trace without them.
        overhead_events: one row per CUPTI overhead record (Kineto ``cat`` ``overhead``, written on no thread), sorted by
            ``start_ns``: ``name`` (category: ``Activity Buffer Request``, ``Buffer Flush``, ``Instrumentation``,
            ``Resource``, ``Lazy Function Loading``, ``Runtime Triggered Module Loading``, ``Command Buffer Full``...: CUPTI's
            ``CUpti_ActivityOverheadKind``), ``start_ns``, ``end_ns`` (int64 ns). Empty for a trace without them.

    Derived tables (``steps``) are cached properties computed from these fields, so a copy made with
    ``dataclasses.replace`` (as :func:`traceprobe.analysis.device.steps.clip_trace` does) derives its own.
    """

    path: str
    device_events: pd.DataFrame
    host_events: pd.DataFrame
    devices: pd.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    collective_args: pd.DataFrame = field(default_factory=pd.DataFrame)
    backend: str = "cuda"
    python_events: pd.DataFrame = field(default_factory=lambda: st.no_python_events())
    sync_events: pd.DataFrame = field(default_factory=lambda: st.no_sync_events())
    overhead_events: pd.DataFrame = field(default_factory=lambda: st.no_overhead_events())
    op_args: pd.DataFrame = field(default_factory=lambda: st.op_args_frame([]))
    derived: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    """Tables and arrays derived from the events, computed once per trace (see
    :func:`traceprobe.analysis.memo.per_trace`); a copy made with
    ``dataclasses.replace`` starts with an empty one."""

    @cached_property
    def window_ns(self) -> tuple[int, int]:
        """(first device event start, last device event end) in ns; (0, 0) if none."""
        ev = self.device_events
        if ev.empty:
            return (0, 0)
        return int(ev["start_ns"].min()), int(ev["end_ns"].max())

    @property
    def rank(self) -> int | None:
        """The distributed rank from ``distributedInfo.rank``, if the trace has it."""
        return _rank(self.metadata.get("distributedInfo"))

    def device_label(self, device: int) -> str:
        """How a device is named: ``cuda:0``, ``hip:2``, ``mtia:17``."""
        return f"{self.backend}:{device}"

    @cached_property
    def steps(self) -> pd.DataFrame:
        """``ProfilerStep#N`` host annotations: columns ``step``, ``start_ns``, ``end_ns`` (int64); empty if none.

        The same step written twice (as ``cpu_op`` and ``user_annotation``) keeps
        its widest span.
        """
        return _steps(self.host_events)


def load_trace(path: str | Path, max_bytes: int | None = None, processes: int = 1) -> Trace:
    """Read a Kineto/Chrome trace file into a :class:`Trace`.

    Complete events (``ph: X``) and begin/end pairs (``ph: B``/``E``) of Kineto's
    device and host categories are kept; flows, counters, instants, metadata and
    memory events are ignored.

    Args:
        path: a ``.json`` or ``.json.gz`` file (gzip told by its magic bytes, not its name) or fsspec URL, written
            by ``torch.profiler`` (``export_chrome_trace`` or ``tensorboard_trace_handler``, torch 1.13 or later,
            CUDA, ROCm or MTIA) or any Chrome trace whose device events follow Kineto's categories.
        max_bytes: largest decompressed size accepted (default: the smaller of half the memory available and 4 GiB,
            :func:`.files.default_max_bytes`).
        processes: processes that decode its pieces (:func:`.shares.read_events_shared`: the same columns; 1, the
            default, decodes here: forking a threaded program or a notebook is not safe).

    Returns:
        the :class:`Trace` (columns and dtypes in its docstring); what the loader dropped or found odd is listed
        in ``metadata["warnings"]``.

    Raises:
        TraceFormatError: whatever the cause (unreadable, not a regular file, too large, not JSON, truncated,
            corrupt gzip, nested too deep, not a Chrome trace, an empty ``traceEvents``, events whose
            ``ts``/``dur`` are missing, non-numeric, negative or absurd, absurdly many streams or host threads (:mod:`.limits`), a
            ``distributedInfo.pg_config`` entry that is no process group (:func:`pg_config_problem`)).
    """
    p = path if is_url(path) else Path(path)
    try:
        return _build(p, read_events(p, max_bytes) if processes < 2 else read_events_shared(p, max_bytes, processes))
    except TraceFormatError:
        raise
    except RecursionError:
        raise TraceFormatError(p, "nested too deeply to be a trace") from None
    except MemoryError:
        raise TraceFormatError(p, "not enough memory to load this trace") from None
    except (UnicodeError, ValueError, OverflowError, TypeError, OSError) as exc:
        raise TraceFormatError(p, f"unreadable trace ({type(exc).__name__}: {exc})".splitlines()[0][:300]) from None


def _build(p: str | Path, dec: Decoded) -> Trace:
    if dec.event_count == 0:
        raise TraceFormatError(p, "no events: 'traceEvents' is empty")
    warnings = dec.warnings
    device_events = device_frame(dec, warnings)
    host_events = host_frame(dec)
    by_op = comm_op_launches(device_events, host_events)  # (a kernel a communication op launched: .comm_kernels)
    if by_op.any():
        device_events["is_comm"] = device_events["is_comm"].to_numpy(bool) | by_op
    absurd = too_many(device_events, host_events)  # (streams and host threads: .limits)
    if absurd:
        raise TraceFormatError(p, absurd)
    if device_events.empty and host_events.empty:
        warnings.append("no device or host activity: only metadata, flows, counters or unknown categories")
    metadata = {k: getattr(dec.head, k) for k in HEAD_FIELDS if getattr(dec.head, k) is not None}
    metadata["event_count"] = dec.event_count
    metadata["warnings"] = warnings
    rank = (dec.head.distributedInfo or {}).get("rank") if isinstance(dec.head.distributedInfo, dict) else None
    if rank is not None and _rank(dec.head.distributedInfo) is None:
        warnings.append(f"distributedInfo.rank {str(rank)[:40]!r} is not a rank: ignored")
    problem = pg_config_problem(dec.head.distributedInfo)
    if problem:  # (every reader of the process groups may then take each entry for an object, each rank for an int64)
        raise TraceFormatError(p, problem)
    too_big = sum(n >= MAX_STEP for n in _step_numbers(host_events["name"].cat.categories))
    if too_big:
        warnings.append(f"ProfilerStep annotation(s) numbered beyond 2^62 ignored: {too_big} name(s)")
    devices = pd.DataFrame(dec.head.deviceProperties or [])
    return Trace(
        path=str(p),
        device_events=device_events,
        host_events=host_events,
        devices=devices,
        metadata=metadata,
        collective_args=st.collective_args(dec),
        backend=backend_of(dec, devices),
        python_events=st.python_frame(dec),
        sync_events=st.sync_frame(dec),
        overhead_events=st.overhead_frame(dec),
        op_args=st.op_args_frame(dec.op_args),
    )


def _device_kinds(dec: Decoded) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The device table (MTIA stream events dropped) and its kind codes (0 kernel, 1 memcpy, 2 memset)."""
    c = dec.tables["device"]
    kind = c["cat"].astype(np.int64) - 1
    mtia = np.flatnonzero(kind == len(KIND_NAMES))
    if mtia.size:
        codes = np.unique(c["name"][mtia])
        lut = np.zeros(len(dec.names), dtype=np.int64)
        lut[codes] = [mtia_kind(dec.names[i]) for i in codes.tolist()]  # once per distinct name
        kind[mtia] = lut[c["name"][mtia]]
        keep = kind >= 0
        c, kind = {k: v[keep] for k, v in c.items()}, kind[keep]
    return c, kind


def device_frame(dec: Decoded, warnings: list[str]) -> pd.DataFrame:
    """``Trace.device_events`` (columns in its docstring); what was dropped or odd is added to ``warnings``."""
    c, kind = _device_kinds(dec)
    ids = thread_ids(dec.threads)
    device = np.where(c["device"] == NO_ID, ids[c["pid"]], c["device"])
    stream = np.where(c["stream"] == NO_ID, ids[c["tid"]], c["stream"])
    absurd = np.abs(device) >= MAX_DEVICE
    if absurd.any():
        warnings.append(f"{int(absurd.sum())} device event(s) with a device id beyond 2^24 dropped (first: {int(device[absurd][0])})")
        keep = ~absurd
        c, kind, device, stream = {k: v[keep] for k, v in c.items()}, kind[keep], device[keep], stream[keep]
    negative = int(((device < 0) | (stream < 0)).sum())
    if negative:
        warnings.append(f"{negative} device event(s) with a negative or missing device or stream id (kept as given, -1 where none)")
    order = np.argsort(c["ts"], kind="stable")  # rows by start: every column taken in this order once
    kind, name = kind[order], categorical(c["name"][order], dec.names)
    cols: dict[str, Any] = {
        "device": device[order],
        "stream": stream[order],
        "kind": pd.Categorical.from_codes(kind, categories=list(KIND_NAMES)),
        "name": name,
        "start_ns": c["ts"][order],
        "end_ns": c["end"][order],
        "bytes": np.where(c["bytes"] == NO_ID, -1, c["bytes"])[order],
        "correlation": np.where(c["correlation"] == NO_ID, -1, c["correlation"])[order],
    }
    names = [str(n) for n in name.categories]
    codes = np.asarray(name.codes)
    is_copy = kind == KIND_NAMES.index("memcpy")
    facts = [device_name_facts(n) for n in names]  # once per distinct name
    for k, col in enumerate(("direction", "src_kind", "dst_kind")):
        cols[col] = _by_name(codes, [f[0][k] for f in facts], is_copy)
    dma = c["dma"][order]
    if (is_copy & (dma > 0) & (np.asarray(cols["direction"].codes) < 0)).any():  # MTIA's dma_request: direction from its args
        named = np.asarray(cols["direction"]).astype(object)
        use = is_copy & (dma > 0) & pd.isna(named)
        named[use] = np.array(DMA_DIRECTIONS, dtype=object)[dma[use]]
        cols["direction"] = pd.Categorical(named)
    # communication: a kernel of a documented family (.comm_kernels), or one Kineto wrote a 'Collective name' on (and,
    # once the host events are read, one a communication op launched: _build)
    comm_names = np.array([f[1] for f in facts], dtype=bool)
    named = comm_names[codes] if len(names) else np.zeros(0, bool)
    cols["is_comm"] = (kind == KIND_NAMES.index("kernel")) & (named | (c["comm"][order] >= 0))
    return pd.DataFrame(cols)


def _by_name(codes: np.ndarray, labels: list[str | None], rows: np.ndarray) -> pd.Categorical:
    """``labels[codes]`` (one label per name code) in ``rows``, NaN elsewhere and where a label is None; the
    categories are the labels sorted, mapped through the name codes (no object array per event)."""
    present = np.flatnonzero([v is not None for v in labels])
    cats, inverse = np.unique(np.array(labels, dtype=object)[present].astype(str), return_inverse=True)
    lut = np.full(len(labels) + 1, -1, dtype=np.int64)  # (the last entry: codes of -1)
    lut[present] = inverse
    return pd.Categorical.from_codes(np.where(rows, lut[codes], -1), categories=pd.Index(cats.astype(object)))


def host_frame(dec: Decoded) -> pd.DataFrame:
    """``Trace.host_events`` (columns in its docstring)."""
    c = dec.tables["host"]
    order = np.argsort(c["ts"], kind="stable")  # rows by start: every column taken in this order once
    name = categorical(c["name"][order], dec.names)
    # a step annotation is a user_annotation whatever its category (torch 1.8/1.9 wrote 'Operator': columns.STEP_NAME)
    step = np.array([*(is_step_name(n) for n in name.categories), False], dtype=bool)[np.asarray(name.codes)]
    cat = np.where(step, CAT_CODE["user_annotation"], c["cat"].astype(np.int64)[order])
    return pd.DataFrame(
        {
            "pid": categorical(c["pid"][order], dec.threads),
            "tid": categorical(c["tid"][order], dec.threads),
            "cat": categorical(cat, list(KINDS)),
            "name": name,
            "start_ns": c["ts"][order],
            "end_ns": c["end"][order],
            "correlation": np.where(c["correlation"] == NO_ID, -1, c["correlation"])[order],
            "external_id": np.where(c["external_id"] == NO_ID, -1, c["external_id"])[order],
            **({"args": c["args"][order]} if dec.op_args else {}),  # (only where recorded: a trace without costs nothing)
            **({k: np.where(c[k] == NO_ID, -1, c[k])[order] for k in ("seq", "fwd_thread")} if dec.op_args else {}),
        }
    )


_AMD = re.compile(r"\bAMD\b|Radeon|Instinct", re.IGNORECASE)


def backend_of(dec: Decoded, devices: pd.DataFrame) -> str:
    """The device runtime of a trace: ``mtia`` when it holds ``mtia_ccp_events`` or its
    ``distributedInfo.backend`` names mtia; ``hip`` (ROCm) when it has
    ``hip_runtime_version``/``roctracer_version``, an AMD device in ``deviceProperties``
    or ``hip*`` runtime calls (Kineto files ROCm's under ``cuda_runtime``); ``cuda``
    otherwise."""
    info = dec.head.distributedInfo or {}
    if (dec.tables["device"]["cat"] == len(KIND_NAMES) + 1).any() or "mtia" in str(info.get("backend", "")).lower():
        return "mtia"
    if dec.head.hip_runtime_version is not None or dec.head.roctracer_version is not None:
        return "hip"
    if "name" in devices and any(_AMD.search(str(v)) for v in devices["name"].tolist()):  # (once per device)
        return "hip"
    host = dec.tables["host"]  # (the decoded codes: no pandas needed)
    runtime = np.unique(host["name"][host["cat"] == CAT_CODE["cuda_runtime"]])
    if any(str(dec.names[i]).startswith("hip") for i in runtime.tolist()):  # once per distinct name
        return "hip"
    return "cuda"


def is_rank(r: Any) -> bool:
    """Whether ``r`` (a JSON value) is a rank: an integer (not a bool) below :data:`MAX_RANK` in magnitude."""
    return isinstance(r, int) and not isinstance(r, bool) and abs(r) < MAX_RANK

def pg_config_problem(info: Any) -> str:
    """What in ``info``'s (``distributedInfo``) ``pg_config`` is no process group, in words naming the entry, or "":
    an entry that is not an object, or whose ``ranks`` hold a value that is not a rank (:func:`is_rank`). A
    ``pg_config`` that is not a list, or an entry without ``pg_name`` or ``ranks``, is passed over."""
    cfg = info.get("pg_config") if isinstance(info, dict) else None
    for i, c in enumerate(cfg if isinstance(cfg, list) else []):
        if not isinstance(c, dict):
            return f"distributedInfo.pg_config[{i}] is {type(c).__name__} {str(c)[:40]!r}, not a process group (an object)"
        ranks = c.get("ranks")
        bad = next((r for r in ranks if not is_rank(r)), None) if isinstance(ranks, list) else None
        if bad is not None:
            return f"distributedInfo.pg_config[{i}].ranks holds {str(bad)[:40]!r}, not a rank (an integer below 2^28 in magnitude)"
    return ""


def _rank(info: Any) -> int | None:
    """``distributedInfo.rank`` where it is an integer below :data:`MAX_RANK` in magnitude; else None."""
    r = info.get("rank") if isinstance(info, dict) else None
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not abs(r) < MAX_RANK or r != int(r):
        return None
    return int(r)


def _step_numbers(names: pd.Index) -> list[int]:
    """The step number of each name (``ProfilerStep#N``), -1 for any other name; once per distinct name."""
    return [int(m.group(1)) if (m := STEP_NAME.match(str(name))) is not None else -1 for name in names]


def _steps(host: pd.DataFrame) -> pd.DataFrame:
    step_no = [n if n < MAX_STEP else -1 for n in _step_numbers(host["name"].cat.categories)]
    nums = np.array([*step_no, -1], dtype=np.int64)[host["name"].cat.codes.to_numpy()]  # (the last: code -1)
    rows = np.flatnonzero(nums >= 0)
    # The same step may appear as cpu_op and user_annotation: keep the widest span.
    order = rows[np.argsort(nums[rows], kind="stable")]
    step = nums[order]
    if not (first := np.flatnonzero(np.r_[step.size > 0, step[1:] != step[:-1]])).size:  # (a trace without steps)
        return empty_frame(dict.fromkeys(("step", "start_ns", "end_ns"), np.int64))
    return pd.DataFrame({"step": step[first], "start_ns": np.minimum.reduceat(host["start_ns"].to_numpy(np.int64)[order], first),
                         "end_ns": np.maximum.reduceat(host["end_ns"].to_numpy(np.int64)[order], first)})
