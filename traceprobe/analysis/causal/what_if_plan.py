"""Which what-ifs to replay: a bound on each cause's gain read off the window's critical paths (:mod:`.what_if`), so
that a cause whose gain cannot clear the noise floor is never replayed, and the what-ifs of a window of thousands of
ranks do not multiply with its ranks.

The bound. The replay (:mod:`.sweep`) computes longest paths: each node's time is the latest of its predecessors'
times plus the edge's weight (host times ``h``, durations ``d``, fixed lags), from sources whose times are fixed; the
window's finish ``L`` is the length of its longest path. A what-if only lowers weights (a host time, a duration, each
by ``δ_e >= 0``) or drops edges (a sync's), so each path that survives is shorter by the removed weight on it, and

    gain = L - L' = min over surviving paths p of (L - len(p) + δ(p))  <=  δ(p*)

for a critical path ``p*`` (``len(p*) = L``: :meth:`.sweep.Sweep.critical_paths`) none of whose edges is dropped (where
one is, there is no bound: +inf). No time rises either (lower weights, fewer edges: every maximum is at most what it
was), so every gain is at least 0. The same holds for each step's end (the latest of its work's nodes,
:func:`.what_if_steps.step_last`) with a critical path into that step's last node: a step's gain in the by-step table
(how much earlier it ends less how much earlier the step before it ends, the latter >= 0) is at most its bound. The
contention relief's second replay (:mod:`.contention`) lowers the other ranks' durations by at most their slowdown
under the removed rank's waits: counted in ``δ`` in full. A row's gain per step is at most its gain, and a row told
beyond a rank's own (``beyond``) gives back at most its own gain: their bounds are the cause's.

Which are replayed. A cause's row can be shown (a finding, its window's top, a rank's top: gain at least the noise
floor), quoted beside another's finding (at least :data:`.what_if_order.EXPOSING_SHARE` of a shown gain) or name a
step's top (a step's gain at least the floor per step) only where its window bound is at least that share of the floor
or a step bound at least the floor per step: the others are not replayed and have no row. The rows that are replayed
are the rows they would be had every cause been replayed: where another row's figures or order read a cause not
replayed (an every-rank row told beyond its lead rank's own row, an every-rank row kept where it gains more than its
best single rank, a rank's syncs placed beside its best other cause), that cause is replayed as well, and a group
(``graph_of_step``) beside its first class's row (:func:`wanted`), until none is missing. Where the graph has a cycle or
its replay does not give the trace's own finish and step ends, every cause is replayed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .contention import Slowdowns
from .dependency_graph import RankGraph
from .sweep import index_type
from .what_if_table import lead

INF = 2**62
"""No bound: a critical path runs through a dropped edge."""

Make = Callable[[np.ndarray | slice, np.ndarray | slice, np.ndarray | slice], tuple[np.ndarray, np.ndarray, np.ndarray]]
"""A what-if's host times at the anchors of its first index, durations at the ops of its second and dropped sync edges
at the anchors of its third (a slice: all)."""


@dataclass
class Candidate:
    """One what-if that may be replayed: the graphs (indices) it removes its cause from, the cause, the time removed
    per graph (ns), what holds most of it, its inputs (``make``), the steps that held it per graph, the time it
    removed in the first step, and ``relief``: the single graph whose waits' contention relief it replays (-1 none)."""

    ranks: list[int]
    cause: str
    removed: list[int]
    top: str
    make: Make
    held: list[int]
    first: int = 0
    relief: int = -1
    cap: Callable[[np.ndarray, np.ndarray, int], np.ndarray] | None = None
    """Where ``make``'s durations are costly to build (``imbalance``): per path, a bound of the duration it removes from
    the path's ops, from the ops (indices) and each one's path (``make``'s durations then go unread)."""
    bound: tuple[int, int] = field(default=(INF, INF))
    """(window bound, the largest step bound): ns."""


class Bounds:
    """The window's critical path and one into each step's last node (module docstring), as index arrays over the
    window's anchors and ops; :meth:`of` bounds a candidate's gain.

    The paths into the steps' ends share most of their nodes (the path into a step's end runs back through the steps
    before it): each kind of index (anchors, ops, sync anchors) is held once, distinct and ascending (``ia``, ``ik``,
    ``isx``: int64), with each path's entries as positions among them (:attr:`at`, in the paths' order), so that a
    candidate's inputs are built at its distinct nodes only (the 10^6-event trace's 11 paths: 1.06M anchor entries, 199k
    distinct)."""

    def __init__(self, paths: list[tuple[np.ndarray, np.ndarray, np.ndarray]], h0: np.ndarray, d0: np.ndarray,
                 slow: Slowdowns) -> None:
        self.n = len(paths)
        (self.ia, at_a), (self.ik, at_k), (self.isx, at_s) = (_distinct([p[j] for p in paths], size)
                                                               for j, size in enumerate((h0.size, d0.size, h0.size)))
        self.at = (at_a, at_k, at_s)
        """Per kind (anchors, ops, syncs): each path's entries, one path after another, as positions in ``ia``, ``ik``
        or ``isx`` (int32 where they fit)."""
        self.sizes = tuple(np.array([p[j].size for p in paths], np.int64) for j in range(3))
        """Per kind: each path's number of entries (int64, ``n``)."""
        self.h0, self.d0 = h0[self.ia], d0[self.ik]
        self.slow = slow  # (read at the distinct ops of the paths, for the rank a candidate relieves: .contention.Slowdowns.at)

    def of(self, c: Candidate) -> tuple[int, int]:
        """``(window bound, largest step bound)`` of ``c``'s gain (ns; :data:`INF` where a path runs through an edge it
        drops)."""
        h, d, drop = c.make(self.ia, self.ik, self.isx)
        if c.cap is not None:  # (what it removes, then the relief from what is left at most)
            d = self.d0
        if c.relief in self.slow:
            d = np.maximum(d - self.slow.at(c.relief, self.ik), 0)
        b = np.zeros(self.n, np.float64)
        b += self.per_path(0, self.h0 - h)
        b += self.per_path(1, self.d0 - d)
        if c.cap is not None:
            pk = np.repeat(np.arange(self.n), self.sizes[1])
            b += c.cap(self.ik[self.at[1]], pk, self.n)
        b = np.ceil(b).astype(np.int64)
        b[self.per_path(2, drop) > 0] = INF
        return int(b[0]), int(b[1:].max(initial=0))

    def per_path(self, kind: int, x: np.ndarray) -> np.ndarray:
        """Per path (``n``), the sum of ``x`` (one value per distinct index of ``kind``: 0 anchors, 1 ops, 2 syncs; int64
        or bool) over the path's entries: int64, exact (the float64 sums they replace were exact below 2^53 ns)."""
        out = np.zeros(self.n, np.int64)
        sizes = self.sizes[kind]
        full = sizes > 0
        if full.any():  # (each path's entries are contiguous: one reduce per path, an empty path skipped)
            out[full] = np.add.reduceat(x.astype(np.int64, copy=False)[self.at[kind]], (np.cumsum(sizes) - sizes)[full])
        return out


def _distinct(parts: list[np.ndarray], size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of ``parts`` (int indices in [0, ``size``)), ascending (int64), and each entry of the parts,
    one part after another, as its position among them (int32 where they fit, else int64). O(size), no sort."""
    seen = np.zeros(size, bool)
    for p in parts:
        seen[p] = True
    distinct = np.flatnonzero(seen).astype(np.int64, copy=False)
    pos = np.cumsum(seen, dtype=np.int64) - 1
    del seen
    at = np.empty(sum(p.size for p in parts), index_type(distinct.size))
    lo = 0
    for p in parts:
        at[lo:lo + p.size] = pos[p]
        lo += p.size
    return distinct, at


def critical_bounds(sweep, h0: np.ndarray, d0: np.ndarray, times: tuple[np.ndarray, np.ndarray, np.ndarray],
                    sink: int, step_sinks: list[int], slow: Slowdowns) -> Bounds | None:
    """:class:`Bounds` of the window replayed as recorded (``times``: :meth:`.sweep.Sweep.replay` with ``h0``, ``d0`` and
    every sync edge), its critical path into ``sink`` and each step's into ``step_sinks`` (node numbers of
    :mod:`.sweep`); None where the graph has a cycle."""
    sync = sweep.target >= 0
    paths = sweep.critical_paths(h0, d0, sync, times, [sink, *step_sinks])
    return None if paths is None else Bounds(paths, h0, d0, slow)


def sinks(n_anchors: int, n_ops: int, t: np.ndarray, end: np.ndarray, counted: np.ndarray, la: np.ndarray, lk: np.ndarray,
          ids: np.ndarray, n_steps: int) -> tuple[int, list[int]]:
    """The node that ends the window (its last device op's end, or its last counted anchor: :func:`.what_if._finish`) and
    the node that ends each step (:func:`.what_if_steps.step_last`'s ``la``, ``lk`` and ``ids``), as node numbers of
    :mod:`.sweep` (an anchor ``i``; op ``k``'s end ``n_anchors + n_ops + k``); -1 for a step without work."""
    ta = np.where(counted, t, np.iinfo(np.int64).min)
    a_best = int(np.argmax(ta)) if t.size else -1
    k_best = int(np.argmax(end)) if end.size else -1
    en = n_anchors + n_ops
    window = en + k_best if k_best >= 0 and (a_best < 0 or end[k_best] >= ta[a_best]) else a_best
    nodes = np.concatenate([la, en + lk]).astype(np.int64)
    vals = np.concatenate([t[la], end[lk]])
    o = np.lexsort((vals, ids))
    last = np.full(n_steps, -1, np.int64)
    last[ids[o]] = nodes[o]  # (each step's latest, written last)
    return window, last.tolist()


def chosen(cands: list[Candidate], floor: int, share: float, n_steps: int) -> set[int]:
    """The candidates whose gain may be shown, quoted or name a step's top (module docstring): window bound at least
    ``share`` of ``floor``, or a step bound at least the floor per step."""
    per_step = floor // max(n_steps, 1)
    return {i for i, c in enumerate(cands) if c.bound[0] >= share * floor or (c.ranks and len(c.ranks) == 1 and n_steps and
                                                                               c.bound[1] >= per_step)}


def wanted(cands: list[Candidate], done: dict[int, int], out: pd.DataFrame, rank_of: Callable[[Candidate], int],
           every_rank_factor: float, lead: Callable[[Candidate], int | None], groups: Mapping[str, tuple[str, ...]]) -> set[int]:
    """Candidates not replayed whose rows the replayed rows' figures or order read (module docstring): ``done`` the
    replayed candidates' gains, ``out`` the rows kept (before ordering, groups aside: ``rank``, ``cause``, ``per_step_ns``),
    ``rank_of`` a candidate's rank (-1 every rank), ``lead`` the graph whose own row an every-rank row is told beyond
    (None where none). A group of ``groups`` (a name: its host classes) is replayed on the ranks where its first class is
    (the figure beside that cause's row: :attr:`.what_if_windows.WindowWhatIf.graph_of_step`); its rows are no rival of a
    rank's syncs."""
    idle = [i for i in range(len(cands)) if i not in done]
    firsts = {(cands[i].cause, tuple(cands[i].ranks)) for i in done}
    want = {j for j in idle if cands[j].cause in groups and (groups[cands[j].cause][0], tuple(cands[j].ranks)) in firsts}
    for i, g in done.items():
        c = cands[i]
        if len(c.ranks) < 2:
            continue
        own = lead(c)
        want |= {j for j in idle if cands[j].cause == c.cause and cands[j].ranks == [own]}
        singles = [j for j in range(len(cands)) if cands[j].cause == c.cause and len(cands[j].ranks) == 1]
        best = max((done[j] for j in singles if j in done), default=-1)
        if g > every_rank_factor * best:  # (kept, unless a single rank not replayed gains more)
            want |= {j for j in singles if j not in done and every_rank_factor * cands[j].bound[0] >= g}
    sync = (out["cause"] == "sync").to_numpy()
    for r in set(out["rank"][sync].tolist()):
        rows = out[(out["rank"] == r).to_numpy() & ~sync]
        rival = int(rows["per_step_ns"].max()) if len(rows) else -1
        want |= {j for j in idle if cands[j].cause not in ("sync", *groups) and rank_of(cands[j]) == r and cands[j].bound[0] >= rival}
    return want


def lead_graph(c: Candidate, graphs: list[RankGraph]) -> int | None:
    """The graph (index) whose own row ``c``'s every-rank row is told beyond (:func:`.what_if_table.lead`), None where none."""
    if c.cause == "imbalance":
        return None
    top = lead({graphs[i].rank: n for i, n in zip(c.ranks, c.removed)})
    return next((i for i in c.ranks if graphs[i].rank == top), None)


def with_rank(d: np.ndarray, ik: np.ndarray | slice, lo: int, mine: np.ndarray) -> np.ndarray:
    """``d[ik]`` (a copy) with the ops ``lo .. lo + mine.size - 1`` (one rank's) at ``mine``: a device cause's durations
    as a what-if's inputs (:data:`Make`, :func:`.what_if.what_ifs`)."""
    if isinstance(ik, slice):
        out = d[ik].copy()
        out[lo:lo + mine.size] = mine
        return out
    out, sel = d[ik], (ik >= lo) & (ik < lo + mine.size)
    out[sel] = mine[ik[sel] - lo]
    return out
