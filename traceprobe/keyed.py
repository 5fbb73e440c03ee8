"""Searches within groups (host threads, streams) in one sort: composite int64 keys, group then time.

A question asked once per host thread ("which launch calls of this op's thread fall inside it?") costs a
pass over every event per thread when each thread is picked out with a mask, which is quadratic in the
threads (100,000 threads of one op each took 26 s, 99% of it in those masks). Here every (group, time)
pair becomes one int64 key: ``(group - g0) * S + (time - t0)``, with ``g0`` and ``t0`` the least group and time
given and ``S`` one more than the span of the times, where that fits in 62 bits (no sort at all); else
``group_code * M + time_rank``, with ``group_code`` the group's rank among the groups, ``time_rank`` the rank of
the time among every time given (so equal times give equal keys, and the order of times is kept exactly) and ``M``
one more than the number of distinct times. Either way keys of one group are contiguous and ordered by time, so one
``np.searchsorted`` over sorted keys answers the question for every thread at once, in O(n log n).

:func:`unique_pairs` uses the same kind of key to find the distinct pairs of two integer columns in one 1-D sort.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
"""A one-dimensional int64 array."""


def keys(*pairs: tuple[npt.ArrayLike, npt.ArrayLike]) -> list[I64]:
    """One int64 key array per ``(group, time)`` pair of arrays (of equal length within a pair; groups any
    integers, times int64 ns), all on one scale: for any two keys, ``a < b`` exactly where ``a``'s group is
    smaller, or the groups are equal and ``a``'s time is smaller; ``a == b`` where both are equal.

    Raises:
        ValueError: a pair's arrays differ in length.
    """
    gs = [np.asarray(g, np.int64).ravel() for g, _ in pairs]
    ts = [np.asarray(t, np.int64).ravel() for _, t in pairs]
    if any(g.size != t.size for g, t in zip(gs, ts, strict=True)):
        raise ValueError("a group array and its time array differ in length")
    if not gs or sum(g.size for g in gs) == 0:
        return [np.zeros(0, np.int64) for _ in pairs]
    full = [(g, t) for g, t in zip(gs, ts, strict=True) if g.size]
    g0, t0 = min(int(g.min()) for g, _ in full), min(int(t.min()) for _, t in full)
    span = max(int(t.max()) for _, t in full) - t0 + 1
    if (max(int(g.max()) for g, _ in full) - g0 + 1) * span < 2**62:  # (the times themselves, each group lifted above the last)
        return [(g - g0) * span + (t - t0) for g, t in zip(gs, ts, strict=True)]
    times = np.sort(np.concatenate(ts))
    groups = np.sort(np.concatenate(gs))
    width = np.int64(times.size + 1)  # (ranks are below the count of times, whatever their duplicates)
    return [np.searchsorted(groups, g).astype(np.int64) * width + np.searchsorted(times, t).astype(np.int64)
            for g, t in zip(gs, ts, strict=True)]


def count_between(group: npt.ArrayLike, at: npt.ArrayLike, q_group: npt.ArrayLike, lo: npt.ArrayLike, hi: npt.ArrayLike,
                  lo_side: str = "left", hi_side: str = "right") -> I64:
    """Per query ``i``: how many points ``j`` of the same group (``group[j] == q_group[i]``) have ``at[j]`` between
    ``lo[i]`` and ``hi[i]``: ``lo <= at`` (``lo_side="left"``) or ``lo < at`` (``"right"``), and ``at <= hi``
    (``hi_side="right"``) or ``at < hi`` (``"left"``); numpy's ``searchsorted`` sides, applied within each group
    (int64, one per query).
    """
    k_at, k_lo, k_hi = keys((group, at), (q_group, lo), (q_group, hi))
    k_at.sort()
    side_lo = "left" if lo_side == "left" else "right"
    side_hi = "right" if hi_side == "right" else "left"
    count = np.searchsorted(k_at, k_hi, side=side_hi) - np.searchsorted(k_at, k_lo, side=side_lo)
    return np.maximum(count, 0).astype(np.int64)  # (an empty range, such as ``lo < at < hi`` with lo == hi: none)


def innermost(group: npt.ArrayLike, start: npt.ArrayLike, end: npt.ArrayLike, q_group: npt.ArrayLike,
              at: npt.ArrayLike) -> I64:
    """Per query ``i``: the index of the innermost interval ``[start[j], end[j])`` of its group (``group[j] ==
    q_group[i]``) holding ``at[i]``, -1 where none does or the intervals open there do not nest cleanly (int64, one
    per query). Intervals nest as host ops do on a thread: the innermost is the latest-starting one of the depth of
    the intervals open at ``at``; one pass per depth, over every group at once.
    """
    k_s, k_e, k_at = keys((group, start), (group, end), (q_group, at))
    out = np.full(k_at.size, -1, dtype=np.int64)
    if k_s.size == 0 or k_at.size == 0:
        return out
    o = np.lexsort((-k_e, k_s))  # (by start; an interval before one it holds that starts with it)
    s, e = k_s[o], k_e[o]
    ends = np.sort(e)
    depth = np.arange(o.size) - np.searchsorted(ends, s, "right")  # (intervals open at each one's start, before it)
    want = np.searchsorted(s, k_at, "right") - np.searchsorted(ends, k_at, "right") - 1  # (the depth of the innermost)
    for d in np.unique(want[want >= 0]).tolist():
        level = np.flatnonzero(depth == d)
        q = np.flatnonzero(want == d)
        k = np.searchsorted(s[level], k_at[q], "right") - 1
        ok = k >= 0
        cand = level[np.maximum(k, 0)]
        ok &= e[cand] > k_at[q]
        out[q[ok]] = o[cand[ok]]
    return out


def unique_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``(a, b)`` pairs of two integer arrays of one length: ``(pairs, inverse)``, ``pairs`` (2, P) int64
    sorted by ``a`` then ``b`` and ``inverse`` (K,) int64, each element's pair; what ``numpy.unique(numpy.stack([a, b]),
    axis=1, return_inverse=True)`` gives, by one 1-D unique of a combined key (15x faster: the axis form sorts rows as
    structured values)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    if a.size == 0:
        return np.zeros((2, 0), np.int64), np.zeros(0, np.int64)
    a0, b0 = int(a.min()), int(b.min())
    width = int(b.max()) - b0 + 1
    if (int(a.max()) - a0 + 1) * width >= 1 << 62:  # (no room for a key)
        pairs, inverse = np.unique(np.stack([a, b]), axis=1, return_inverse=True)
        return pairs, inverse.reshape(-1).astype(np.int64)
    key, inverse = np.unique((a - a0) * width + (b - b0), return_inverse=True)
    return np.stack([key // width + a0, key % width + b0]), inverse.reshape(-1).astype(np.int64)
