"""What the causes across ranks read of each rank, as one frame per table for every rank at once.

:func:`.causes.window_causes` compares thousands of ranks without a loop over them: the few tables it reads of
each rank (:func:`rank_columns`: exposed collective spans, steps, GPU time breakdown, idle causes, kernels) go
into one frame per table with a ``rank`` column (:class:`RankTables`), built from reports or straight from
summary files (:mod:`.job`), and its figures (defined in :mod:`.causes`) are computed on those frames with
sorts, groupbys and :func:`traceprobe.intervals.grouped_clip`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from ... import intervals as iv
from ...reading.comm_kernels import COMM_KERNEL_RE
from ..host.host_classes import HOST_CAUSES

PARTS = ("compute", "other_busy", *HOST_CAUSES, "dependency", "queued")
"""What the blame compares across ranks: device compute, other device work alone (exposed copies, memsets), and the
idle time of each host cause and ``queued`` (:mod:`.idle_causes`)."""

Table = Mapping[str, Any]
"""One rank's table: column name -> values (a DataFrame, or a dict of lists as a summary file holds them)."""

def _n(t: Table | None) -> int:
    if t is None or len(t) == 0:
        return 0
    return len(t[next(iter(t))])


def _get(t: Table, col: str, n: int, dtype: Any) -> np.ndarray:
    if col not in t:
        return np.zeros(n, dtype)
    v = t[col]
    return v.to_numpy(dtype=dtype) if isinstance(v, pd.Series) else np.asarray(v, dtype=dtype)


@dataclass(frozen=True)
class RankColumns:
    """One rank's share of :class:`RankTables` (:func:`rank_columns`): each a tuple of equal-length arrays."""

    rank: int
    window_ns: int
    exposed: tuple[np.ndarray, np.ndarray, np.ndarray]
    steps: tuple[np.ndarray, np.ndarray, np.ndarray]
    busy: tuple[np.ndarray, np.ndarray, np.ndarray]
    idle: tuple[np.ndarray, np.ndarray, np.ndarray]
    kernels: tuple[np.ndarray, np.ndarray]


RANK_TABLES = ("exposed_comm", "steps", "breakdown", "breakdown_steps", "idle_causes", "kernels")
"""The tables of a rank's report (or summary) that :func:`rank_columns` reads, by name."""


def rank_columns(rank: int, window_ns: tuple[int, int], tables: Mapping[str, Table | None]) -> RankColumns:
    """What the causes read of one rank's report, from its tables by name (:data:`RANK_TABLES`:
    :class:`.per_trace.OverlapReport`'s DataFrames, or a summary's columns); missing or empty tables give no rows.

    The per-step parts (:data:`PARTS`) come from ``breakdown_steps`` and the idle causes of steps (step >= 0)
    where the rank has steps, else from ``breakdown`` and the idle causes of the whole window (step -1), which then
    count as step -1. Kernels: those of kind ``kernel`` (where the table says), communication kernels left out
    (:data:`~traceprobe.reading.comm_kernels.COMM_KERNEL_RE`: their time on the waiting ranks is the wait)."""
    i64, f64 = np.int64, np.float64
    ex = tables.get("exposed_comm")
    n = _n(ex)
    exposed = (_get(ex, "device", n, i64), _get(ex, "start_ns", n, i64), _get(ex, "end_ns", n, i64)) if ex is not None and n else _none(3)
    st = tables.get("steps")
    n = _n(st) if st is not None and "gpu_start_ns" in st else 0
    steps = (_get(st, "step", n, i64), _get(st, "gpu_start_ns", n, i64), _get(st, "gpu_end_ns", n, i64)) if st is not None and n else _none(3)
    per_step = _n(tables.get("breakdown_steps")) > 0
    b = tables.get("breakdown_steps") if per_step else tables.get("breakdown")
    n = _n(b)
    busy = _none(3)
    if b is not None and n:
        step = _get(b, "step", n, i64) if per_step else np.full(n, -1, i64)
        busy = (step, _get(b, "compute_ns", n, f64), _get(b, "exposed_copy_ns", n, f64) + _get(b, "other_ns", n, f64))
    ic = tables.get("idle_causes")
    n = _n(ic)
    idle = _none(3)
    if ic is not None and n:
        step = _get(ic, "step", n, i64)
        keep = step >= 0 if per_step else step == -1
        idle = (step[keep], _get(ic, "cause", n, object)[keep], _get(ic, "ns", n, f64)[keep])
    k = tables.get("kernels")
    n = _n(k) if k is not None and "total_ns" in k else 0
    kernels: tuple[np.ndarray, np.ndarray] = (np.zeros(0, object), np.zeros(0, f64))
    if k is not None and n:
        names = _get(k, "name", n, object)
        keep = np.array([not _is_comm(x) for x in names.tolist()], dtype=bool)
        if "kind" in k:
            keep &= _get(k, "kind", n, object) == "kernel"
        kernels = (names[keep], _get(k, "total_ns", n, f64)[keep])
    return RankColumns(int(rank), int(window_ns[1]) - int(window_ns[0]), exposed, steps, busy, idle, kernels)  # type: ignore[arg-type]


@lru_cache(maxsize=1 << 16)
def _is_comm(name: Any) -> bool:
    """Whether kernel ``name`` is a communication kernel's (:data:`~traceprobe.reading.comm_kernels.COMM_KERNEL_RE`);
    names repeat across ranks, so each is searched once."""
    return COMM_KERNEL_RE.search(str(name)) is not None


def _none(k: int) -> Any:
    return tuple(np.zeros(0, np.int64) for _ in range(k))


@dataclass(frozen=True)
class RankTables:
    """The tables the causes read of a window's ranks, each with a ``rank`` column (int64) (:func:`rank_tables`).

    Attributes:
        ranks: the ranks (int64), in the order given (the reports' order).
        window_ns: each rank's window length (int64 ns), in that order.
        exposed: ``rank``, ``device``, ``start_ns``, ``end_ns`` (int64): each rank's exposed collective
            communication (:attr:`.per_trace.OverlapReport.exposed_comm`).
        steps: ``rank``, ``step``, ``gpu_start_ns``, ``gpu_end_ns`` (int64): each rank's steps (:mod:`.steps`).
        parts: ``rank``, ``step`` (int64) and one float64 column (ns) per part of :data:`PARTS`: each rank's parts
            per step (step -1: the whole window, where the rank has no steps), sorted by rank and step.
        kernels: ``rank`` (int64), ``name`` (str), ``total_ns`` (float64): device time per kernel name and device,
            communication kernels left out.
    """

    ranks: np.ndarray
    window_ns: np.ndarray
    exposed: pd.DataFrame
    steps: pd.DataFrame
    parts: pd.DataFrame
    kernels: pd.DataFrame


def _cat(cols: Sequence[RankColumns], field: str, names: Sequence[str]) -> pd.DataFrame:
    parts = [getattr(c, field) for c in cols]
    n = np.array([p[0].size for p in parts], dtype=np.int64)
    out: dict[str, Any] = {"rank": np.repeat(np.array([c.rank for c in cols], dtype=np.int64), n)}
    for j, name in enumerate(names):
        vals = [p[j] for p in parts]
        out[name] = np.concatenate(vals) if vals else np.zeros(0, np.int64)
    return pd.DataFrame(out)


def rank_tables(cols: Sequence[RankColumns]) -> RankTables:
    """The :class:`RankTables` of ranks' :func:`rank_columns` (one concatenation per table, one groupby for the parts)."""
    busy = _cat(cols, "busy", ["step", "compute", "other_busy"])
    parts = pd.DataFrame(busy.groupby(["rank", "step"], sort=True).sum())
    idle = _cat(cols, "idle", ["step", "cause", "ns"])
    if len(idle):
        parts = pd.DataFrame(parts.join(idle.pivot_table(index=["rank", "step"], columns="cause", values="ns", aggfunc="sum"), how="left"))
    parts = pd.DataFrame(parts.reindex(columns=list(PARTS))).fillna(0.0).astype(np.float64).reset_index()
    parts = parts.astype({"rank": np.int64, "step": np.int64})
    return RankTables(np.array([c.rank for c in cols], dtype=np.int64), np.array([c.window_ns for c in cols], dtype=np.int64),
                      _cat(cols, "exposed", ["device", "start_ns", "end_ns"]),
                      _cat(cols, "steps", ["step", "gpu_start_ns", "gpu_end_ns"]), parts,
                      _cat(cols, "kernels", ["name", "total_ns"]))


def pair_codes(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct pairs ``(a, b)`` of two int64 arrays, sorted (an ``(n, 2)`` array), and each row's pair's index."""
    if a.size == 0:
        return np.zeros((0, 2), np.int64), np.zeros(0, np.int64)
    lo_a, lo_b = int(a.min()), int(b.min())
    width = int(b.max()) - lo_b + 1
    codes, index = np.unique((a - lo_a) * width + (b - lo_b), return_inverse=True)
    return np.stack([codes // width + lo_a, codes % width + lo_b], axis=1), index.ravel().astype(np.int64)


class ExposedSpans:
    """Each rank's exposed collective spans, per device, as normalised interval sets (:meth:`inside`)."""

    def __init__(self, t: RankTables) -> None:
        ex = t.exposed
        rank, dev = ex["rank"].to_numpy(np.int64), ex["device"].to_numpy(np.int64)
        pairs, code = pair_codes(rank, dev)
        self.key, self.start, self.end = iv.grouped_union(code, ex["start_ns"].to_numpy(np.int64), ex["end_ns"].to_numpy(np.int64))
        # the (rank, device) codes of one rank are consecutive
        self.ranks, self.first, self.devices = np.unique(pairs[:, 0], return_index=True, return_counts=True)
        total = np.zeros(self.ranks.size, np.int64)
        np.add.at(total, np.searchsorted(self.ranks, rank), ex["end_ns"].to_numpy(np.int64) - ex["start_ns"].to_numpy(np.int64))
        self.total: dict[int, int] = dict(zip(self.ranks.tolist(), total.tolist()))
        """Per rank: the exposed spans' summed length (ns)."""

    def inside(self, group: np.ndarray, group_rank: np.ndarray, start: np.ndarray, end: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per group ``g`` of intervals (all of rank ``group_rank[g]``): the part of that rank's exposed spans, on each
        of its devices, inside the union of the group's intervals.

        Returns:
            ``(length, piece_group, piece_start, piece_end)``: int64 ns per group (summed over the rank's devices), and
            the pieces, by group (one normalised set per group and device).
        """
        length = np.zeros(group_rank.size, np.int64)
        gk, gs, ge = iv.grouped_union(group, start, end)
        if self.ranks.size == 0 or gk.size == 0:
            return length, *_none(3)
        r = group_rank[gk]
        pos = np.minimum(np.searchsorted(self.ranks, r), self.ranks.size - 1)
        n = np.where(self.ranks[pos] == r, self.devices[pos], 0)  # one query per device of the group's rank
        row = np.repeat(np.arange(gk.size), n)
        key = self.first[pos[row]] + np.arange(row.size) - np.repeat(np.cumsum(n) - n, n)
        qi, ps, pe = iv.grouped_clip(self.key, self.start, self.end, key, gs[row], ge[row])
        grp = gk[row[qi]]
        np.add.at(length, grp, pe - ps)
        return length, grp, ps, pe


def step_maxima(t: RankTables, piece_rank: np.ndarray, piece_key: np.ndarray, ps: np.ndarray, pe: np.ndarray) -> pd.DataFrame:
    """Per step and key: the largest, over ranks, of a rank's pieces' length inside its step's device interval.

    Args:
        piece_rank, piece_key, ps, pe: pieces of time (int64), each of a rank and a key (the late rank).

    Returns:
        ``step``, ``key``, ``ns`` (int64), where ``ns`` > 0. The loop runs over step ordinals (a rank's first step,
        its second...), each over every piece at once.
    """
    st = t.steps.sort_values("rank", kind="stable")
    srank, step = st["rank"].to_numpy(np.int64), st["step"].to_numpy(np.int64)
    lo, hi = st["gpu_start_ns"].to_numpy(np.int64), st["gpu_end_ns"].to_numpy(np.int64)
    ranks, first, count = np.unique(srank, return_index=True, return_counts=True)
    rows, keys, lens = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    if ranks.size and ps.size:
        pos = np.minimum(np.searchsorted(ranks, piece_rank), ranks.size - 1)
        n = np.where(ranks[pos] == piece_rank, count[pos], 0)
        for j in range(int(n.max())):
            m = np.flatnonzero(n > j)
            row = first[pos[m]] + j
            ov = np.minimum(pe[m], hi[row]) - np.maximum(ps[m], lo[row])
            hit = ov > 0
            rows.append(row[hit])
            keys.append(piece_key[m][hit])
            lens.append(ov[hit])
    df = pd.DataFrame({"row": np.concatenate(rows), "key": np.concatenate(keys), "ns": np.concatenate(lens)})
    df = pd.DataFrame(df.groupby(["row", "key"], sort=False, as_index=False)["ns"].sum())  # a step row is one rank's: its pieces summed
    df["step"] = step[df["row"].to_numpy(np.int64)]
    out = pd.DataFrame(df.groupby(["step", "key"], sort=True, as_index=False)["ns"].max())  # the largest over ranks
    return pd.DataFrame(out[["step", "key", "ns"]]).astype(np.int64)
