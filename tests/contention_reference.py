"""The contention relief's slowdowns and charged waits as first written: a pass per pair of ranks (the rank charged a
wait and one that waited), each over every compute kernel of the waiting rank, and a dense array per charged rank.
Kept as the reference that :func:`traceprobe.analysis.causal.contention.slowdowns` and
:func:`~traceprobe.analysis.causal.contention.charged_waits` (one pass over the waits' overlaps with compute, sparse)
must equal to the ns (tests/test_contention.py)."""

from __future__ import annotations

import numpy as np

from traceprobe import intervals as iv
from traceprobe.analysis.causal.contention import MAX_SLOWDOWN, MIN_REFERENCE, Waits


def slowdowns_by_pair(start: np.ndarray, end: np.ndarray, d: np.ndarray, code: np.ndarray, k_rank: np.ndarray, comm: np.ndarray,
              w: Waits) -> dict[int, np.ndarray]:
    """``{rank index i: (K,) int64 ns}``: per op, its slowdown under the waits charged to rank i (module docstring;
    ``w`` from :func:`wait_spans`, ``code`` the kernel name of each op, ``comm`` whether it is communication)."""
    op, lo, hi, charged = w
    out: dict[int, np.ndarray] = {}
    if op.size == 0:
        return out
    compute = ~comm
    w_rank = k_rank[op]
    n_codes = int(code.max(initial=0)) + 1
    by_rank = np.argsort(k_rank, kind="stable")  # (each rank's ops, in their order)
    k_bounds = np.searchsorted(k_rank[by_rank], np.arange(int(k_rank.max(initial=-1)) + 2))

    def compute_ops(r: int) -> np.ndarray:
        ops = by_rank[k_bounds[r]:k_bounds[r + 1]]
        return ops[compute[ops]]

    waiting: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}

    def of_waiting(r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """A waiting rank's compute ops, their names and durations, and its count of each name: once per rank, not per
        rank it waited for."""
        got = waiting.get(r)
        if got is None:
            ops = compute_ops(r)
            got = waiting[r] = (ops, code[ops], d[ops].astype(np.float64), np.bincount(code[ops], minlength=n_codes))
        return got

    pair = np.lexsort((w_rank, charged))  # (the waits grouped by the rank charged, then the rank that waited)
    pc, pr = charged[pair], w_rank[pair]
    cut = np.flatnonzero(np.r_[True, (pc[1:] != pc[:-1]) | (pr[1:] != pr[:-1]), True])
    for a, b in zip(cut[:-1].tolist(), cut[1:].tolist()):  # (one pass per pair of ranks: a rank and one that waited for it)
        i, r = int(pc[a]), int(pr[a])
        if a == 0 or int(pc[a - 1]) != i:
            mine = compute_ops(i)
            mine = mine[np.lexsort((d[mine], code[mine]))]  # (by name, shortest first)
            first = np.searchsorted(code[mine], np.arange(n_codes))  # (where each name's kernels begin)
            avail = np.diff(np.r_[first, mine.size])
        sel = pair[a:b]
        ops, names, dd, counts = of_waiting(r)
        # per name, the median of rank i's shortest kernels, as many as rank r ran (all of them where fewer)
        n = np.minimum(counts, avail)
        keep = n >= MIN_REFERENCE
        if not keep.any():
            continue
        ref = np.full(n_codes, np.nan)  # per kernel name code, its reference on rank i
        at = first[keep]
        lo_d = d[mine[at + (n[keep] - 1) // 2]].astype(np.float64)
        hi_d = d[mine[at + n[keep] // 2]].astype(np.float64)
        ref[keep] = (lo_d + hi_d) / 2  # (the median: the middle one, or the mean of the middle two)
        base = ref[names]
        extra = np.where(np.isfinite(base) & (dd <= MAX_SLOWDOWN * base), np.maximum(dd - base, 0), 0)
        slowed = np.flatnonzero(extra)  # (only these can be charged a part)
        if not slowed.size:
            continue
        hit = ops[slowed]
        ov = iv.measure(iv.union(lo[sel], hi[sel]), start[hit], end[hit])
        part = (extra[slowed] * ov / np.maximum(end[hit] - start[hit], 1)).astype(np.int64)
        if part.any():
            out.setdefault(i, np.zeros(start.size, np.int64))[hit] += part
    return out


def charged_wait(arrival: np.ndarray, end: np.ndarray, w: Waits, mem_op: np.ndarray, mem_group: np.ndarray, i: int) -> int:
    """The waits charged to rank ``i`` in the trace (``w``), measured again on replayed ``arrival`` and ``end`` times
    (the same instances, their last member's arrival as replayed), in ns."""
    op, _, _, charged = w
    if op.size == 0 or mem_op.size == 0:
        return 0
    low = np.iinfo(np.int64).min
    last = np.full(int(mem_group.max()) + 1, low, np.int64)
    np.maximum.at(last, mem_group, arrival[mem_op])
    bound = np.full(arrival.size, low, np.int64)
    np.maximum.at(bound, mem_op, last[mem_group])
    sel = op[charged == i]
    return int(np.maximum(np.minimum(end[sel], bound[sel]) - arrival[sel], 0).sum())
