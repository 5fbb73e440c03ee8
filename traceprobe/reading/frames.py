"""The decoded columns as the DataFrames of a :class:`~.trace.Trace`: device events, host events, collective args.

Each function takes :class:`.decode.Decoded` columns and returns one table, its rows
sorted by start; names and labels are converted once per distinct value, never
once per event.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from .columns import COLLECTIVE_ARGS, DMA_DIRECTIONS, KINDS, NO_ID
from .comm_kernels import COMM_KERNEL_RE
from .decode import Decoded

_MEMCPY_RE = re.compile(r"^Memcpy\s+(?P<direction>\w+)\s*\((?P<src>\w+)\s*->\s*(?P<dst>\w+)\)")
# ROCm (roctracer) names copies CopyHostToDevice, CopyDeviceToHost, CopyDeviceToDevice
_ROCM_COPY_RE = re.compile(r"^Copy(?P<src>Host|Device)To(?P<dst>Host|Device)")
_ID_RE = re.compile(r"^\s*(-?\d+)\s*$|(?<![-\d])(\d+)\s*$")

KIND_NAMES = ("kernel", "memcpy", "memset")
"""Device event kinds, by code."""
MAX_DEVICE = 1 << 24
"""Device ids at or beyond this (in magnitude) are not device indices: their events are dropped, with a warning
(exports give each device a 32-bit process id above 2^24)."""


def collective_args(dec: Decoded) -> pd.DataFrame:
    """``Trace.collective_args`` (columns in its docstring): device rows, then host rows, each in the order of their
    table's columns."""
    names = np.array(dec.names, dtype=object)
    side, name, start, k = [], [], [], []
    for which in ("device", "host"):
        c = dec.tables[which]
        rows = np.flatnonzero(c["comm"] >= 0)
        side.append(np.full(rows.size, which, dtype=object))
        name.append(names[c["name"][rows]])
        start.append(c["ts"][rows])
        k.append(c["comm"][rows])
    rows_k = np.concatenate(k)
    return pd.DataFrame({  # (one DataFrame, not one per side and a concat)
        "side": np.concatenate(side),
        "name": np.array([v if isinstance(v, str) else str(v) for v in np.concatenate(name)], dtype=object),
        "start_ns": np.concatenate(start),
        **{a: dec.collectives[a][rows_k] for a in COLLECTIVE_ARGS},
    })


def _categorical(codes: np.ndarray, labels: list[Any], categories: list[str] | None = None) -> pd.Categorical:
    """``pd.Categorical`` of ``labels[codes]`` (made str), each distinct label converted once."""
    if categories is not None:
        return pd.Categorical.from_codes(codes, categories=categories)
    present = np.flatnonzero(np.bincount(codes, minlength=len(labels)))
    used = np.array([v if isinstance(v, str) else str(v) for v in np.asarray(labels, dtype=object)[present]], dtype=object)
    cats, inverse = np.unique(used, return_inverse=True) if used.size else (used, np.zeros(0, np.intp))
    lut = np.full(len(labels), -1, dtype=np.int64)
    lut[present] = inverse
    return pd.Categorical.from_codes(lut[codes], categories=pd.Index(cats, dtype=object))


def _thread_ids(threads: list[Any]) -> np.ndarray:
    """Device or stream id from each distinct ``pid``/``tid`` value: numbers as they are,
    labels such as ``"stream 7"`` (torch 1.8-1.10) by their trailing number; -1 if none."""
    out = np.full(len(threads), -1, dtype=np.int64)
    for i, v in enumerate(threads):  # once per distinct value
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)) and abs(v) < 2**62:
            out[i] = int(v)
        elif isinstance(v, str) and (m := _ID_RE.search(v)):
            out[i] = int(m.group(1) or m.group(2))
    return out


def _mtia_kind(name: Any) -> int:
    """Kind code of an MTIA ``mtia_ccp_events`` event by name: DMA requests are copies, stream
    events (``event_record``, ``event_wait``) are not work (-1), everything else runs on the device."""
    name = str(name)
    return 1 if name == "dma_request" else -1 if name.startswith("event_") else 0


def _device_kinds(dec: Decoded) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The device table (MTIA stream events dropped) and its kind codes (0 kernel, 1 memcpy, 2 memset)."""
    c = dec.tables["device"]
    kind = c["cat"].astype(np.int64) - 1
    mtia = np.flatnonzero(kind == len(KIND_NAMES))
    if mtia.size:
        codes = np.unique(c["name"][mtia])
        lut = np.zeros(len(dec.names), dtype=np.int64)
        lut[codes] = [_mtia_kind(dec.names[i]) for i in codes.tolist()]  # once per distinct name
        kind[mtia] = lut[c["name"][mtia]]
        keep = kind >= 0
        c, kind = {k: v[keep] for k, v in c.items()}, kind[keep]
    return c, kind


def _copy_parts(name: str) -> tuple[str | None, str | None, str | None]:
    """(direction, source kind, destination kind) of a memcpy name, CUDA's ``Memcpy HtoD (Pageable ->
    Device)`` or ROCm's ``CopyHostToDevice`` (direction ``HtoD``); Nones for any other name."""
    if (m := _MEMCPY_RE.search(name)) is not None:
        return m.group("direction"), m.group("src"), m.group("dst")
    if (m := _ROCM_COPY_RE.search(name)) is not None:
        return m.group("src")[0] + "to" + m.group("dst")[0], m.group("src"), m.group("dst")
    return None, None, None


def device_frame(dec: Decoded, warnings: list[str]) -> pd.DataFrame:
    """``Trace.device_events`` (columns in its docstring); what was dropped or odd is added to ``warnings``."""
    c, kind = _device_kinds(dec)
    ids = _thread_ids(dec.threads)
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
    kind, name = kind[order], _categorical(c["name"][order], dec.names)
    cols: dict[str, Any] = {
        "device": device[order],
        "stream": stream[order],
        "kind": _categorical(kind, [], list(KIND_NAMES)),
        "name": name,
        "start_ns": c["ts"][order],
        "end_ns": c["end"][order],
        "bytes": np.where(c["bytes"] == NO_ID, -1, c["bytes"])[order],
        "correlation": np.where(c["correlation"] == NO_ID, -1, c["correlation"])[order],
    }
    # Parse memcpy names once per distinct name, then map through the categories.
    names = [str(n) for n in name.categories]
    parsed = [_copy_parts(n) for n in names]
    codes = np.asarray(name.codes)
    is_copy = kind == KIND_NAMES.index("memcpy")
    for k, col in enumerate(("direction", "src", "dst")):
        # per distinct name, then through the name codes: no object array per event
        per_name = np.array([p[k] for p in parsed], dtype=object)
        present = np.flatnonzero([p[k] is not None for p in parsed]).astype(np.intp)
        cats, inverse = np.unique(per_name[present].astype(str), return_inverse=True) if present.size else (np.empty(0, object), present)
        lut = np.full(len(per_name) + 1, -1, dtype=np.int64)  # (the last entry: codes of -1)
        lut[present] = inverse
        out = "direction" if col == "direction" else f"{col}_kind"
        cols[out] = pd.Categorical.from_codes(np.where(is_copy, lut[codes], -1), categories=pd.Index(cats.astype(object)) if cats.size else pd.Index([], dtype=object))
    dma = c["dma"][order]
    if (is_copy & (dma > 0) & (np.asarray(cols["direction"].codes) < 0)).any():  # MTIA's dma_request: direction from its args
        named = np.asarray(cols["direction"]).astype(object)
        use = is_copy & (dma > 0) & pd.isna(named)
        named[use] = np.array(DMA_DIRECTIONS, dtype=object)[dma[use]]
        cols["direction"] = pd.Categorical(named)
    # communication: a kernel of a documented family (.comm_kernels), or one Kineto wrote a 'Collective name' on
    comm_names = np.array([COMM_KERNEL_RE.search(n) is not None for n in names], dtype=bool)
    named = comm_names[codes] if len(names) else np.zeros(0, bool)
    cols["is_comm"] = (kind == KIND_NAMES.index("kernel")) & (named | (c["comm"][order] >= 0))
    return pd.DataFrame(cols)




def host_frame(dec: Decoded) -> pd.DataFrame:
    """``Trace.host_events`` (columns in its docstring)."""
    c = dec.tables["host"]
    order = np.argsort(c["ts"], kind="stable")  # rows by start: every column taken in this order once
    return pd.DataFrame(
        {
            "pid": _categorical(c["pid"][order], dec.threads),
            "tid": _categorical(c["tid"][order], dec.threads),
            "cat": _categorical(c["cat"].astype(np.int64)[order], list(KINDS)),
            "name": _categorical(c["name"][order], dec.names),
            "start_ns": c["ts"][order],
            "end_ns": c["end"][order],
            "correlation": np.where(c["correlation"] == NO_ID, -1, c["correlation"])[order],
            "external_id": np.where(c["external_id"] == NO_ID, -1, c["external_id"])[order],
        }
    )
