"""The rows a what-if table keeps (:func:`traceprobe.analysis.causal.what_if_table.kept_rows`) against the pandas code
they were computed with before (tests/kept_rows_frames.py), on random SYNTHETIC replayed rows: the same frames, column
for column, dtypes and index."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kept_rows_frames import kept_rows_frames

from traceprobe.analysis.causal.what_if_table import kept_rows

CAUSES = ["host", "cpu_op", "imbalance", "graph_of_step"]


@st.composite
def replayed(draw):
    """SYNTHETIC rows of :data:`~traceprobe.analysis.causal.what_if_table.ROW`: ranks -1 (every rank) to 3, causes
    repeated across ranks, gains around each other (ties too), time removed per rank, gains step by step."""
    n_steps = draw(st.integers(0, 4))
    rows = []
    for _ in range(draw(st.integers(0, 14))):
        rank, cause = draw(st.integers(-1, 3)), draw(st.sampled_from(CAUSES))
        removed, gain = draw(st.integers(0, 120)), draw(st.integers(-5, 40))
        holders = draw(st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True)) if rank < 0 else [rank]
        by = {r: draw(st.integers(1, 400)) for r in holders}
        steps = np.array(draw(st.lists(st.integers(-20, 300), min_size=n_steps, max_size=n_steps)), np.int64)
        top = draw(st.sampled_from(["aten::mm", np.str_("cudaMemcpyAsync"), "x"]))
        rows.append((rank, cause, top, removed, gain, draw(st.integers(-1, n_steps)), draw(st.integers(0, gain + 60)),
                     draw(st.integers(0, removed)), by, steps))
    return rows, n_steps, draw(st.sampled_from([set(), {"graph_of_step"}])), draw(st.integers(0, 12))


Z = np.zeros(2, np.int64)


@settings(max_examples=150, deadline=None)
@given(replayed())
@example(([(-1, "host", "x", 100, 15, 1, 0, 0, {0: 90, 1: 10}, Z), (0, "host", "x", 90, 10, 1, 0, 0, {0: 90}, Z)], 2, set(), 5))
def test_kept_rows_are_the_frames(case):
    """(The example: an every-rank row that adds exactly the floor beyond its lead's own row, dropped.)"""
    rows, n_steps, groups, floor = case
    got, want = kept_rows(rows, n_steps, groups, floor), kept_rows_frames(rows, n_steps, groups, floor)
    for a, b in zip(got[:2], want[:2]):
        pd.testing.assert_frame_equal(a.drop(columns="_steps"), b.drop(columns="_steps"), check_exact=True)
        assert np.array_equal(a.index.to_numpy(), b.index.to_numpy()) and a["_steps"].dtype == b["_steps"].dtype
        assert all(np.array_equal(x, y) for x, y in zip(a["_steps"], b["_steps"]))
    assert np.array_equal(got[2], want[2])
