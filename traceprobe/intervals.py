"""Interval algebra on int64 nanosecond arrays.

Every function here takes and returns half-open intervals ``[start, end)`` as two
equal-length ``numpy.int64`` arrays, ``starts`` and ``ends`` (nanoseconds). An
*interval set* is the normalised form: sorted by start, pairwise disjoint and
non-touching, every interval non-empty. ``union`` turns any list of intervals into
an interval set; the other functions accept raw intervals and normalise them.

All work is vectorized (sort, cumulative max/sum, one pass of numpy); there is no
Python loop per interval. The merge follows HTA's ``merge_kernel_intervals``
(``hta/utils/utils.py``): sort by start, running maximum of ends, a new group
wherever a start lies beyond every earlier end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
"""A one-dimensional int64 array (ns, or group keys)."""

Intervals = tuple[I64, I64]
"""A pair ``(starts, ends)`` of int64 arrays of the same length, in ns."""

ArrayLike = npt.ArrayLike
"""What the functions accept for ``starts``/``ends``/``keys``: arrays or sequences of ints."""


def _i64(values: Any) -> I64:
    return np.asarray(values, dtype=np.int64).ravel()


def _as_pair(starts: ArrayLike, ends: ArrayLike) -> Intervals:
    s, e = _i64(starts), _i64(ends)
    if s.shape != e.shape:
        raise ValueError(f"starts and ends differ in length ({s.size} vs {e.size})")
    keep = e > s
    if not keep.all():
        s, e = s[keep], e[keep]
    return s, e


def empty() -> Intervals:
    """The empty interval set."""
    return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)


def distinct(values: ArrayLike) -> np.ndarray:
    """The distinct values of an array, increasing: ``np.unique(values)`` by one sort (numpy 2's hashing
    ``np.unique`` takes 10-50x as long on large int64 arrays: 0.40 s against 0.009 s for 400,000 ids)."""
    a = np.sort(np.asarray(values).ravel())
    if a.size < 2:
        return a
    keep = np.empty(a.size, bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def union(starts: ArrayLike, ends: ArrayLike) -> Intervals:
    """Merge intervals into a normalised interval set.

    Args:
        starts, ends: int64 ns arrays of equal length; intervals with
            ``end <= start`` are empty and dropped.

    Returns:
        ``(starts, ends)`` sorted, disjoint, with touching intervals joined; always
        new arrays. Input that is normalised already (the figures union the same
        sets many times) is only checked, in one pass, not sorted again.
    """
    s, e = _as_pair(starts, ends)
    if s.size == 0:
        return empty()
    if s.size == 1 or (s[1:] > e[:-1]).all():  # normalised already (a set unioned before): no sort
        return np.array(s, dtype=np.int64), np.array(e, dtype=np.int64)  # (new arrays, as below)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    run_max = np.maximum.accumulate(e)
    # a new group starts where this start lies beyond every earlier end
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_max[:-1]
    group_first = np.flatnonzero(new)
    group_last = np.append(group_first[1:] - 1, s.size - 1)
    return s[group_first], run_max[group_last]


def coverage_at_least(sets: Sequence[Intervals], k: int) -> Intervals:
    """Where at least ``k`` of the given interval sets hold at once.

    Each element of ``sets`` is first normalised with :func:`union`, so one set
    counts once however many of its own intervals overlap. ``k=1`` gives the union
    of all sets, ``k=len(sets)`` their intersection, ``k=2`` "two or more busy"
    (the cross-device and cross-stream concurrency figures). ``k=1`` is computed
    as one :func:`union` of every interval.

    Returns:
        a normalised interval set.
    """
    if k < 1:
        raise ValueError("k must be >= 1")
    if len(sets) < k:
        return empty()
    if k == 1:  # the union of every interval: one sort of n, not of the 2n ends and starts
        pairs = [_as_pair(s, e) for s, e in sets]
        return union(np.concatenate([p[0] for p in pairs]), np.concatenate([p[1] for p in pairs]))
    norm = [union(s, e) for s, e in sets]
    starts = np.concatenate([n[0] for n in norm])
    ends = np.concatenate([n[1] for n in norm])
    if starts.size == 0:
        return empty()
    times = np.concatenate([starts, ends])
    delta = np.concatenate([np.ones(starts.size, np.int64), -np.ones(ends.size, np.int64)])
    # at equal times, ends (-1) before starts (+1): intervals are half-open
    order = np.lexsort((delta, times))
    times, delta = times[order], delta[order]
    count = np.cumsum(delta)
    # count[i] holds on [times[i], times[i+1])
    seg_s, seg_e = times[:-1], times[1:]
    hit = (count[:-1] >= k) & (seg_e > seg_s)
    return union(seg_s[hit], seg_e[hit])


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two interval collections (each normalised first).

    The set ``coverage_at_least([a, b], 2)`` gives, found without sorting the
    ends of both: each interval of ``a`` finds, by binary search, the run of
    ``b``'s intervals that overlap it, and each such pair gives one interval
    (the later start, the earlier end). The pieces come out sorted, disjoint
    and non-touching, since both sets are. 2.6-2.8x faster than the sweep for
    sets of 2x10^4-10^5 intervals, the same below 2x10^3.
    """
    (as_, ae), (bs, be) = union(*a), union(*b)
    return _intersect_sets(as_, ae, bs, be)


def _intersect_sets(as_: I64, ae: I64, bs: I64, be: I64) -> Intervals:
    """:func:`intersect` of two normalised interval sets."""
    if as_.size == 0 or bs.size == 0:
        return empty()
    first = np.searchsorted(be, as_, side="right")  # the first interval of b ending after a's start
    stop = np.searchsorted(bs, ae, side="left")  # the first interval of b starting at or after a's end
    count = np.maximum(stop - first, 0)
    total = int(count.sum())
    if total == 0:
        return empty()
    ai = np.repeat(np.arange(as_.size), count)
    bj = np.arange(total) + np.repeat(first - (np.cumsum(count) - count), count)  # first[i], first[i] + 1, ...
    return np.maximum(as_[ai], bs[bj]), np.minimum(ae[ai], be[bj])


_I64_MIN, _I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """The part of ``a`` not covered by ``b``, as a normalised interval set: ``a``
    intersected (:func:`intersect`) with the gaps of ``b`` (``b``'s complement over
    all of int64)."""
    ua = union(*a)
    if ua[0].size == 0:
        return ua
    ub = union(*b)
    if ub[0].size == 0:
        return ua
    gap_s = np.concatenate([[_I64_MIN], ub[1]])
    gap_e = np.concatenate([ub[0], [_I64_MAX]])
    keep = gap_e > gap_s  # (only the outer two can be empty: b's intervals do not touch)
    return _intersect_sets(ua[0], ua[1], gap_s[keep], gap_e[keep])


def length(iv: Intervals) -> int:
    """Total length in ns of an already normalised interval set."""
    return int((iv[1] - iv[0]).sum())


def grouped_running_max(k: I64, e: I64) -> I64:
    """Running maximum of ``e`` within runs of equal ``k`` (``k`` sorted)."""
    group: I64 = np.empty(k.size, dtype=np.int64)
    group[0] = 0
    np.cumsum(k[1:] != k[:-1], out=group[1:])
    if group[-1] == 0:
        return np.maximum.accumulate(e)
    lo, hi = int(e.min()), int(e.max())
    span = hi - lo + 1
    if (int(group[-1]) + 1) * span < 2**62:
        # lift each group above every earlier one: one running max serves all groups
        lift = group * span
        return np.maximum.accumulate((e - lo) + lift) - lift + lo
    # values too far apart to lift: lift their ranks instead (order-preserving, at most k.size apart)
    uniq, rank = np.unique(e, return_inverse=True)
    lift = group * uniq.size
    return uniq[np.maximum.accumulate(rank.astype(np.int64) + lift) - lift]


def grouped_union(keys: ArrayLike, starts: ArrayLike, ends: ArrayLike) -> tuple[I64, I64, I64]:
    """:func:`union` within each group, for many groups at once.

    Args:
        keys: int64 group key per interval (for example a (device, stream) code).
        starts, ends: int64 ns arrays.

    Returns:
        ``(keys, starts, ends)`` of the merged intervals, sorted by key then start.
    """
    k, s, e = _i64(keys), _i64(starts), _i64(ends)
    keep = e > s
    k, s, e = k[keep], s[keep], e[keep]
    if s.size == 0:
        return k, s, e
    order = np.lexsort((s, k))
    k, s, e = k[order], s[order], e[order]
    run_max = grouped_running_max(k, e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = (k[1:] != k[:-1]) | (s[1:] > run_max[:-1])
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, s.size - 1)
    return k[first], s[first], run_max[last]


def grouped_coverage(keys: ArrayLike, starts: ArrayLike, ends: ArrayLike, at_least: int, size: int) -> I64:
    """Per group, the time covered by at least ``at_least`` of its intervals at once.

    The grouped form of ``length(coverage_at_least(sets, at_least))``: where that
    function takes sets, this one counts intervals, so for ``at_least`` > 1 the
    intervals of one set must already be disjoint (as :func:`grouped_union`
    returns them, one set per key of a finer grouping). With ``at_least=1`` it is
    the length of each group's union, of any intervals; with 2, "two or more at
    once" (two devices, a copy under compute...).

    Args:
        keys: int64 group key per interval, each in ``[0, size)``.
        starts, ends: int64 ns arrays; empty intervals are ignored.
        at_least: the coverage counted (>= 1).
        size: number of groups.

    Returns:
        int64 array of ``size`` lengths in ns (0 for a group without intervals).

    Raises:
        ValueError: ``at_least < 1``, a key outside ``[0, size)``, or arrays of different lengths.
    """
    if at_least < 1:
        raise ValueError("at_least must be >= 1")
    k, s, e = _i64(keys), _i64(starts), _i64(ends)
    if not (k.size == s.size == e.size):
        raise ValueError(f"keys, starts and ends differ in length ({k.size}, {s.size}, {e.size})")
    out: I64 = np.zeros(size, dtype=np.int64)
    keep = e > s
    k, s, e = k[keep], s[keep], e[keep]
    if k.size == 0:
        return out
    if int(k.min()) < 0 or int(k.max()) >= size:
        raise ValueError(f"group keys must lie in [0, {size})")
    times = np.concatenate([s, e])
    delta = np.concatenate([np.ones(s.size, np.int64), -np.ones(e.size, np.int64)])
    kk = np.concatenate([k, k])
    order = np.lexsort((delta, times, kk))
    times, delta, kk = times[order], delta[order], kk[order]
    # each group's deltas sum to 0, so one running sum serves every group
    count = np.cumsum(delta)
    seg = times[1:] - times[:-1]
    hit = (count[:-1] >= at_least) & (kk[1:] == kk[:-1]) & (seg > 0)
    np.add.at(out, kk[:-1][hit], seg[hit])
    return out


def measure(iv: Intervals, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Length in ns of a normalised interval set inside each window ``[lo[i], hi[i])``.

    Vectorized over windows: the covered length before time t is
    F(t) = (lengths of intervals ending by t) + (t - start of the interval holding
    t), found with one ``searchsorted``; a window's share is F(hi) - F(lo).
    Windows may overlap; a window with ``hi <= lo`` measures 0.

    Args:
        iv: a normalised interval set (from :func:`union` or the set operations).
        lo, hi: int64 ns arrays of equal length.

    Returns:
        int64 array, one length per window.
    """
    lo = np.asarray(lo, dtype=np.int64).ravel()
    hi = np.maximum(np.asarray(hi, dtype=np.int64).ravel(), lo)
    s, e = iv
    if s.size == 0:
        return np.zeros(lo.size, dtype=np.int64)
    cum = np.concatenate([[0], np.cumsum(e - s)])

    def before(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(e, t, side="right")  # intervals wholly ended by t
        inside = np.minimum(i, s.size - 1)
        part = np.where((i < s.size) & (s[inside] < t), t - s[inside], 0)
        return cum[i] + part

    return before(hi) - before(lo)


def grouped_clip(set_keys: ArrayLike, set_starts: ArrayLike, set_ends: ArrayLike,
                 keys: ArrayLike, starts: ArrayLike, ends: ArrayLike) -> tuple[I64, I64, I64]:
    """The pieces of each group's interval set inside each interval, for many groups at once.

    The grouped form of ``intersect((set_starts, set_ends), ([start], [end]))`` per interval: each interval
    ``i`` finds, by one binary search on (key, time), the run of its group's set intervals that overlap it
    (as :func:`intersect` does), and each gives a piece (the later start, the earlier end).

    Args:
        set_keys, set_starts, set_ends: the sets, normalised within each key and sorted by key then start
            (as :func:`grouped_union` returns them).
        keys, starts, ends: the intervals (any order; they may overlap; empty ones give no piece).

    Returns:
        ``(index, starts, ends)`` of the pieces: ``index`` into the intervals, ordered by it, then by start;
        the pieces of one interval form a normalised set.

    Raises:
        ValueError: arrays of one side differ in length.
    """
    ak, as_, ae = _i64(set_keys), _i64(set_starts), _i64(set_ends)
    qk, qs, qe = _i64(keys), _i64(starts), _i64(ends)
    if not (ak.size == as_.size == ae.size) or not (qk.size == qs.size == qe.size):
        raise ValueError("keys, starts and ends differ in length")
    if ak.size == 0 or qk.size == 0:
        return empty()[0], *empty()
    # (key, time) as one int64 keeping their order: each key lifted above every earlier one (as _grouped_cummax),
    # or, where times lie too far apart for that, each time replaced by its rank among all times
    kmin, kmax = min(int(ak.min()), int(qk.min())), max(int(ak.max()), int(qk.max()))
    tmin = min(int(x.min()) for x in (as_, ae, qs, qe))
    span = max(int(x.max()) for x in (as_, ae, qs, qe)) - tmin + 1
    if (kmax - kmin + 1) * span < 2**62:
        def code(k: I64, t: I64) -> I64:
            return (k - kmin) * span + (t - tmin)
    else:
        times = distinct(np.concatenate([as_, ae, qs, qe]))
        if (kmax - kmin + 1) * (times.size + 1) >= 2**62:
            raise ValueError("too many groups and times to order as one int64")

        def code(k: I64, t: I64) -> I64:
            return (k - kmin) * (times.size + 1) + np.searchsorted(times, t)

    first = np.searchsorted(code(ak, ae), code(qk, qs), side="right")  # the group's first interval ending after the start
    stop = np.searchsorted(code(ak, as_), code(qk, qe), side="left")  # the first starting at or after the end (or of a later group)
    count = np.maximum(stop - first, 0)
    total = int(count.sum())
    if total == 0:
        return empty()[0], *empty()
    qi = np.repeat(np.arange(qk.size, dtype=np.int64), count)
    aj = np.arange(total) + np.repeat(first - (np.cumsum(count) - count), count)
    s, e = np.maximum(qs[qi], as_[aj]), np.minimum(qe[qi], ae[aj])
    keep = e > s
    return qi[keep], s[keep], e[keep]


def grouped_measure(keys: ArrayLike, starts: ArrayLike, ends: ArrayLike, lo: ArrayLike, hi: ArrayLike, size: int) -> I64:
    """:func:`measure` of each group's set inside each window, for many groups at once.

    Each group's set is lifted above every earlier one on one time axis (as :func:`grouped_running_max` lifts
    them), so one :func:`measure` over all the sets serves every group and window: no loop over groups.

    Args:
        keys, starts, ends: the sets, normalised within each key and sorted by key then start (as
            :func:`grouped_union` returns them), keys in ``[0, size)``.
        lo, hi: int64 ns arrays of equal length: the windows (``hi <= lo`` measures 0).
        size: number of groups.

    Returns:
        int64 array of shape ``(size, len(lo))``: ``out[k, i]`` is the length of group ``k``'s set inside
        ``[lo[i], hi[i])``.
    """
    k, s, e = _i64(keys), _i64(starts), _i64(ends)
    wlo = _i64(lo)
    whi = np.maximum(_i64(hi), wlo)
    out: I64 = np.zeros((size, wlo.size), dtype=np.int64)
    if s.size == 0 or wlo.size == 0 or size == 0:
        return out
    tmin = min(int(s.min()), int(wlo.min()))
    span = max(int(e.max()), int(whi.max())) - tmin + 1
    if size * span >= 2**62:  # too far apart to lift: one group at a time
        bounds = np.searchsorted(k, np.arange(size + 1))
        for g in range(size):
            a, b = int(bounds[g]), int(bounds[g + 1])
            if b > a:
                out[g] = measure((s[a:b], e[a:b]), wlo, whi)
        return out
    lift = k * span - tmin
    base = (np.arange(size, dtype=np.int64) * span - tmin)[:, None]
    lengths: I64 = measure((s + lift, e + lift), (wlo[None, :] + base).ravel(), (whi[None, :] + base).ravel())
    out[:] = lengths.reshape((size, wlo.size))  # pyright: ignore[reportUnknownMemberType]
    return out
