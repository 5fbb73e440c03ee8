"""The loaded trace: :class:`Trace` and :func:`load_trace`.

``load_trace(path)`` reads what ``torch.profiler``'s ``export_chrome_trace`` and
``tensorboard_trace_handler`` write (``.json`` or gzipped ``.json.gz``; gzip is
detected from the file's magic bytes, not its name): :mod:`.files` reads the
bytes within a memory limit, :mod:`.decode` decodes them into columns, and
:mod:`.frames` turns the columns into DataFrames. Reading a trace never imports torch.

Timestamps: Kineto writes ``ts`` and ``dur`` in microseconds as decimal text,
often with three decimals; they are converted to int64 nanoseconds from that
text, exactly (:mod:`.timestamps`), ``1712195495505582.988`` µs giving
``1712195495505582988`` ns.
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
from .columns import CAT_CODE, DEVICE_CATEGORIES, HOST_CATEGORIES, MAX_DUR_US, MAX_TS_US
from .decode import Decoded, read_events
from .files import is_url
from .frames import KIND_NAMES, collective_args, device_frame, host_frame
from .splitter import HEAD_FIELDS

__all__ = ["DEVICE_CATEGORIES", "HOST_CATEGORIES", "MAX_DUR_US", "MAX_STREAMS", "MAX_TS_US", "Trace", "backend_of", "load_trace"]

_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
MAX_STEP = 2**62
"""Step numbers at or beyond this are not steps: their annotations are ignored, with a warning."""
MAX_RANK = 1 << 28
"""``distributedInfo.rank`` must be an integer below this in magnitude, else the trace has no rank (with a warning)."""
MAX_STREAMS = 65536
"""Most distinct (device, stream) pairs accepted in one trace."""


@dataclass(frozen=True)
class Trace:
    """One loaded trace.

    Attributes:
        path: the file read.
        device_events: one row per device activity (Kineto ``cat`` kernel,
            gpu_memcpy or gpu_memset; on MTIA ``mtia_ccp_events``: DMA requests
            as memcpy, stream events left out, the rest as kernels), sorted by
            ``start_ns``. Columns:

            - ``device`` (int64): GPU index, from ``args.device`` (else ``pid``).
            - ``stream`` (int64): CUDA stream id, from ``args.stream`` (else ``tid``).
            - ``kind`` (category): ``kernel``, ``memcpy`` or ``memset``.
            - ``name`` (category): kernel or copy name as Kineto wrote it.
            - ``start_ns``, ``end_ns`` (int64): [start, end) in ns.
            - ``bytes`` (int64): bytes moved or set; -1 where not given (kernels).
            - ``correlation`` (int64): CUPTI correlation id linking the event to the
              host runtime call that launched it; -1 where absent.
            - ``direction`` (category): memcpy direction from the name: HtoD, DtoH,
              DtoD, PtoP or HtoH; NaN for kernels and memsets.
            - ``src_kind``, ``dst_kind`` (category): memory kinds from the memcpy
              name (Pageable, Pinned, Device, ...); NaN where not a memcpy.
            - ``is_comm`` (bool): a communication kernel: a ``kernel`` whose name
              is one of the documented families of :mod:`.comm_kernels` (NCCL/RCCL,
              by HTA's convention; custom, quick, symmetric-memory, multimem
              all-reduce; ...), or that carries Kineto's ``Collective name`` arg.
              Every other kernel is compute.
        host_events: one row per host activity (``cpu_op``, ``cuda_runtime``,
            ``cuda_driver``, ``user_annotation``), sorted by ``start_ns``. Columns
            ``pid`` and ``tid`` (str: Kineto may write either numbers or labels),
            ``cat`` (category), ``name`` (category), ``start_ns``, ``end_ns``
            (int64 ns), ``correlation`` and ``external_id`` (int64, -1 if absent).
        devices: ``deviceProperties`` as a DataFrame (one row per GPU, Kineto's
            keys as columns: ``id``, ``name``, ``totalGlobalMem`` in bytes, ...);
            empty if the trace has none.
        metadata: other top-level fields (``distributedInfo``, ``schemaVersion``,
            ``cuda_runtime_version``, ``baseTimeNanoseconds``, ``traceName``, ...),
            plus ``event_count`` (length of ``traceEvents``) and ``warnings``
            (list of str: what the loader dropped, guessed or found odd).
        collective_args: one row per event whose args name a collective
            (Kineto's ``Collective name``: torch's ``record_param_comms`` host
            op, and the NCCL kernels of newer torch): ``side`` (``device`` or
            ``host``), ``name`` (str), ``start_ns`` (int64), ``collective``
            (str), ``in_nelems``, ``out_nelems``, ``group_size`` (int64, -1 if
            absent), ``dtype``, ``pg_name`` (str, ``""`` if absent; from
            ``Process Group Name``), ``correlation``, ``external_id`` (int64, -1
            if absent).
        backend: the device runtime, ``cuda``, ``hip`` (ROCm) or ``mtia``, read
            at load (:func:`backend_of`); devices are named ``<backend>:<id>``
            (:meth:`device_label`).
    Derived tables (``steps``) are cached properties computed from these
    fields, so a copy made with ``dataclasses.replace`` (as
    :func:`traceprobe.analysis.steps.clip_trace` does) derives its own.
    """

    path: str
    device_events: pd.DataFrame
    host_events: pd.DataFrame
    devices: pd.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    collective_args: pd.DataFrame = field(default_factory=pd.DataFrame)
    backend: str = "cuda"
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


def load_trace(path: str | Path, max_bytes: int | None = None) -> Trace:
    """Read a Kineto/Chrome trace file into a :class:`Trace`.

    Complete events (``ph: X``) and begin/end pairs (``ph: B``/``E``) of Kineto's
    device and host categories are kept; flows, counters, instants, metadata and
    memory events are ignored.

    Args:
        path: a ``.json`` or ``.json.gz`` file (or fsspec URL) written by ``torch.profiler``
            (``export_chrome_trace`` or ``tensorboard_trace_handler``, torch 1.13
            or later, CUDA or ROCm) or any Chrome trace whose device events
            follow Kineto's categories.
        max_bytes: largest decompressed size accepted (default: half the
            memory available, see :func:`.files.default_max_bytes`).

    Returns:
        the :class:`Trace`; see its docstring for columns and dtypes. What the
        loader dropped or found odd is listed in ``metadata["warnings"]``.

    Raises:
        TraceFormatError: whatever the cause (unreadable, not a regular file,
            too large, not JSON, truncated, corrupt gzip, nested too deep, not a
            Chrome trace, an empty ``traceEvents``, events whose ``ts``/``dur``
            are missing, non-numeric, negative or absurd, absurdly many streams).
    """
    p = path if is_url(path) else Path(path)
    try:
        return _build(p, read_events(p, max_bytes))
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
    n_streams = _pairs(device_events["device"].to_numpy(np.int64), device_events["stream"].to_numpy(np.int64))
    if n_streams > MAX_STREAMS:
        raise TraceFormatError(p, f"absurd trace: {n_streams:,} distinct (device, stream) pairs (limit {MAX_STREAMS:,})")
    if device_events.empty and host_events.empty:
        warnings.append("no device or host activity: only metadata, flows, counters or unknown categories")
    metadata = {k: getattr(dec.head, k) for k in HEAD_FIELDS if getattr(dec.head, k) is not None}
    metadata["event_count"] = dec.event_count
    metadata["warnings"] = warnings
    rank = (dec.head.distributedInfo or {}).get("rank") if isinstance(dec.head.distributedInfo, dict) else None
    if rank is not None and _rank(dec.head.distributedInfo) is None:
        warnings.append(f"distributedInfo.rank {str(rank)[:40]!r} is not a rank: ignored")
    names = host_events["name"].cat.categories
    steps = [m.group(1) for m in map(_STEP_RE.match, map(str, names)) if m is not None]  # once per distinct name
    if any(int(k) >= MAX_STEP for k in steps):
        warnings.append(f"ProfilerStep annotation(s) numbered beyond 2^62 ignored: {sum(int(k) >= MAX_STEP for k in steps)} name(s)")
    devices = pd.DataFrame(dec.head.deviceProperties or [])
    return Trace(
        path=str(p),
        device_events=device_events,
        host_events=host_events,
        devices=devices,
        metadata=metadata,
        collective_args=collective_args(dec),
        backend=backend_of(dec, devices),
    )


def _pairs(a: np.ndarray, b: np.ndarray) -> int:
    """Number of distinct ``(a[i], b[i])`` pairs."""
    if not len(a):
        return 0
    o = np.lexsort((b, a))
    a, b = a[o], b[o]
    return 1 + int(((a[1:] != a[:-1]) | (b[1:] != b[:-1])).sum())


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
    if "name" in devices and devices["name"].astype(str).str.contains(_AMD).any():
        return "hip"
    host = dec.tables["host"]  # (the decoded codes: no pandas needed)
    runtime = np.unique(host["name"][host["cat"] == CAT_CODE["cuda_runtime"]])
    if any(str(dec.names[i]).startswith("hip") for i in runtime.tolist()):  # once per distinct name
        return "hip"
    return "cuda"


def _rank(info: Any) -> int | None:
    """``distributedInfo.rank`` where it is an integer below :data:`MAX_RANK` in magnitude; else None."""
    r = info.get("rank") if isinstance(info, dict) else None
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not abs(r) < MAX_RANK or r != int(r):
        return None
    return int(r)


def _steps(host: pd.DataFrame) -> pd.DataFrame:
    names = host["name"].cat.categories
    step_no = np.full(len(names) + 1, -1, dtype=np.int64)  # per name code (the last: code -1); -1: not a step
    for i, name in enumerate(names):  # once per distinct name
        if (m := _STEP_RE.match(str(name))) is not None and int(m.group(1)) < MAX_STEP:
            step_no[i] = int(m.group(1))
    nums = step_no[host["name"].cat.codes.to_numpy()]
    rows = np.flatnonzero(nums >= 0)
    if not rows.size:
        return pd.DataFrame({"step": pd.Series([], dtype=np.int64), "start_ns": pd.Series([], dtype=np.int64), "end_ns": pd.Series([], dtype=np.int64)})
    # The same step may appear as cpu_op and user_annotation: keep the widest span.
    order = rows[np.argsort(nums[rows], kind="stable")]
    step = nums[order]
    first = np.flatnonzero(np.r_[True, step[1:] != step[:-1]])
    return pd.DataFrame({
        "step": step[first],
        "start_ns": np.minimum.reduceat(host["start_ns"].to_numpy(np.int64)[order], first),
        "end_ns": np.maximum.reduceat(host["end_ns"].to_numpy(np.int64)[order], first),
    })
