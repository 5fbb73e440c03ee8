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

from dataclasses import dataclass

import numpy as np

from ... import intervals as iv
from ...keyed import keys, unique_pairs

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


@dataclass(frozen=True)
class Slowdowns:
    """Per op, its slowdown under the waits charged to each rank (:func:`slowdowns`), held sparse: the (rank, op) pairs
    slowed only, as many as the waits' overlaps with compute kernels (an array of every op per charged rank would take
    ranks x ops: 1,024 ranks of 8,000 ops, 67 GB).

    Attributes:
        rank: (N,) int64, the rank index charged, ascending. op: (N,) int64, the op slowed, ascending within a rank.
        ns: (N,) int64 ns, its slowdown (> 0). size: the window's ops (K).
    """

    rank: np.ndarray
    op: np.ndarray
    ns: np.ndarray
    size: int

    @classmethod
    def none(cls, size: int) -> Slowdowns:
        """No op slowed, of ``size`` ops."""
        z = np.zeros(0, np.int64)
        return cls(z, z, z, size)

    def _span(self, i: int) -> tuple[int, int]:
        return int(np.searchsorted(self.rank, i, "left")), int(np.searchsorted(self.rank, i, "right"))

    def __contains__(self, i: object) -> bool:
        """Whether any op is slowed under the waits charged to rank index ``i``."""
        if not isinstance(i, (int, np.integer)):
            return False
        lo, hi = self._span(int(i))
        return hi > lo

    def __len__(self) -> int:
        """The ranks charged a slowdown."""
        return int(np.unique(self.rank).size)

    def __getitem__(self, i: int) -> np.ndarray:
        """(K,) int64 ns: each op's slowdown under the waits charged to rank index ``i`` (0 where none).

        Raises:
            KeyError: no op is slowed under them.
        """
        if i not in self:
            raise KeyError(i)
        lo, hi = self._span(i)
        out = np.zeros(self.size, np.int64)
        out[self.op[lo:hi]] = self.ns[lo:hi]
        return out

    def at(self, i: int, ops: np.ndarray) -> np.ndarray:
        """The slowdowns of ``ops`` (int indices) under the waits charged to rank index ``i``, int64 ns (0 where none):
        ``self[i][ops]`` without the array of every op."""
        lo, hi = self._span(i)
        mine, ns = self.op[lo:hi], self.ns[lo:hi]
        ops = np.asarray(ops, np.int64)
        if mine.size == 0:
            return np.zeros(ops.size, np.int64)
        at = np.minimum(np.searchsorted(mine, ops), mine.size - 1)
        return np.where(mine[at] == ops, ns[at], 0).astype(np.int64)


def slowdowns(start: np.ndarray, end: np.ndarray, d: np.ndarray, code: np.ndarray, k_rank: np.ndarray, comm: np.ndarray,
              w: Waits, lane: np.ndarray | None = None) -> Slowdowns:
    """Per op, its slowdown under the waits charged to each rank (module docstring; ``w`` from :func:`wait_spans`,
    ``code`` the kernel name of each op, ``comm`` whether it is communication, ``lane`` each op's device chain: a
    stream of one rank, whose kernels run one after another; default one chain a rank), as :class:`Slowdowns`.

    One pass over the waits' overlaps with compute kernels, every pair of ranks at once (the rank charged, the rank
    that waited): each pair's waits are merged into one interval set; each interval is joined with the compute
    kernels of the waiting rank that overlap it, chain by chain (a binary search on (chain, time) keys: the kernels of
    a chain are ordered in time); per kernel and pair, the reference of its name on the rank charged is read from all
    ranks' compute kernels sorted once by (rank, name, duration). O((waits + kernels) log), linear in the ranks."""
    op, lo, hi, charged = (np.asarray(x, np.int64) for x in w)
    size = int(start.size)
    comp = np.flatnonzero(~np.asarray(comm, bool))
    if op.size == 0 or comp.size == 0:
        return Slowdowns.none(size)
    rank = np.asarray(k_rank, np.int64)
    pairs, pid = unique_pairs(charged, rank[op])  # (the rank charged, the rank that waited), by the first then the second
    uk, us, ue = iv.grouped_union(pid, lo, hi)  # each pair's waits as one set
    if uk.size == 0:
        return Slowdowns.none(size)
    chain = (rank if lane is None else np.asarray(lane, np.int64))[comp]
    chains, _ = unique_pairs(rank[comp], chain)  # (rank, chain) of the compute kernels, by rank
    c_of = np.searchsorted(chains[0], np.arange(int(rank.max(initial=0)) + 2))
    q_rank = pairs[1][uk]
    n_ch = c_of[q_rank + 1] - c_of[q_rank]  # (each interval asks every compute chain of its waiting rank)
    qi = np.repeat(np.arange(uk.size), n_ch)
    q_chain = chains[1][np.repeat(c_of[q_rank], n_ch) + np.arange(qi.size) - np.repeat(np.cumsum(n_ch) - n_ch, n_ch)]
    k_s, k_e, kq_s, kq_e = keys((chain, start[comp]), (chain, end[comp]), (q_chain, us[qi]), (q_chain, ue[qi]))
    order = np.argsort(k_s, kind="stable")  # (by chain, then start)
    first = np.searchsorted(np.maximum.accumulate(k_e[order]), kq_s, "right")  # (the chain's first kernel ending after)
    count = np.maximum(np.searchsorted(k_s[order], kq_e, "left") - first, 0)  # (... up to the first starting at the end)
    row_q = np.repeat(qi, count)
    o = comp[order[np.arange(row_q.size) + np.repeat(first - (np.cumsum(count) - count), count)]]
    ov = np.minimum(end[o], ue[row_q]) - np.maximum(start[o], us[row_q])
    keep = ov > 0
    (p, o), at = unique_pairs(uk[row_q[keep]], o[keep])  # (a kernel's overlap with one pair's set: the sum of its pieces)
    overlap = np.zeros(p.size, np.int64)
    np.add.at(overlap, at, ov[keep])
    # the reference of each kernel's name on the rank charged: the median of its shortest kernels of the name, as many
    # as the waiting rank ran (all of them where fewer), at least MIN_REFERENCE
    n_codes = int(np.asarray(code).max(initial=0)) + 1
    by_key, by_d = by_key_and_duration(rank[comp] * n_codes + code[comp], d[comp])
    i, r, c = pairs[0][p], pairs[1][p], code[o]
    runs = key_runs(by_key)
    at_i, avail = run_of(runs, by_key.size, i * n_codes + c)
    n = np.minimum(run_of(runs, by_key.size, r * n_codes + c)[1], avail)
    ok = n >= MIN_REFERENCE
    base = np.full(p.size, np.nan)
    base[ok] = (by_d[at_i[ok] + (n[ok] - 1) // 2].astype(np.float64) + by_d[at_i[ok] + n[ok] // 2].astype(np.float64)) / 2
    dd = d[o].astype(np.float64)
    extra = np.where(np.isfinite(base) & (dd <= MAX_SLOWDOWN * base), np.maximum(dd - base, 0), 0)
    part = (extra * overlap / np.maximum(end[o] - start[o], 1)).astype(np.int64)
    got = np.flatnonzero(part > 0)
    got = got[np.lexsort((o[got], i[got]))]  # (by the rank charged, then op)
    return Slowdowns(i[got], o[got], part[got], size)


def key_runs(by_key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The runs of equal keys of ``by_key`` (sorted): each distinct key, where its run starts and where it ends (int64),
    for :func:`run_of`."""
    first = np.flatnonzero(np.r_[True, by_key[1:] != by_key[:-1]]) if by_key.size else np.zeros(0, np.int64)
    return by_key[first], first.astype(np.int64), np.r_[first[1:], by_key.size].astype(np.int64)


def run_of(runs: tuple[np.ndarray, np.ndarray, np.ndarray], size: int, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per query key of ``q``, where its run of equal keys starts in a sorted array of ``size`` keys whose runs are
    ``runs`` (:func:`key_runs`; where the key would go, without one) and how long the run is (0 without one), int64:
    ``searchsorted`` left, and right less left, found among the distinct keys (a few per rank and kernel name) rather
    than every kernel, an array the queries read from the cache (the four searches of :func:`slowdowns` at 4,096 ranks:
    2.3 s -> under 1 s)."""
    distinct, first, ends = runs
    if not distinct.size:
        return np.full(q.size, size, np.int64), np.zeros(q.size, np.int64)
    g = np.searchsorted(distinct, q, "left")
    gi = np.minimum(g, distinct.size - 1)
    hit = (g < distinct.size) & (distinct[gi] == q)
    return np.where(g < distinct.size, first[gi], size), np.where(hit, ends[gi] - first[gi], 0)


def by_key_and_duration(key: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(key, d)`` (int64: a (rank, name) code and a duration per kernel) sorted by key, then duration: one sort of a
    combined int64 where it fits (a lexsort of the two takes 4x as long: 1.06 s against 0.26 at 4M kernels)."""
    span = int(d.max(initial=0)) + 1
    if d.size and int(d.min()) >= 0 and (int(key.max()) + 1) * span < 2**62 and int(key.min()) >= 0:
        both = np.sort(key * span + d)
        return both // span, both % span
    o = np.lexsort((d, key))
    return key[o], d[o]


def charged_waits(arrival: np.ndarray, end: np.ndarray, w: Waits, mem_op: np.ndarray, mem_group: np.ndarray, ranks: int) -> np.ndarray:
    """Per rank index (``ranks`` of them), the waits charged to it in the trace (``w``), measured again on replayed
    ``arrival`` and ``end`` times (the same instances, their last member's arrival as replayed), int64 ns: every rank
    at once."""
    op, _, _, charged = w
    out = np.zeros(ranks, np.int64)
    if op.size == 0 or mem_op.size == 0:
        return out
    low = np.iinfo(np.int64).min
    last = np.full(int(mem_group.max()) + 1, low, np.int64)
    np.maximum.at(last, mem_group, arrival[mem_op])
    bound = np.full(arrival.size, low, np.int64)
    np.maximum.at(bound, mem_op, last[mem_group])
    np.add.at(out, charged, np.maximum(np.minimum(end[op], bound[op]) - arrival[op], 0))
    return out
