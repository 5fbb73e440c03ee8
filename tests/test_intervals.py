"""traceprobe.intervals against a brute-force reference.

The reference paints half-open intervals ``[s, e)`` onto a boolean numpy grid of
small integer times (0 .. SPAN ns) and reads lengths and interval sets back off
it. Every function is checked for its total length *and* its exact normalised
output (sorted, disjoint, non-touching, non-empty; the grid rebuilt from the
output must equal the reference grid).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceprobe import intervals as iv

SPAN = 300
BIG = 4_500_000_000_000_000  # large offset: int64 handling (fits, ~half of int64 max)

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- reference -----------------------------------------------------------------


def paint(starts, ends, offset: int = 0) -> np.ndarray:
    """Boolean grid over [0, SPAN): True where some [s, e) covers t (empty intervals paint nothing)."""
    g = np.zeros(SPAN, dtype=bool)
    for s, e in zip(np.asarray(starts).tolist(), np.asarray(ends).tolist()):
        s, e = s - offset, e - offset
        if e > s:
            g[s:e] = True
    return g


def count_grid(sets, offset: int = 0) -> np.ndarray:
    """How many of the interval collections cover each time (each collection counts once)."""
    return np.sum([paint(s, e, offset).astype(np.int64) for s, e in sets], axis=0) if sets else np.zeros(SPAN, np.int64)


def grid_to_set(g: np.ndarray) -> tuple[list[int], list[int]]:
    """Maximal runs of True as a normalised interval set."""
    padded = np.concatenate([[False], g, [False]]).astype(np.int8)
    d = np.diff(padded)
    return np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()


def assert_normalised(out, expected_grid: np.ndarray, offset: int = 0) -> None:
    s, e = out
    assert isinstance(s, np.ndarray) and isinstance(e, np.ndarray)
    assert s.dtype == np.int64 and e.dtype == np.int64
    assert s.ndim == 1 and s.shape == e.shape
    if s.size:
        assert (e > s).all(), "empty interval in output"
        assert (s[1:] > e[:-1]).all(), "output not sorted, overlapping or touching"
    # the grid rebuilt from the output equals the reference
    got = paint(s, e, offset)
    np.testing.assert_array_equal(got, expected_grid)
    # normalised form is unique: it equals the runs of the reference grid exactly
    rs, re_ = grid_to_set(expected_grid)
    assert (s - offset).tolist() == rs
    assert (e - offset).tolist() == re_
    assert iv.length(out) == int(expected_grid.sum())


# --- strategies ----------------------------------------------------------------


_SHAPES = ("random", "random", "empty", "dup", "touch_after", "touch_before", "nested", "point")


def _build(spec) -> tuple[np.ndarray, np.ndarray]:
    """Raw intervals from (shape, a, b, j) tuples; shapes refer back to earlier intervals."""
    starts: list[int] = []
    ends: list[int] = []
    for shape, a, b, j in spec:
        if shape in ("dup", "touch_after", "touch_before", "nested") and starts:
            s0, e0 = starts[j % len(starts)], ends[j % len(starts)]
            lo, hi = min(s0, e0), max(s0, e0)
            if shape == "dup":
                s, e = s0, e0
            elif shape == "touch_after":  # starts where the earlier one ends
                s, e = e0, max(e0, max(a, b))
            elif shape == "touch_before":  # ends where the earlier one starts
                s, e = min(s0, min(a, b)), s0
            else:  # nested inside the earlier one, possibly empty
                x, y = sorted((lo + a % (hi - lo + 1), lo + b % (hi - lo + 1)))
                s, e = x, y
        elif shape == "empty":  # end <= start
            s, e = max(a, b), min(a, b)
        elif shape == "point":
            s = min(a, SPAN - 1)
            e = s + 1
        else:
            s, e = a, b
        starts.append(s)
        ends.append(e)
    return np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)


_N_SHAPES = len(_SHAPES)
_ITEM_RANGE = _N_SHAPES * (SPAN + 1) * (SPAN + 1) * 64


def _decode(x: int) -> tuple[str, int, int, int]:
    x, shape = divmod(x, _N_SHAPES)
    x, a = divmod(x, SPAN + 1)
    j, b = divmod(x, SPAN + 1)
    return _SHAPES[shape], a, b, j


def raw_intervals(max_size: int = 12):
    """Raw intervals in [0, SPAN]: random, empty (end <= start), duplicated, touching, nested.

    One integer is drawn per interval and decoded into (shape, a, b, j): a quarter
    of the draws of a tuple strategy, which keeps the suite fast.
    """
    return st.lists(st.integers(0, _ITEM_RANGE - 1).map(_decode), max_size=max_size).map(_build)


offsets = st.sampled_from([0, BIG])


def shifted(pair, offset):
    return pair[0] + offset, pair[1] + offset


# --- union / total ---------------------------------------------------------------


@SETTINGS
@given(raw_intervals(), offsets)
def test_union_and_total_match_grid(pair, offset):
    s, e = shifted(pair, offset)
    grid = paint(s, e, offset)
    out = iv.union(s, e)
    assert_normalised(out, grid, offset)  # also checks iv.length(out)
    assert isinstance(iv.length(out), int)


@SETTINGS
@given(raw_intervals())
def test_union_is_idempotent_order_free_and_pure(pair):
    s, e = pair
    s0, e0 = s.copy(), e.copy()
    u = iv.union(s, e)
    np.testing.assert_array_equal(s, s0)  # inputs not mutated
    np.testing.assert_array_equal(e, e0)
    again = iv.union(*u)  # a normalised set: returned as it is, as new arrays (never the caller's)
    assert not np.shares_memory(again[0], u[0]) and not np.shares_memory(again[1], u[1])
    for other in (
        again,  # idempotent
        iv.union(s[::-1], e[::-1]),  # input order does not matter
        iv.union(s.tolist(), e.tolist()),  # plain lists accepted
    ):
        np.testing.assert_array_equal(u[0], other[0])
        np.testing.assert_array_equal(u[1], other[1])


# --- coverage_at_least / intersect / subtract ----------------------------------------


@SETTINGS
@given(st.lists(raw_intervals(max_size=8), min_size=0, max_size=5), st.integers(1, 3), offsets)
def test_coverage_at_least_matches_grid(sets, k, offset):
    sets = [shifted(p, offset) for p in sets]
    out = iv.coverage_at_least(sets, k)
    expected = count_grid(sets, offset) >= k
    assert_normalised(out, expected, offset)


@SETTINGS
@given(raw_intervals(), raw_intervals(), offsets)
def test_intersect_matches_grid(a, b, offset):
    a, b = shifted(a, offset), shifted(b, offset)
    out = iv.intersect(a, b)
    assert_normalised(out, paint(*a, offset) & paint(*b, offset), offset)


@SETTINGS
@given(raw_intervals(), raw_intervals(), offsets)
def test_subtract_matches_grid(a, b, offset):
    a, b = shifted(a, offset), shifted(b, offset)
    out = iv.subtract(a, b)
    assert_normalised(out, paint(*a, offset) & ~paint(*b, offset), offset)


@SETTINGS
@given(raw_intervals(), raw_intervals(), offsets)
def test_intersect_and_subtract_equal_the_sweep(a, b, offset):
    """intersect and subtract search one set in the other; the sweep of both sets' ends (coverage_at_least)
    gives the same arrays."""
    a, b = shifted(a, offset), shifted(b, offset)
    bs, be = iv.union(*b)
    edges = [-(2**62), *np.ravel(np.column_stack([bs, be])).tolist(), 2**62]  # b's gaps, in a Python loop's terms
    gaps = (np.array(edges[0::2], dtype=np.int64), np.array(edges[1::2], dtype=np.int64))
    for got, swept in (
        (iv.intersect(a, b), iv.coverage_at_least([a, b], 2)),
        (iv.subtract(a, b), iv.coverage_at_least([a, gaps], 2)),
    ):
        np.testing.assert_array_equal(got[0], swept[0])
        np.testing.assert_array_equal(got[1], swept[1])
        assert got[0].dtype == got[1].dtype == np.int64


def test_subtract_at_the_ends_of_int64():
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    assert as_lists(iv.subtract((arr(lo), arr(hi)), (arr(lo), arr(0)))) == ([0], [hi])
    assert as_lists(iv.subtract((arr(lo), arr(hi)), (arr(5), arr(hi)))) == ([lo], [5])
    assert as_lists(iv.subtract((arr(lo, 10), arr(0, hi)), (arr(-5, 20), arr(15, 30)))) == ([lo, 15, 30], [-5, 20, hi])
    assert as_lists(iv.intersect((arr(lo), arr(hi)), (arr(lo, 7), arr(3, hi)))) == ([lo, 7], [3, hi])


@SETTINGS
@given(raw_intervals(), raw_intervals())
def test_algebra_identities(a, b):
    ga, gb = paint(*a), paint(*b)
    union_len = iv.length(iv.coverage_at_least([a, b], 1))
    inter_len = iv.length(iv.intersect(a, b))
    assert union_len == int((ga | gb).sum())
    len_a, len_b = iv.length(iv.union(*a)), iv.length(iv.union(*b))
    assert union_len + inter_len == len_a + len_b
    assert iv.length(iv.subtract(a, b)) + inter_len == len_a


# --- grouped_union -------------------------------------------------------------------


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(-2, 4), raw_intervals(max_size=6)), min_size=0, max_size=6),
    offsets,
    st.integers(0, 2**32),
)
def test_grouped_union_matches_per_group_union(groups, offset, seed):
    keys = np.concatenate([np.full(p[0].size, k, np.int64) for k, p in groups]) if groups else np.zeros(0, np.int64)
    s = np.concatenate([p[0] for _, p in groups]) + offset if groups else np.zeros(0, np.int64)
    e = np.concatenate([p[1] for _, p in groups]) + offset if groups else np.zeros(0, np.int64)
    perm = np.random.default_rng(seed).permutation(s.size)  # groups interleaved
    keys, s, e = keys[perm], s[perm], e[perm]
    ok, os_, oe = iv.grouped_union(keys, s, e)
    for arr in (ok, os_, oe):
        assert isinstance(arr, np.ndarray) and arr.dtype == np.int64
    assert ok.shape == os_.shape == oe.shape
    # sorted by key then start
    if ok.size:
        assert (np.diff(ok) >= 0).all()
    exp_k: list[int] = []
    exp_s: list[int] = []
    exp_e: list[int] = []
    for key in sorted(set(keys.tolist())):
        m = keys == key
        rs, re_ = grid_to_set(paint(s[m], e[m], offset))
        exp_k += [key] * len(rs)
        exp_s += [x + offset for x in rs]
        exp_e += [x + offset for x in re_]
    assert ok.tolist() == exp_k
    assert os_.tolist() == exp_s
    assert oe.tolist() == exp_e
    # within each group the output is a normalised set
    for key in np.unique(ok).tolist():
        m = ok == key
        assert_normalised((os_[m], oe[m]), paint(s[keys == key], e[keys == key], offset), offset)


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(-(2**62), 2**62), st.integers(0, 2**10)), max_size=12),
    st.integers(0, 2**32),
)
def test_grouped_union_far_apart_values(items, seed):
    """Groups whose times lie up to 2**63 apart (the ranked path of the grouped running max)."""
    keys = np.array([k for k, _, _ in items], dtype=np.int64)
    s = np.array([a for _, a, _ in items], dtype=np.int64)
    e = s + np.array([d for _, _, d in items], dtype=np.int64)
    perm = np.random.default_rng(seed).permutation(s.size)
    keys, s, e = keys[perm], s[perm], e[perm]
    ok, os_, oe = iv.grouped_union(keys, s, e)
    got = list(zip(ok.tolist(), os_.tolist(), oe.tolist()))
    want = []
    for key in sorted(set(keys.tolist())):
        m = keys == key
        u = iv.union(s[m], e[m])
        want += [(key, a, b) for a, b in zip(u[0].tolist(), u[1].tolist())]
    assert got == want
    # union itself against a plain sweep over sorted intervals (no grid: times are huge)
    for key in set(keys.tolist()):
        m = keys == key
        ref: list[list[int]] = []
        for a, b in sorted(zip(s[m].tolist(), e[m].tolist())):
            if b <= a:
                continue
            if ref and a <= ref[-1][1]:
                ref[-1][1] = max(ref[-1][1], b)
            else:
                ref.append([a, b])
        u = iv.union(s[m], e[m])
        assert [list(x) for x in zip(u[0].tolist(), u[1].tolist())] == ref


# --- examples --------------------------------------------------------------------


def arr(*xs):
    return np.array(xs, dtype=np.int64)


def as_lists(p):
    return p[0].tolist(), p[1].tolist()


def test_union_examples():
    # overlapping, touching (joined), nested, duplicate, empty and reversed dropped
    out = iv.union(arr(0, 5, 10, 20, 20, 30, 40, 50), arr(6, 10, 12, 25, 25, 30, 35, 60))
    assert as_lists(out) == ([0, 20, 50], [12, 25, 60])
    assert iv.length(out) == 12 + 5 + 10
    assert as_lists(iv.union(arr(0, 2), arr(10, 3))) == ([0], [10])  # nested
    assert as_lists(iv.union(arr(0, 5, 9), arr(5, 7, 9))) == ([0], [7])  # sorted, but touching: joined
    assert as_lists(iv.union(arr(0, 3, 10), arr(2, 3, 12))) == ([0, 10], [2, 12])  # sorted and disjoint, an empty one dropped


def test_empty_inputs():
    for out in (
        iv.union(arr(), arr()),
        iv.union(arr(5), arr(5)),
        iv.empty(),
        iv.coverage_at_least([], 1),
        iv.coverage_at_least([(arr(), arr())], 1),
        iv.coverage_at_least([(arr(0), arr(10))], 2),
        iv.intersect((arr(), arr()), (arr(0), arr(10))),
        iv.subtract((arr(), arr()), (arr(0), arr(10))),
        iv.subtract((arr(0), arr(10)), (arr(-5), arr(20))),
    ):
        assert out[0].dtype == np.int64 and out[1].dtype == np.int64
        assert out[0].size == 0 and out[1].size == 0
    assert iv.length(iv.empty()) == 0
    k, s, e = iv.grouped_union(arr(), arr(), arr())
    assert k.size == s.size == e.size == 0


def test_coverage_examples():
    a = (arr(0, 20), arr(10, 30))
    b = (arr(5), arr(25))
    c = (arr(8, 8), arr(22, 22))  # duplicates count once
    assert as_lists(iv.coverage_at_least([a, b, c], 1)) == ([0], [30])
    assert as_lists(iv.coverage_at_least([a, b, c], 2)) == ([5], [25])
    assert as_lists(iv.coverage_at_least([a, b, c], 3)) == ([8, 20], [10, 22])
    assert as_lists(iv.coverage_at_least([a, b, c], 4)) == ([], [])
    # touching intervals of different sets do not overlap (half-open)
    assert as_lists(iv.intersect((arr(0), arr(10)), (arr(10), arr(20)))) == ([], [])
    assert as_lists(iv.coverage_at_least([(arr(0), arr(10)), (arr(10), arr(20))], 1)) == ([0], [20])
    with pytest.raises(ValueError):
        iv.coverage_at_least([a], 0)
    for k in (1, 2):  # a set whose starts and ends differ in length, at k=1 (one union of all) as at k=2
        with pytest.raises(ValueError, match="differ in length"):
            iv.coverage_at_least([a, (arr(0, 1), arr(5))], k)


def test_subtract_examples():
    assert as_lists(iv.subtract((arr(0), arr(100)), (arr(10, 50, 90), arr(20, 60, 120)))) == ([0, 20, 60], [10, 50, 90])
    assert as_lists(iv.subtract((arr(0), arr(10)), (arr(10), arr(20)))) == ([0], [10])
    # |M \ C|: the part of M (a copy, say) outside C (compute), as exposed time is defined
    assert iv.length(iv.subtract((arr(0, 40), arr(30, 70)), (arr(10, 60), arr(20, 65)))) == 10 + 10 + 20 + 5


def test_grouped_union_example():
    k, s, e = iv.grouped_union(arr(2, 1, 2, 1, 2), arr(0, 0, 10, 5, 40), arr(10, 3, 20, 9, 30))
    assert (k.tolist(), s.tolist(), e.tolist()) == ([1, 1, 2], [0, 5, 0], [3, 9, 20])


def test_mismatched_lengths_raise():
    with pytest.raises(ValueError):
        iv.union(arr(0, 1), arr(5))


def test_large_offsets_example():
    # near Kineto absolute timestamps in ns, and far beyond (2**62): still exact
    for base in (4_526_647_612_879_555, BIG, 2**62):
        s = arr(0, 1, 7) + base
        e = arr(3, 5, 8) + base
        out = iv.union(s, e)
        assert as_lists(out) == ([base, base + 7], [base + 5, base + 8])
        assert iv.length(out) == 6
        k, gs, ge = iv.grouped_union(arr(0, 0, 0), s, e)
        assert gs.tolist() == [base, base + 7] and ge.tolist() == [base + 5, base + 8]
        assert as_lists(iv.intersect((s, e), (arr(2) + base, arr(100) + base))) == ([base + 2, base + 7], [base + 5, base + 8])
        assert as_lists(iv.subtract((s, e), (arr(2) + base, arr(100) + base))) == ([base], [base + 2])


# --- grouped_coverage ----------------------------------------------------------------


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(0, 3), st.lists(raw_intervals(max_size=5), max_size=4)), max_size=5),
    st.integers(1, 4),
    offsets,
    st.integers(0, 2**32),
)
def test_grouped_coverage_matches_grid_count(groups, at_least, offset, seed):
    """Per group: the grid cells painted by at least ``at_least`` of the group's sets (each set unioned first)."""
    keys, s, e = [], [], []
    for key, sets in groups:
        for a, b in sets:
            u = iv.union(a, b)  # one set counts once: its intervals disjoint, as the function requires
            keys += [key] * u[0].size
            s += (u[0] + offset).tolist()
            e += (u[1] + offset).tolist()
    expected = np.zeros(4, np.int64)  # a key drawn twice holds the sets of both draws
    for key in range(4):
        count = np.zeros(SPAN, np.int64)
        for k2, sets in groups:
            if k2 == key:
                for a, b in sets:
                    count += paint(a, b)
        expected[key] = int((count >= at_least).sum())
    perm = np.random.default_rng(seed).permutation(len(s))
    k, s_, e_ = (np.array(x, dtype=np.int64)[perm] for x in (keys, s, e))
    got = iv.grouped_coverage(k, s_, e_, at_least, 4)
    assert got.dtype == np.int64 and got.tolist() == expected.tolist()


def test_grouped_coverage_example_and_errors():
    # group 0: [0,10) and [5,20): 20 ns covered, 5 ns twice; group 2: [100,130) once; group 1 empty
    k, s, e = arr(0, 0, 2, 2), arr(0, 5, 100, 130), arr(10, 20, 130, 130)
    assert iv.grouped_coverage(k, s, e, 1, 3).tolist() == [20, 0, 30]
    assert iv.grouped_coverage(k, s, e, 2, 3).tolist() == [5, 0, 0]
    assert iv.grouped_coverage(arr(), arr(), arr(), 1, 2).tolist() == [0, 0]
    with pytest.raises(ValueError, match="at_least"):
        iv.grouped_coverage(k, s, e, 0, 3)
    with pytest.raises(ValueError, match="group keys"):
        iv.grouped_coverage(k, s, e, 1, 2)
    with pytest.raises(ValueError, match="differ in length"):
        iv.grouped_coverage(arr(0), arr(0, 1), arr(1, 2), 1, 1)


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(-2, 3), raw_intervals(max_size=6)), max_size=5),
    raw_intervals(max_size=8),
    st.lists(st.integers(-2, 4), min_size=8, max_size=8),
    offsets,
)
def test_grouped_clip_matches_grid(groups, queries, qkeys, offset):
    # the sets: each key's drawn intervals (a key drawn twice holds both), normalised by grouped_union
    keys = np.concatenate([np.full(p[0].size, k, np.int64) for k, p in groups]) if groups else np.zeros(0, np.int64)
    s = np.concatenate([p[0] for _, p in groups]) if groups else np.zeros(0, np.int64)
    e = np.concatenate([p[1] for _, p in groups]) if groups else np.zeros(0, np.int64)
    sk, ss, se = iv.grouped_union(keys, s + offset, e + offset)
    qk = np.array(qkeys[: queries[0].size], dtype=np.int64)
    qi, ps, pe = iv.grouped_clip(sk, ss, se, qk, queries[0] + offset, queries[1] + offset)
    assert qi.dtype == ps.dtype == pe.dtype == np.int64
    assert (np.diff(qi) >= 0).all()
    for i in range(qk.size):
        want = paint(s[keys == qk[i]], e[keys == qk[i]]) & paint(queries[0][i : i + 1], queries[1][i : i + 1])
        mine = qi == i
        assert (np.diff(ps[mine]) > 0).all() and (ps[mine][1:] > pe[mine][:-1]).all()
        assert (paint(ps[mine], pe[mine], offset) == want).all()


def test_grouped_clip_example():
    # group 1: [0, 10) and [20, 30); group 5: [5, 50); queries: [5, 25) of 1, [0, 100) of 5, [12, 18) of 1, [0, 9) of 3
    qi, s, e = iv.grouped_clip(arr(1, 1, 5), arr(0, 20, 5), arr(10, 30, 50), arr(1, 5, 1, 3), arr(5, 0, 12, 0), arr(25, 100, 18, 9))
    assert (qi.tolist(), s.tolist(), e.tolist()) == ([0, 0, 1], [5, 20, 5], [10, 25, 50])
    # times across all of int64: ordered by their ranks instead of lifted
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    qi, s, e = iv.grouped_clip(arr(0, 1), arr(lo, -5), arr(0, hi), arr(1, 0, 1), arr(lo, lo + 3, 0), arr(-4, 7, hi))
    assert (qi.tolist(), s.tolist(), e.tolist()) == ([0, 1, 2], [-5, lo + 3, 0], [-4, 0, hi])
    with pytest.raises(ValueError, match="differ in length"):
        iv.grouped_clip(arr(0), arr(0, 1), arr(1, 2), arr(), arr(), arr())
