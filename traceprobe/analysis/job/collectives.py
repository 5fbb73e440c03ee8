"""Collectives across ranks: matching, arrival skew, wait, stragglers and bandwidth.

Two steps, so that the work can be spread over machines: :func:`collective_table`
turns one trace into a small table of its collective kernels (no ``Trace`` is
needed after it), and :func:`match_window` matches the tables of the ranks of
one profiler window.

Definitions (quoted by docs/measures.md; NCCL's ``doc/PERFORMANCE.md`` and TraceLens's
NCCL analyser are the anchors):

- *collective kernel*: a communication kernel (launched by a communication op, or of NCCL/RCCL, DeepEP, ...:
  :func:`.busy.comm_mask`).
  Its type, message size, dtype and process group come from Kineto's args
  (``Collective name``, ``In msg nelems``/``Out msg nelems``, ``dtype``,
  ``Group size``, ``Process Group Name``) on the kernel, else on the host op
  (``record_param_comms``) whose ``External id`` its launch carries; the type
  else from the c10d/NCCL host op around its launch (``nccl:all_to_all``: NCCL runs
  all-to-all as ``SendRecv`` kernels), else from the kernel name, as the dtype
  (process group unknown); :mod:`.comm_types` reads the type.
- *matching*: within each process group, the k-th collective kernel of every
  member rank (by start time) is one collective. A group's members are the ranks
  ``distributedInfo.pg_config`` lists for it (so a 2-D mesh's tensor-parallel and
  data-parallel groups are each matched among their own ranks), else, where
  Kineto's ``Group size`` is smaller than the window, the ranks that ran it, else
  every rank of the window; groups of other members that share a name
  (``split_group``) are told apart by their members. Only kernels launched inside the trace
  take part (the ones launched before it are in flight from an unrecorded step),
  unless the trace holds no launch at all (device activity only).
  When the ranks of a group hold different counts, or the k-th kernels disagree
  on type, the group is reported as mismatched and not matched at all.
- per collective: each rank's ``start_ns``, ``end_ns``, duration; *arrival skew*
  = latest start - earliest start; each rank's *wait* = its kernel time before
  the last rank arrived, min(end, latest start) - start; the *last rank* is the
  one whose kernel started last.
- *message size* S (bytes) = max(in, out) elements x dtype size: the whole
  buffer for all-reduce and broadcast, the gathered output of all-gather, the
  scattered input of reduce-scatter, as nccl-tests count it.
- *time* t = latest end - latest start: the collective once every rank was in
  (the skew is reported apart).
- *algorithm bandwidth* = S / t; *bus bandwidth* = algbw x factor, with NCCL's
  factors for n ranks: all-reduce 2(n-1)/n; all-gather, reduce-scatter and
  all-to-all (n-1)/n; broadcast and reduce 1. In GB/s (1e9 bytes per second).
- per window: *wait per rank* (total); the *straggler* is the rank the others
  waited for most: each collective charges the other ranks' waits to its last
  rank, and the straggler is the rank charged most.
- per type: collectives, bytes, summed t, busbw = sum(S x factor) / sum(t), the
  best single busbw seen, and their ratio.

Clocks: matching compares timestamps of different processes, so they must share
a clock (ranks on one host, or hosts with synchronized clocks). A collective in
which every rank sends and receives (all-reduce, all-gather, reduce-scatter,
all-to-all) cannot end on one rank before it starts on another; such
collectives are counted as *implausible* and the largest gap is reported: the
clocks disagree by at least that much.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...reading import Trace
from ...reading.trace import is_rank
from ..causal.contention import last_arrivals, wait_spans
from ..device.busy import comm_mask, per_value
from ..host.launch_links import launch_rows
from ..memo import device_column, empty_frame
from .comm_types import arg_rows, comm_types
from .p2p import kernel_transfers, pair_rows
from .process_groups import matched_groups, member_codes, shared_names

CLOCK_ASSUMPTION = "ranks share a clock (one host, or hosts with synchronized clocks)"
"""What matching across ranks assumes of the traces' timestamps."""

TABLE_COLUMNS = ["rank", "device", "stream", "pg", "pg_desc", "collective", "name", "start_ns", "end_ns", "bytes", "dtype", "group_size",
                 "pg_ranks", "p2p"]


BUSBW_FACTOR = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}
"""NCCL's bus bandwidth factors (``doc/PERFORMANCE.md`` of nccl-tests) by collective type, for n ranks."""

_ALL_TO_ALL_TYPES = ("allreduce", "allgather", "reducescatter", "alltoall")

DTYPE_BYTES = {
    "float": 4, "float32": 4, "f32": 4, "half": 2, "float16": 2, "f16": 2, "bfloat16": 2, "bf16": 2,
    "double": 8, "float64": 8, "f64": 8, "int": 4, "int32": 4, "i32": 4, "long": 8, "int64": 8, "i64": 8,
    "byte": 1, "uint8": 1, "u8": 1, "char": 1, "int8": 1, "i8": 1, "bool": 1, "u32": 4, "u64": 8,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "f8e4m3": 1, "f8e5m2": 1,
}
"""Bytes per element of Kineto's ``dtype`` names and NCCL kernel-name dtypes (lower case)."""

_NAME_DTYPE_RE = re.compile(r"_(f32|f16|bf16|f64|i32|i64|u8|i8|u32|u64|f8e4m3|f8e5m2)(?:_|\()")


def _name_dtype(name: Any) -> str:
    """The dtype an NCCL kernel's name carries (``_f32_``, ``_bf16(``...), ``""`` if none."""
    m = _NAME_DTYPE_RE.search(str(name))
    return m.group(1) if m else ""


_EMPTY_DTYPES = {"rank": "Int64", "pg": object, "pg_desc": object, "collective": object, "name": object, "dtype": object,
                 "pg_ranks": object, "p2p": object}


def _empty_table() -> pd.DataFrame:
    """The collective table of a trace without collectives (:func:`collective_table`'s columns and dtypes)."""
    return empty_frame({c: _EMPTY_DTYPES.get(c, np.int64) for c in TABLE_COLUMNS})


def collective_table(trace: Trace) -> pd.DataFrame:
    """The collective kernels of one trace that were launched inside it (module docstring).

    Returns:
        DataFrame sorted by ``start_ns``: ``rank`` (Int64), ``device``,
        ``stream`` (int64), ``pg`` (str, process group name; ``""`` unknown),
        ``collective`` (str, :func:`.comm_types.comm_types`), ``name`` (str, kernel),
        ``start_ns``, ``end_ns`` (int64 ns), ``bytes`` (int64 message size S,
        -1 unknown), ``dtype`` (str), ``group_size`` (int64, -1 unknown); ``p2p`` (str: a point-to-point kernel's
        transfers, ``send:3;recv:1``, :func:`.p2p.kernel_transfers`; ``""`` for a collective);
        ``pg_desc`` (str, the group's description from ``distributedInfo.pg_config``,
        e.g. ``default_pg``, ``""`` unknown); ``pg_ranks`` (str, the group's member ranks
        from ``pg_config``'s ``ranks``, comma-separated and increasing, ``""`` unknown).
    """
    ev = trace.device_events
    m = comm_mask(trace) if not ev.empty else np.zeros(0, bool)
    rows = launch_rows(trace)
    if (rows >= 0).any():  # a trace without any launch (device activity only) keeps every collective kernel
        m = m & (rows >= 0)
    if not m.any():
        return _empty_table()
    sel = np.flatnonzero(m)
    sel = sel[np.argsort(device_column(trace, "start_ns")[sel], kind="stable")]  # rows in start order: sorted once, here
    n = sel.size
    names = per_value(ev["name"], str, "nan")[sel]
    a = trace.collective_args
    pos = arg_rows(trace)[sel]
    found = pos >= 0

    def arg(col: str, fill: object) -> np.ndarray:
        vals = np.full(n, fill, dtype=object)
        if found.any():
            vals[found] = a[col].to_numpy(dtype=object)[pos[found]]
        return vals

    dtype, pg = arg("dtype", ""), arg("pg_name", "")
    nelems = np.maximum(arg("in_nelems", -1), arg("out_nelems", -1)).astype(np.int64)
    ctype = comm_types(trace)[sel]  # (the arg, else the c10d/NCCL host op around the launch, else the name)
    name_dtype = per_value(names, _name_dtype)
    dtype = np.where(dtype != "", dtype, name_dtype)
    size = per_value(dtype, lambda d: DTYPE_BYTES.get(str(d).lower(), -1)).astype(np.int64)
    nbytes = np.where((nelems >= 0) & (size > 0), nelems * size, -1)
    descs, members = _pg_descriptions(trace), _pg_members(trace)
    transfers, p2p_pg = kernel_transfers(trace, sel, {k: [int(r) for r in v.split(",")] for k, v in members.items()})
    out = pd.DataFrame(
        {
            "rank": pd.array([trace.rank] * n, dtype="Int64"),
            "device": device_column(trace, "device")[sel],
            "stream": device_column(trace, "stream")[sel],
            "pg": pg.astype(str),
            "pg_desc": np.array([descs.get(str(x), "") for x in pg.tolist()], dtype=object),
            "collective": ctype,
            "name": names,
            "start_ns": device_column(trace, "start_ns")[sel],
            "end_ns": device_column(trace, "end_ns")[sel],
            "bytes": nbytes.astype(np.int64),
            "dtype": dtype.astype(str),
            "group_size": arg("group_size", -1).astype(np.int64),
            "pg_ranks": np.array([members.get(str(x), "") for x in pg.tolist()], dtype=object),
            "p2p": transfers,
        }
    )
    p2p = transfers != ""
    if p2p.any():  # (a point-to-point kernel's group is its transfers' group; its type, what it ran)
        out.loc[p2p, "pg"] = p2p_pg[p2p]
        out.loc[p2p, "pg_desc"] = [descs.get(str(x), "") for x in p2p_pg[p2p].tolist()]
        out.loc[p2p, "pg_ranks"] = [members.get(str(x), "") for x in p2p_pg[p2p].tolist()]
        t = pd.Series(transfers[p2p], dtype=object)  # (a kernel running both a send and a receive is a sendrecv)
        out.loc[p2p, "collective"] = np.where(t.str.contains("send:", regex=False) & t.str.contains("recv:", regex=False),
                                              "sendrecv", t.str.split(":", n=1).str[0].to_numpy(dtype=object))
    return out


def _pg_members(trace: Trace) -> dict[str, str]:
    """``{pg_name: "r0,r1,..."}``: each group's member ranks from ``distributedInfo.pg_config`` (Kineto), increasing."""
    cfg = _pg_config(trace)
    out: dict[str, str] = {}
    for c in cfg:
        ranks = c.get("ranks")
        if "pg_name" in c and isinstance(ranks, list) and ranks and all(map(is_rank, ranks)):
            out[str(c["pg_name"])] = ",".join(map(str, sorted(set(ranks))))
    return out


def _pg_config(trace: Trace) -> list[dict]:
    """The entries of ``distributedInfo.pg_config`` that are objects (a trace loaded by :func:`~traceprobe.reading.load_trace`
    holds no other: :func:`~traceprobe.reading.trace.checked_distributed_info`); [] where there is no such list."""
    info = trace.metadata.get("distributedInfo")
    cfg = info.get("pg_config") if isinstance(info, dict) else None
    return [c for c in cfg if isinstance(c, dict)] if isinstance(cfg, list) else []


def _pg_descriptions(trace: Trace) -> dict[str, str]:
    """``{pg_name: pg_desc}`` from ``distributedInfo.pg_config`` (Kineto), empty where absent."""
    return {str(c.get("pg_name")): str(c.get("pg_desc", "")) for c in _pg_config(trace) if "pg_name" in c}


@dataclass(frozen=True)
class WindowCollectives:
    """Collectives of one window of a run, matched across its ranks (module docstring).

    Attributes:
        run, window: labels of the run and window.
        ranks: the ranks with a table, sorted.
        matched: collectives matched across every rank.
        mismatched: one line per process group whose counts or types differ.
        straggler_rank: the rank the others waited for most (None without a
            matched collective or without any wait).
        wait_ns: total wait per rank (int ns).
        by_type: per ``collective`` type: ``collective`` (str), ``count``,
            ``bytes`` (total), ``time_ns``, ``mean_skew_ns`` (int64),
            ``busbw_gbps``, ``best_busbw_gbps``, ``vs_best`` (float64; NaN where
            sizes are unknown).
        by_size: the same per type and message size (``bytes`` is the size of one).
        matches: one row per matched collective: ``pg``, ``seq``, ``collective``,
            ``bytes``, ``ranks``, ``skew_ns``, ``last_rank``, ``time_ns`` (int64),
            ``algbw_gbps``, ``busbw_gbps`` (float64).
        per_rank: one row per matched collective and rank: ``pg``, ``seq``,
            ``rank``, ``start_ns``, ``end_ns``, ``duration_ns``, ``wait_ns`` (int64),
            ``collective``, ``pg_desc`` (str).
        implausible: matched collectives that end on one rank before they start
            on another (all-to-all kinds only); ``max_offset_ns`` the largest gap.
        p2p: the point-to-point transfers paired (:func:`.p2p.pair_rows`): ``pg`` (``<group>:<src>-><dst>``),
            ``seq``, ``rank``, ``start_ns``, ``end_ns``; not in ``matched``, the waits or the straggler.
    """

    run: str
    window: str
    ranks: tuple[int, ...]
    matched: int
    mismatched: tuple[str, ...]
    straggler_rank: int | None
    wait_ns: dict[int, int]
    by_type: pd.DataFrame
    matches: pd.DataFrame
    per_rank: pd.DataFrame
    by_size: pd.DataFrame = field(default_factory=pd.DataFrame)
    implausible: int = 0
    max_offset_ns: int = 0
    p2p: pd.DataFrame = field(default_factory=pd.DataFrame)

    clock: str = CLOCK_ASSUMPTION


def _busbw_factor(kind: np.ndarray, n: np.ndarray) -> np.ndarray:
    out = np.full(kind.size, np.nan)
    for k, f in BUSBW_FACTOR.items():
        sel = kind == k
        if sel.any():
            out[sel] = [f(int(x)) if x > 0 else np.nan for x in n[sel]]
    return out


def _by_type(per: pd.DataFrame, sized: np.ndarray, by_size: bool = False) -> pd.DataFrame:
    """Per collective type (and message size): count, bytes, time, skew, busbw over sized collectives, best busbw, ratio."""
    kinds = per["collective"].to_numpy(dtype=object)
    sizes = per["bytes"].to_numpy(np.int64)
    t = per["time_ns"].to_numpy(np.int64)
    skew = per["skew_ns"].to_numpy(np.int64)
    bus_bytes = per["_bus_bytes"].to_numpy(np.float64)
    busbw_each = per["busbw_gbps"].to_numpy(np.float64)
    keys = sorted(set(zip(kinds.tolist(), sizes.tolist() if by_size else [0] * len(sizes))))
    rows = []
    for kind, size in keys:
        sel = (kinds == kind) & ((sizes == size) if by_size else True)
        ok = sel & sized
        sized_t = int(t[ok].sum())
        busbw = float(bus_bytes[ok].sum()) / sized_t if sized_t > 0 else float("nan")
        best = float(np.nanmax(busbw_each[ok])) if np.isfinite(busbw_each[ok]).any() else float("nan")  # (no all-NaN nanmax)
        row = {"collective": kind, "count": int(sel.sum()), "bytes": int(sizes[sel][sizes[sel] > 0].sum()),
               "time_ns": int(t[sel].sum()), "mean_skew_ns": int(skew[sel].sum() // max(int(sel.sum()), 1)),
               "busbw_gbps": busbw, "best_busbw_gbps": best, "vs_best": busbw / best if ok.any() and best > 0 else float("nan")}  # (0: a factor of 0, one rank)
        if by_size:
            row["bytes"] = int(size)
        rows.append(row)
    return pd.DataFrame(rows, columns=["collective", "count", "bytes", "time_ns", "mean_skew_ns", "busbw_gbps", "best_busbw_gbps", "vs_best"])


def match_window(tables: dict[int, pd.DataFrame], run: str = "", window: str = "") -> WindowCollectives:
    """Match the collective tables of one window's ranks (module docstring).

    Args:
        tables: ``{rank: collective_table(trace)}`` for the ranks of one window.
        run, window: labels carried into the result.

    Returns:
        a :class:`WindowCollectives`.
    """
    frames = [t.assign(rank=r) for r, t in sorted(tables.items()) if not t.empty]
    return match_rows(pd.concat(frames, ignore_index=True) if frames else _empty_table(), tuple(sorted(tables)), run, window)


def match_rows(allk: pd.DataFrame, ranks: tuple[int, ...], run: str = "", window: str = "") -> WindowCollectives:
    """:func:`match_window` of the ranks' collective tables concatenated: ``allk`` holds them in increasing rank order,
    each in its own order, with a ``rank`` column (int64); ``ranks`` (increasing) names every rank of the window,
    those without collectives too."""
    mismatched: list[str] = []
    pairs: pd.DataFrame = pd.DataFrame()
    if "p2p" in allk.columns:  # point-to-point kernels are paired, not matched as collectives (.p2p)
        is_p2p = allk["p2p"].fillna("").astype(str).to_numpy(dtype=object) != ""
        if is_p2p.any():
            pairs, unpaired = pair_rows(allk.loc[is_p2p])
            mismatched += unpaired
            allk = allk.loc[~is_p2p]
    if "pg_ranks" not in allk.columns:
        allk = allk.assign(pg_ranks="")
    size = allk["group_size"].to_numpy(np.int64) if "group_size" in allk.columns else np.full(len(allk), -1, np.int64)
    codes, members_by = member_codes(allk["pg_ranks"])
    k, unmatched = matched_groups(allk.assign(_size=size, _members=codes), ranks, members_by)
    mismatched += unmatched
    if len(ranks) < 2 or k.empty:
        empty = pd.DataFrame()
        return WindowCollectives(run, window, ranks, 0, tuple(mismatched), None, dict.fromkeys(ranks, 0), empty, empty, empty,
                                 p2p=pairs if len(ranks) >= 2 else empty)
    shared = k["pg"].isin(shared_names(k)).to_numpy()
    if shared.any():
        k.loc[shared, "pg"] = k.loc[shared, "pg"] + "[" + k.loc[shared, "pg_ranks"] + "]"
    key = ["pg", "seq"]
    grp = k.groupby(key, sort=True)
    start, end = k["start_ns"].to_numpy(np.int64), k["end_ns"].to_numpy(np.int64)
    k["duration_ns"] = end - start
    # each member's wait for the last arrival: the definition the dependency graph's crossings and the replay read
    # (.contention.wait_spans); members listed in reverse, so that of equal starts the first row is the last arrival
    gid = k.groupby(key, sort=False, dropna=False).ngroup().to_numpy(np.int64)  # (by first row: a MultiIndex's codes, no tuples)
    rev = np.arange(len(k), dtype=np.int64)[::-1]
    op, lo, hi, _ = wait_spans(start, end, k["rank"].to_numpy(np.int64), rev, gid[rev])
    wait = np.zeros(len(k), np.int64)
    wait[op] = np.maximum(hi - lo, 0)
    k["wait_ns"] = wait
    last_op = last_arrivals(start, rev, gid[rev])
    per = grp.agg(collective=("collective", "first"), bytes=("bytes", "max"), ranks=("rank", "size"),
                  first_start=("start_ns", "min"), last_start=("start_ns", "max"), first_end=("end_ns", "min"),
                  last_end=("end_ns", "max"), wait=("wait_ns", "sum")).reset_index()
    last_rank = k.iloc[last_op][["pg", "seq", "rank"]].rename(columns={"rank": "last_rank"})
    per = per.merge(last_rank, on=key)
    per["skew_ns"] = per["last_start"] - per["first_start"]
    per["time_ns"] = per["last_end"] - per["last_start"]
    sized = (per["bytes"] > 0) & (per["time_ns"] > 0)
    algbw = np.where(sized, per["bytes"] / per["time_ns"].clip(lower=1), np.nan)  # bytes/ns = GB/s
    factor = _busbw_factor(per["collective"].to_numpy(dtype=object), per["ranks"].to_numpy(np.int64))
    per["algbw_gbps"] = algbw
    per["busbw_gbps"] = algbw * factor
    per["_bus_bytes"] = np.where(sized, per["bytes"] * factor, np.nan)
    rank_pos = np.searchsorted(np.array(ranks, dtype=np.int64), k["rank"].to_numpy(np.int64))
    wait = np.bincount(rank_pos, weights=k["wait_ns"].to_numpy(np.float64), minlength=len(ranks)).astype(np.int64)
    last_pos = np.searchsorted(np.array(ranks, dtype=np.int64), per["last_rank"].to_numpy(np.int64))
    charged = np.bincount(last_pos, weights=per["wait"].to_numpy(np.float64), minlength=len(ranks))
    straggler = int(ranks[int(np.argmax(charged))]) if charged.max(initial=0) > 0 else None
    a2a = per["collective"].isin(_ALL_TO_ALL_TYPES).to_numpy()
    gap = np.where(a2a, per["last_start"].to_numpy(np.int64) - per["first_end"].to_numpy(np.int64), 0)
    implausible = int((gap > 0).sum())
    by_type = _by_type(per, sized.to_numpy())
    by_size = _by_type(per, sized.to_numpy(), by_size=True)
    matches = per.reindex(columns=["pg", "seq", "collective", "bytes", "ranks", "skew_ns", "last_rank", "time_ns", "algbw_gbps", "busbw_gbps"])
    per_rank = k.reindex(columns=["pg", "seq", "rank", "start_ns", "end_ns", "duration_ns", "wait_ns", "collective", "pg_desc"])
    per_rank = per_rank.sort_values(by=["pg", "seq", "rank"], kind="stable").reset_index(drop=True)
    return WindowCollectives(
        run=run, window=window, ranks=ranks, matched=len(per), mismatched=tuple(mismatched), straggler_rank=straggler,
        wait_ns={int(r): int(w) for r, w in zip(ranks, wait)}, by_type=by_type, by_size=by_size,
        matches=matches.reset_index(drop=True), per_rank=per_rank, implausible=implausible,
        max_offset_ns=int(gap.max()) if implausible else 0, p2p=pairs,
    )
