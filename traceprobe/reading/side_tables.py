"""Tables beside a trace's events: its Python stack frames, CUDA synchronization events, CUPTI's overhead records, collective
args and host ops' recorded args, as DataFrames.

Both are kept apart from the host ops (:attr:`.trace.Trace.host_events`), whose analyses they would disturb: a frame
is no op, and a sync event repeats what its runtime call did, with what it waited for.

:func:`empty_frame` gives the empty table of given columns that these and the analysis' figures return for a trace
without such events, built once per column set.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .columns import COLLECTIVE_ARGS, NO_ID
from .decode import Decoded

_EMPTY: dict[tuple[tuple[str, Any], ...], pd.DataFrame] = {}


def empty_frame(columns: dict[str, Any]) -> pd.DataFrame:
    """An empty DataFrame of ``columns`` (name -> dtype, in that order; a RangeIndex): what
    ``pd.DataFrame({c: pd.Series([], dtype=t) for c, t in columns.items()})`` gives, built once per column set and
    copied after (about 10 µs against 0.1-0.5 ms a build: empty tables are common on small traces).

    Raises:
        TypeError: a dtype pandas does not know.
    """
    key = tuple(columns.items())
    frame = _EMPTY.get(key)
    if frame is None:
        frame = _EMPTY[key] = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in columns.items()})
    return frame.copy()


def categorical(codes: np.ndarray, labels: list[Any]) -> pd.Categorical:
    """``pd.Categorical`` of ``labels[codes]`` (made str), each distinct label converted once."""
    present = np.flatnonzero(np.bincount(codes, minlength=len(labels)))
    used = np.array([v if isinstance(v, str) else str(v) for v in np.asarray(labels, dtype=object)[present]], dtype=object)
    cats, inverse = np.unique(used, return_inverse=True) if used.size else (used, np.zeros(0, np.intp))
    lut = np.full(len(labels), -1, dtype=np.int64)
    lut[present] = inverse
    return pd.Categorical.from_codes(lut[codes], categories=pd.Index(cats, dtype=object))


def no_python_events() -> pd.DataFrame:
    """``Trace.python_events`` of a trace without stacks: its columns, no rows."""
    return empty_frame({"tid": "category", "name": "category", "start_ns": np.int64, "end_ns": np.int64})


def python_frame(dec: Decoded) -> pd.DataFrame:
    """``Trace.python_events`` (columns in its docstring)."""
    c = dec.tables.get("python")
    if c is None or not len(c["ts"]):
        return no_python_events()
    order = np.argsort(c["ts"], kind="stable")
    return pd.DataFrame({"tid": categorical(c["tid"][order], dec.threads), "name": categorical(c["name"][order], dec.names),
                         "start_ns": c["ts"][order], "end_ns": c["end"][order]})


def no_overhead_events() -> pd.DataFrame:
    """``Trace.overhead_events`` of a trace without them: its columns, no rows."""
    return empty_frame({"name": "category", "start_ns": np.int64, "end_ns": np.int64})


def overhead_frame(dec: Decoded) -> pd.DataFrame:
    """``Trace.overhead_events`` (columns in its docstring)."""
    c = dec.tables.get("overhead")
    if c is None or not len(c["ts"]):
        return no_overhead_events()
    o = np.argsort(c["ts"], kind="stable")
    return pd.DataFrame({"name": categorical(c["name"][o], dec.names), "start_ns": c["ts"][o], "end_ns": c["end"][o]})


SYNC_COLUMNS = ("device", "stream", "correlation", "wait_correlation", "wait_stream")


def no_sync_events() -> pd.DataFrame:
    """``Trace.sync_events`` of a trace without them: its columns, no rows."""
    return empty_frame({"kind": "category", "start_ns": np.int64, "end_ns": np.int64, **dict.fromkeys(SYNC_COLUMNS, np.int64)})


def sync_frame(dec: Decoded) -> pd.DataFrame:
    """``Trace.sync_events`` (columns in its docstring)."""
    c = dec.tables.get("sync")
    if c is None or not len(c["ts"]):
        return no_sync_events()
    o = np.argsort(c["ts"], kind="stable")
    return pd.DataFrame({"kind": categorical(c["name"][o], dec.names), "start_ns": c["ts"][o], "end_ns": c["end"][o],
                         **{k: np.where(c[k] == NO_ID, -1, c[k])[o] for k in SYNC_COLUMNS}})


def op_args_frame(values: list[tuple[bytes, ...]]) -> pd.DataFrame:
    """``Trace.op_args``: the distinct recorded args of host ops (a trace recorded with ``record_shapes=True`` or
    ``with_flops=True``), one row per tuple of :attr:`.decode.Decoded.op_args`, indexed by ``host_events["args"]``:
    ``dims``, ``types``, ``strides``, ``concrete`` (str: the JSON text of Kineto's ``Input Dims``, ``Input type``,
    ``Input Strides``, ``Concrete Inputs``; ``""`` where absent) and ``flops`` (int64: Kineto's ``flops``, -1 where
    absent). No rows (those columns) for a trace without them."""
    if not values:
        return empty_frame({"dims": object, "types": object, "strides": object, "concrete": object, "flops": np.int64})
    cols = list(zip(*values))
    text = {k: np.array([v.decode("utf-8", "replace") for v in col], dtype=object)
            for k, col in zip(("dims", "types", "strides", "concrete"), cols[:4])}
    flops = np.array([int(v) if v.strip().isdigit() else -1 for v in cols[4]], dtype=np.int64)
    return pd.DataFrame({**text, "flops": flops})


def collective_args(dec: Decoded) -> pd.DataFrame:
    """``Trace.collective_args`` (columns in its docstring): device rows, then host rows, each in the order of their
    table's columns."""
    rows = {side: np.flatnonzero(dec.tables[side]["comm"] >= 0) for side in ("device", "host")}
    if not any(r.size for r in rows.values()):
        return empty_frame({"side": object, "name": object, "start_ns": np.int64, **{a: dec.collectives[a].dtype for a in COLLECTIVE_ARGS}})

    def pick(col: str) -> np.ndarray:
        return np.concatenate([dec.tables[side][col][r] for side, r in rows.items()])

    names, k = np.array(dec.names, dtype=object)[pick("name")], pick("comm")
    return pd.DataFrame({  # (one DataFrame, not one per side and a concat)
        "side": np.concatenate([np.full(r.size, side, dtype=object) for side, r in rows.items()]),
        "name": np.array([v if isinstance(v, str) else str(v) for v in names], dtype=object),
        "start_ns": pick("ts"),
        **{a: dec.collectives[a][k] for a in COLLECTIVE_ARGS},
    })
