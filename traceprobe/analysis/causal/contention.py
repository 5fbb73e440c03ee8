"""Compute slowed by a collective that waits: what a rank's lateness costs the others' kernels.

A collective kernel that waits for a late rank does not wait idle: NCCL's kernels poll on the device, holding SMs and
memory bandwidth, so the compute that runs beside them on the waiting ranks runs slower. On 4x H200, DDP ranks waiting
for a rank given 13 ms of extra products a step ran their GEMMs 24% slower than that rank ran the same kernels (median
2,004 against 1,615 µs; 1,606 µs on every rank of the balanced run). Removing the late rank's cause removes the waits
and that slowdown with them; the replay (:mod:`.what_if`) keeps each kernel's recorded duration, so it would miss it.

Definitions (quoted by docs/measures.md):

- a *wait*: a member kernel of a cross-rank instance (collective or point-to-point transfer) from its start to the
  last member's arrival (or its own end, if sooner), *charged* to the rank of that last member.
- a compute kernel's *slowdown* under rank i's waits: its duration beyond the median duration of the kernels of its
  name on rank i (the rank that did not wait runs them without a polling collective beside them; at least
  :data:`MIN_REFERENCE` of them), for the part of it that overlaps waits charged to rank i; none where the kernel
  takes more than :data:`MAX_SLOWDOWN` times that median (other work under the same name: another shape). Where rank
  i ran more kernels of the name than the waiting rank, the median is of its shortest ones, as many as the waiting
  rank ran: rank i's extra work under the same name (extra products of another shape) is not the reference of the
  work they share.
- the *relief* of removing a cause of rank i: the slowdowns of the other ranks' compute under rank i's waits, times
  the share of those waits the removal takes away (measured in a first replay without relief: a cause that does not
  move rank i's arrival relieves nothing).
"""

from __future__ import annotations

import numpy as np

from ... import intervals as iv

MIN_REFERENCE = 3
"""Kernels of a name on the late rank needed to take their median as the name's uncontended duration."""
MAX_SLOWDOWN = 1.5
"""A kernel longer than this times its name's uncontended duration is taken for other work, not slowed work."""

Waits = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def last_arrivals(start: np.ndarray, mem_op: np.ndarray, mem_group: np.ndarray) -> np.ndarray:
    """Per cross-rank instance (``mem_group``, numbered from 0), its member op (``mem_op``) that started last, by
    ``start`` (int64 ns); -1 for a number without members."""
    last_op = np.full(int(mem_group.max(initial=-1)) + 1, -1, np.int64)
    o = np.lexsort((start[mem_op], mem_group))
    last_op[mem_group[o]] = mem_op[o]  # (the latest arrival of each instance is written last)
    return last_op


def wait_spans(start: np.ndarray, end: np.ndarray, k_rank: np.ndarray, mem_op: np.ndarray, mem_group: np.ndarray) -> Waits:
    """The waits (module docstring) of the instances given as memberships (``mem_op`` in ``mem_group``) of ops with
    ``start``, ``end`` (int64 ns) on ranks ``k_rank`` (index). Returns ``(op, lo, hi, charged)``: the waiting member
    op, the wait's bounds (int64 ns) and the index of the rank it is charged to."""
    if mem_op.size == 0:
        z = np.zeros(0, np.int64)
        return z, z, z, z
    last = last_arrivals(start, mem_op, mem_group)[mem_group]
    sel = start[mem_op] < start[last]
    op, last = mem_op[sel], last[sel]
    return op, start[op], np.minimum(end[op], start[last]), k_rank[last]


def slowdowns(start: np.ndarray, end: np.ndarray, d: np.ndarray, code: np.ndarray, k_rank: np.ndarray, comm: np.ndarray,
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
