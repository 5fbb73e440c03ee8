"""Extra device work: a rank's device time per kernel name beyond the other ranks', and the durations without it (the
``imbalance`` what-if of :mod:`.what_if`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from .contention import by_key_and_duration, key_runs
from .dependency_graph import RankGraph
from .sweep import joined


def kernel_codes(graphs: list[RankGraph]) -> tuple[np.ndarray, list[str]]:
    """A code per device op of the ranks' graphs, concatenated in order, for its kernel name (the same name on every
    rank, the same code: int64), and the names."""
    glob: dict[str, int] = {}
    code = np.concatenate([np.array([glob.setdefault(x, len(glob)) for x in g.names], np.int64)[g.name] if g.name.size else
                           np.zeros(0, np.int64) for g in graphs])
    return code, list(glob)


SEGMENT_CELLS = 20_000_000
"""Most cells (ranks x (segment, kernel name) pairs) :func:`segment_codes` keys by; past it the kernel name alone."""


def segment_codes(graphs: list[RankGraph], code: np.ndarray, names: list[str],
                  collective: np.ndarray | None) -> tuple[np.ndarray, list[str], np.ndarray]:
    """A code per device op of the ranks' graphs (concatenated) for its kernel name within its *segment*: the number of
    the rank's collectives (``collective``, over the graphs' ops concatenated: members of matched collective instances,
    not point-to-point transfers, whose two sides run different parts of the program) launched inside its steps before
    the op's launch (program order: each rank of an SPMD job launches the same collectives in the same order, so
    segment k is the same stretch of the program on every rank; an op without a launch is segment -1). An expert given
    more tokens can run its GEMM under another kernel name (cuBLAS picks another tile for the shape); within a segment,
    the kernels between the same two collectives stand for the same work whatever their names.

    Where the ranks launched different numbers of collectives inside their steps (pipeline stages, one-sided
    transfers), or the pairs would pass :data:`SEGMENT_CELLS`, the kernel name alone: ``code`` and ``names``
    (:func:`kernel_codes`) as given, all in one segment. Returns the codes (int64), each code's kernel name (names
    repeat) and each code's segment (int64, 0 where one)."""
    one = (code, names, np.zeros(len(names), np.int64))
    if collective is None or not collective.any():
        return one
    seg = []
    counts = set()
    k_off = np.cumsum([0] + [g.start.size for g in graphs])
    for i, g in enumerate(graphs):
        at = np.where(g.anchor >= 0, g.t[np.maximum(g.anchor, 0)] if g.t.size else 0, -1)
        coll = np.sort(at[collective[k_off[i]:k_off[i + 1]] & in_steps(g) & (g.anchor >= 0)])
        counts.add(coll.size)
        seg.append(np.where(g.anchor >= 0, np.searchsorted(coll, at, "left"), -1))
    if len(counts) != 1 or counts == {0}:
        return one
    pair = np.concatenate(seg).astype(np.int64) * (len(names) + 1) + code
    new, uniq = pd.factorize(pair)
    if len(graphs) * uniq.size > SEGMENT_CELLS:
        return one
    return new.astype(np.int64), [names[int(x) % (len(names) + 1)] for x in uniq], np.asarray(uniq, np.int64) // (len(names) + 1)


def in_steps(g: RankGraph) -> np.ndarray:
    """Per device op of ``g``: launched between its first step's start and its last step's end (every op where the
    rank has no steps or the op no launch)."""
    if not g.step_bounds[0].size or g.start.size == 0:
        return np.ones(g.start.size, bool)
    lo, hi = int(g.step_bounds[0].min()), int(g.step_bounds[1].max())
    at = np.where(g.anchor >= 0, g.t[np.maximum(g.anchor, 0)] if g.t.size else 0, lo)
    return (at >= lo) & (at <= hi)


def excesses(graphs: list[RankGraph], k_rank: np.ndarray, dur: np.ndarray, min_ns: int, code: np.ndarray, uniq: list[str],
             only: set[int] | None = None, segment: np.ndarray | None = None
             ) -> tuple[list[tuple[int, str, int, np.ndarray, np.ndarray]], np.ndarray]:
    """Per rank, its device time per kernel name beyond the median of the other ranks' (or, if more, beyond their
    median count of kernels of the name at its own median duration for it), both over the ops launched inside its
    steps. Within a segment, the others' time under names the rank ran none of offsets its
    excess (the same work under another kernel name: cuBLAS's tile for another shape), each name's excess scaled
    down alike:
    ``(rank index, top kernel, removed ns, excess per code (int64 ns), kernels beyond the others' median count per
    code)`` for each rank with more than ``min_ns``, and whether each op was launched inside its rank's steps (bool);
    ``code``
    and ``uniq`` are :func:`segment_codes` (or :func:`kernel_codes`) of ``graphs``: "name" above is the kernel name within
    its segment, where the ranks' segments align, and the top kernel the name of the most excess over all segments;
    ``segment`` each code's segment (None: one); ``k_rank`` and ``dur`` each op's graph (index) and duration (int64 ns,
    a collective's its transfer after its last arrival), over the graphs' ops concatenated."""
    n = len(graphs)
    # counted: ops launched inside the rank's steps (ranks' windows cut the work around them at different places)
    inside = np.concatenate([in_steps(g) for g in graphs])
    key = k_rank[inside].astype(np.int64) * len(uniq) + code[inside]  # (each counted op's rank and name, one key: made once)
    d_in = joined([g.d for g in graphs])[inside]
    tot = np.zeros(n * len(uniq), np.int64)
    np.add.at(tot, key, d_in)
    tot = tot.reshape(n, len(uniq))
    count = np.bincount(key, minlength=n * len(uniq)).astype(np.int64).reshape(n, len(uniq))
    pace = medians(key, d_in, n * len(uniq)).reshape(n, len(uniq))  # each rank's median duration per name
    del key, d_in
    # (communication is another rank's doing; a pageable copy is its own cause)
    comm = np.concatenate([g.comm | g.pageable for g in graphs])
    comm_name = np.zeros(len(uniq), bool)
    comm_name[code[comm]] = True
    rows = []
    for i in range(n) if only is None else sorted(only):
        others = np.median(np.delete(tot, i, axis=0), axis=0)
        # (or beyond the others' median count of kernels at this rank's own pace: the others' kernels run slower
        # beside the waits this rank causes, .contention)
        own_pace = tot[i] - np.median(np.delete(count, i, axis=0), axis=0) * pace[i]
        excess = np.maximum(np.maximum(tot[i] - others, own_pace), 0)
        excess = np.where(comm_name, 0, excess)
        lacking = (count[i] == 0) & (others > 0) & ~comm_name  # (work the others ran under a name this rank did not)
        if lacking.any():
            part = np.zeros(len(uniq), np.int64) if segment is None else segment - segment.min()
            pos = np.bincount(part, weights=excess.astype(np.float64))
            neg = np.bincount(part[lacking], weights=others[lacking], minlength=pos.size)
            excess = excess * (np.maximum(pos - neg, 0) / np.maximum(pos, 1))[part]
        excess = excess.astype(np.int64)
        removed = int(excess.sum())
        if removed <= max(min_ns, 0):
            continue
        whole = np.maximum(count[i] - np.round(np.median(np.delete(count, i, axis=0), axis=0)).astype(np.int64), 0)
        by_name, at = np.unique(np.asarray(uniq, dtype=object), return_inverse=True)  # (the most excess over all segments)
        rows.append((i, str(by_name[int(np.argmax(np.bincount(at, weights=excess.astype(np.float64))))]), removed, excess, whole))
    return rows, inside


def medians(key: np.ndarray, d: np.ndarray, size: int) -> np.ndarray:
    """Per key ``0 .. size - 1``, the median of the values ``d`` of that key (int64 ns): the middle one, or the mean of
    the two middle ones (float64, as pandas' ``groupby(...).median()`` gives it), 0 for a key without values. One
    sort of the pairs (:func:`.contention.by_key_and_duration`; pandas' grouped median took 2.2 s at 4,096 ranks)."""
    out = np.zeros(size, np.float64)
    if not key.size:
        return out
    keys_sorted, d_sorted = by_key_and_duration(np.asarray(key, np.int64), np.asarray(d, np.int64))
    distinct, first, ends = key_runs(keys_sorted)
    count = ends - first
    lo, hi = d_sorted[first + (count - 1) // 2].astype(np.float64), d_sorted[first + count // 2].astype(np.float64)
    out[distinct] = (lo + hi) / 2
    return out


def without_excess(i: int, excess: np.ndarray, whole: np.ndarray, k_rank: np.ndarray, dur: np.ndarray, code: np.ndarray,
                   inside: np.ndarray) -> Callable[[np.ndarray | slice], np.ndarray]:
    """A function of op indices (a slice: all) giving ``dur`` there with graph ``i``'s ``excess`` (per code,
    :func:`excesses`) taken from its ops launched inside its steps (``inside``): per code, first its longest
    ``whole[code]`` kernels (extra kernels), then the rest of the excess from every other kernel of the code in
    proportion to its duration (:func:`excess_device_work`). The durations are built once, at the first call for all of
    them; a call for some ops before that reads ``dur`` (a bound reads :func:`excess_cap` instead)."""
    built: list[np.ndarray] = []

    def at(ik: np.ndarray | slice) -> np.ndarray:
        if not isinstance(ik, slice) and not built:
            return dur[ik]
        if not built:
            built.append(_without(i, excess, whole, k_rank, dur, code, inside))
        return built[0][ik]
    return at


def excess_cap(i: int, excess: np.ndarray, k_rank: np.ndarray, dur: np.ndarray, code: np.ndarray, inside: np.ndarray
               ) -> Callable[[np.ndarray, np.ndarray, int], np.ndarray]:
    """Per path (ops ``ik``, each one's path ``pk``, ``n`` paths), the duration graph ``i``'s excess (:func:`without_excess`)
    takes from the path's ops at most: per code, its excess or the path's ops of the code, whichever is less."""
    def cap(ik: np.ndarray, pk: np.ndarray, n: int) -> np.ndarray:
        sel = (k_rank[ik] == i) & inside[ik] & (excess[code[ik]] > 0)
        codes, at = np.unique(code[ik[sel]], return_inverse=True)
        held = np.zeros((n, codes.size), np.float64)
        np.add.at(held, (pk[sel], at), dur[ik[sel]].astype(np.float64))
        return np.minimum(held, excess[codes].astype(np.float64)).sum(axis=1)
    return cap


def _without(i: int, excess: np.ndarray, whole: np.ndarray, k_rank: np.ndarray, dur: np.ndarray, code: np.ndarray,
             inside: np.ndarray) -> np.ndarray:
    d = dur.copy()
    mine = np.flatnonzero((k_rank == i) & inside & (excess[code] > 0))
    mine = mine[np.lexsort((-d[mine], code[mine]))]  # (by code, longest first, each code's ops in their order)
    bounds = np.searchsorted(code[mine], np.flatnonzero(excess > 0), "left").tolist() + [mine.size]
    for j, c in enumerate(np.flatnonzero(excess > 0).tolist()):
        ops = mine[bounds[j]:bounds[j + 1]]
        whole_ops = ops[:int(whole[c])]  # extra kernels: the longest go first, the last in part
        before = np.concatenate([[0], np.cumsum(d[whole_ops])[:-1]])
        cut = np.clip(int(excess[c]) - before, 0, d[whole_ops])
        d[whole_ops] -= cut
        rest, left = ops[whole_ops.size:], int(excess[c]) - int(cut.sum())
        if left > 0 and rest.size:  # longer kernels: each in proportion to its duration (int64, summing exactly)
            cum = np.cumsum(d[rest])
            upto = np.minimum((cum * (min(left, int(cum[-1])) / max(int(cum[-1]), 1))).astype(np.int64), cum)
            upto[-1] = min(left, int(cum[-1]))  # (float64 in between: an int64 product could overflow)
            share = np.diff(upto, prepend=0)
            d[rest] -= np.minimum(share, d[rest])
    return d


def excess_device_work(graphs: list[RankGraph], k_rank: np.ndarray, dur: np.ndarray, min_ns: int, code: np.ndarray, uniq: list[str],
                       only: set[int] | None = None, segment: np.ndarray | None = None) -> list[tuple[int, str, int, np.ndarray]]:
    """Per rank, its device time per kernel name beyond the median of the other ranks' (:func:`excesses`), removed from
    its ops of that name launched inside its steps (:func:`without_excess`): first whole kernels, its longest, as many
    as it ran beyond the others' median count (extra kernels: extra products, another shape under the name), then the
    rest from every other kernel of the name in proportion to its duration (longer kernels: more tokens on an expert,
    a bigger batch, each step alike): ``(rank index, top kernel, removed ns, the durations without it)`` for each rank
    with more than ``min_ns``; arguments as :func:`excesses`'."""
    rows, inside = excesses(graphs, k_rank, dur, min_ns, code, uniq, only, segment)
    return [(i, top, removed, _without(i, excess, whole, k_rank, dur, code, inside)) for i, top, removed, excess, whole in rows]
