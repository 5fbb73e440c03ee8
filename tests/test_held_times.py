"""A cause's time on each rank read from its entries (``analysis/causal/held_times.py``) against the per-rank rows it
replaced: dense rows of the class table summed, ``what_if_steps.steps_with`` of each rank, the first step's time.
SYNTHETIC windows (hypothesis): ranks with and without steps, anchors before, inside and after them, classes held
sparse, extra time (a free's wait, negative too) at anchors of its own or shared with a class's."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from traceprobe.analysis.causal import held_times
from traceprobe.analysis.causal.class_times import ClassTimes
from traceprobe.analysis.causal.dependency_graph import HOST_CLASSES
from traceprobe.analysis.causal.held_times import WindowSteps
from traceprobe.analysis.causal.what_if_steps import first_step, steps_with

C = len(HOST_CLASSES)


@st.composite
def windows(draw):
    graphs = []
    for _ in range(draw(st.integers(1, 5))):
        a = draw(st.integers(0, 25))
        t = np.sort(np.array(draw(st.lists(st.integers(0, 1000), min_size=a, max_size=a)), np.int64))
        n_steps = draw(st.integers(0, 4))
        lo = np.sort(np.array(draw(st.lists(st.integers(0, 900), min_size=n_steps, max_size=n_steps)), np.int64))
        hi = lo + np.array(draw(st.lists(st.integers(0, 300), min_size=n_steps, max_size=n_steps)), np.int64)
        dense = np.zeros((C, a), np.int64)
        for _ in range(draw(st.integers(0, 3 * a))):
            dense[draw(st.integers(0, C - 1)), draw(st.integers(0, max(a - 1, 0)))] = draw(st.integers(1, 10**6)) if a else 0
        graphs.append(SimpleNamespace(t=t, step_bounds=(lo, hi), class_ns=ClassTimes.of(dense), dense=dense))
    return graphs


@settings(max_examples=150, deadline=None)
@given(windows(), st.data())
def test_held_is_the_per_rank_rows(graphs, data) -> None:
    floor = data.draw(st.integers(-5, 2_000))
    held_times.BLOCK = data.draw(st.sampled_from([1, 3, 7, 1 << 20]))  # (runs of whole ranks: a rank, a few, the window)
    try:
        _check(graphs, floor, data)
    finally:
        held_times.BLOCK = 1 << 20


def _check(graphs, floor, data) -> None:
    fa, _ = first_step_of(graphs)
    steps = WindowSteps(graphs, fa, max(floor, 0))
    w = sum(g.t.size for g in graphs)
    classes = data.draw(st.lists(st.integers(0, C - 1), min_size=1, max_size=3, unique=True))
    extra_at = np.array(sorted(data.draw(st.sets(st.integers(0, max(w - 1, 0)), max_size=w))), np.int64) if w else np.zeros(0, np.int64)
    extra_ns = np.array(data.draw(st.lists(st.integers(-10**5, 10**5), min_size=extra_at.size, max_size=extra_at.size)), np.int64)
    got = steps.of_classes(graphs, classes, (extra_at, extra_ns))
    extra = np.zeros(w, np.int64)
    extra[extra_at] = extra_ns
    off = np.concatenate([[0], np.cumsum([g.t.size for g in graphs])])
    rows = [g.dense[classes].sum(axis=0) + extra[off[i]:off[i + 1]] for i, g in enumerate(graphs)]
    assert got.ns.tolist() == [int(r.sum()) for r in rows]
    assert got.steps.tolist() == [steps_with(g, r, max(floor, 0)) for g, r in zip(graphs, rows)]
    assert got.first.tolist() == [int(r[f].sum()) for r, f in zip(rows, fa)]
    dense = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    again = steps.of_dense(dense)
    assert again.ns.tolist() == got.ns.tolist() and again.steps.tolist() == got.steps.tolist() and again.first.tolist() == got.first.tolist()


def first_step_of(graphs):
    """:func:`first_step` of graphs that carry no device ops (its op masks are not read here)."""
    return first_step([SimpleNamespace(t=g.t, end=np.zeros(0, np.int64), step_bounds=g.step_bounds) for g in graphs])


def test_a_window_without_anchors() -> None:
    g = SimpleNamespace(t=np.zeros(0, np.int64), step_bounds=(np.zeros(0, np.int64), np.zeros(0, np.int64)),
                        class_ns=ClassTimes.of(np.zeros((C, 0), np.int64)))
    held = WindowSteps([g, g], [np.zeros(0, bool)] * 2, 0).of_classes([g, g], (0,))
    assert held.ns.tolist() == [0, 0] and held.steps.tolist() == [-1, -1] and held.first.tolist() == [0, 0]


def _measured_reference(graphs) -> np.ndarray:
    """``what_if_steps.measured_anchors`` as it was, one rank at a time (the reference)."""
    from traceprobe.analysis.causal.what_if_steps import PROGRAM_WORK

    out = []
    for g in graphs:
        if g.start.size == 0:
            out.append(np.ones(g.t.size, bool))
            continue
        bounds = np.concatenate(g.step_bounds)
        tgt = np.maximum(g.target, 0)
        waited = (g.target >= 0) & (g.end[tgt] + g.ret >= g.t)
        worked = g.class_ns.rows([HOST_CLASSES.index(c) for c in PROGRAM_WORK]) > 0
        last = int(np.flatnonzero(worked | waited | np.isin(g.t, bounds)).max(initial=-1))
        out.append(np.arange(g.t.size) <= last)
    return np.concatenate(out) if out else np.zeros(0, bool)


@settings(max_examples=150, deadline=None)
@given(windows(), st.data())
def test_measured_anchors_are_each_ranks(graphs, data) -> None:
    """:func:`what_if_steps.measured_anchors`, every rank at once, against the per-rank reference. SYNTHETIC graphs:
    ranks with and without device work, syncs that waited or not, step bounds on anchors or not."""
    from traceprobe.analysis.causal.what_if_steps import measured_anchors

    for g in graphs:
        k = data.draw(st.integers(0, 6))
        g.start = np.sort(np.array(data.draw(st.lists(st.integers(0, 1000), min_size=k, max_size=k)), np.int64))
        g.end = g.start + np.array(data.draw(st.lists(st.integers(0, 300), min_size=k, max_size=k)), np.int64)
        a = g.t.size
        g.target = np.array(data.draw(st.lists(st.integers(-1, k - 1), min_size=a, max_size=a)), np.int64)
        g.ret = np.array(data.draw(st.lists(st.integers(0, 200), min_size=a, max_size=a)), np.int64)
        if a and data.draw(st.booleans()):  # (a step bound on an anchor's time)
            lo, hi = g.step_bounds
            g.step_bounds = (np.sort(np.r_[lo, g.t[data.draw(st.integers(0, a - 1))]]), np.r_[hi, 2000])
    assert np.array_equal(measured_anchors(graphs), _measured_reference(graphs))
