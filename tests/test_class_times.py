"""The sparse host-class table (:class:`ClassTimes`) against the dense table it holds: SYNTHETIC random tables."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceprobe.analysis.causal import class_times
from traceprobe.analysis.causal.class_times import ClassTimes, window_rows


@st.composite
def tables(draw):
    c, a = draw(st.integers(1, 6)), draw(st.integers(0, 40))
    big = draw(st.booleans())
    hi = 2**40 if big else 10**6
    cells = draw(st.lists(st.tuples(st.integers(0, c - 1), st.integers(0, max(a - 1, 0)), st.integers(-hi, hi)), max_size=3 * a))
    m = np.zeros((c, a), np.int64)
    for i, j, v in cells:
        if a:
            m[i, j] = v
    return m


@settings(max_examples=200, deadline=None)
@given(tables(), st.data())
def test_every_read_is_the_dense_tables(m, data):
    t = ClassTimes.of(m)
    assert t.shape == m.shape and np.array_equal(t.dense(), m)
    assert t.ns.dtype == (np.int32 if np.abs(m).max(initial=0) < 2**31 else np.int64) and (t.ns != 0).all()
    c, a = m.shape
    for k in range(c):
        assert np.array_equal(t.row(k), m[k]) and t.total(k) == int(m[k].sum()) and t.held(k) == bool(m[k].any())
    classes = data.draw(st.lists(st.integers(0, c - 1), unique=True))
    assert np.array_equal(t.rows(classes), m[classes].sum(axis=0) if classes else np.zeros(a, np.int64))
    lo, hi = data.draw(st.integers(0, a)), data.draw(st.integers(0, a))
    assert np.array_equal(t.over(lo, hi), m[:, lo:hi].sum(axis=1))
    src, dst = data.draw(st.integers(0, c - 1)), data.draw(st.integers(0, c - 1))
    want = m.copy()
    if src != dst:
        want[dst] += want[src]
        want[src] = 0
    assert np.array_equal(t.moved(src, dst).dense(), want)
    back = pickle.loads(pickle.dumps(t))
    assert back == t and np.array_equal(back.over(lo, hi), m[:, lo:hi].sum(axis=1))


def test_held_sparse_and_checked():
    m = np.zeros((14, 1000), np.int64)
    m[13] = 5
    m[3, ::10] = 7
    t = ClassTimes.of(m)
    assert t.nbytes < m.astype(np.int32).nbytes / 5  # (1.1 entries an anchor)
    assert ClassTimes.of(t) is t
    with pytest.raises(ValueError, match="not \\(classes, anchors\\)"):
        ClassTimes.of(np.zeros(3))


@settings(max_examples=100, deadline=None)
@given(st.lists(tables(), min_size=1, max_size=5), st.data())
def test_window_rows_are_each_ranks_rows_in_its_place(ms, data):
    """:func:`window_rows` against the dense tables concatenated, the ranks not asked for left 0."""
    c = min(m.shape[0] for m in ms)
    ms = [m[:c] for m in ms]
    classes = data.draw(st.lists(st.integers(0, c - 1), unique=True))
    ranks = data.draw(st.lists(st.integers(0, len(ms) - 1), unique=True))
    a_rank = np.concatenate([np.full(m.shape[1], i, np.int32) for i, m in enumerate(ms)])
    want = np.concatenate([m[classes].sum(axis=0) if i in ranks and classes else np.zeros(m.shape[1], np.int64) for i, m in enumerate(ms)])
    block = data.draw(st.sampled_from([1, 2, 5, 1 << 17]))  # (entries written at a time: a rank's, a few, the window's)
    old, class_times.ROWS_BLOCK = class_times.ROWS_BLOCK, block
    try:
        assert np.array_equal(window_rows([ClassTimes.of(m) for m in ms], a_rank, classes, iter(ranks)), want)  # (any iterable)
    finally:
        class_times.ROWS_BLOCK = old
