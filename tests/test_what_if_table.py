"""The rows a what-if table keeps (:func:`traceprobe.analysis.causal.what_if_table.kept_rows`) and their order
(:func:`traceprobe.analysis.causal.what_if_order.ordered`) against the pandas code they were computed with before
(tests/what_if_frames.py), on random SYNTHETIC rows: the same frames, column for column, dtypes and index."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from what_if_frames import kept_rows_frames, ordered_frames

from traceprobe.analysis.causal.what_if_order import COLUMNS, ordered
from traceprobe.analysis.causal.what_if_table import assemble, kept_rows

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
        assert all(np.array_equal(x, np.reshape(y, -1)) for x, y in zip(a["_steps"], b["_steps"]))  # (below: a 0-d array there)
    assert np.array_equal(got[2], want[2])


@st.composite
def kept(draw):
    """SYNTHETIC kept rows (:data:`~traceprobe.analysis.causal.what_if_order.COLUMNS`): a few ranks, syncs beside host
    work and other causes, gains per step close to each other (ties, gaps within the floor)."""
    n = draw(st.integers(0, 12))
    rows = [(draw(st.integers(-1, 3)), draw(st.sampled_from(["sync", "host", "dispatch", "cpu_op", "imbalance"])), "x",
             draw(st.integers(0, 100)), draw(st.integers(-5, 60)), draw(st.integers(-5, 30)), draw(st.integers(-1, 3)), -1)
            for _ in range(n)]
    out = pd.DataFrame(rows, columns=COLUMNS).astype({c: np.int64 for c in COLUMNS if c not in ("cause", "top")})
    return out, draw(st.integers(0, 8))


@settings(max_examples=150, deadline=None)
@given(kept())
@example((pd.DataFrame([(1, "dispatch", "x", 50, 40, 12, 1, -1), (0, "host", "x", 50, 30, 10, 1, -1), (0, "cpu_op", "x", 50, 30, 10, 1, -1),
                        (0, "sync", "x", 50, 20, 8, 1, -1)], columns=COLUMNS), 0))
def test_ordered_is_the_frames(case):
    """(The example: a rank's syncs beside two host causes of one gain per step: the first is their rival, and the
    syncs, which expose it, come before it.)"""
    out, floor = case
    pd.testing.assert_frame_equal(ordered(out, [], floor), ordered_frames(out, [], floor), check_exact=True, check_index_type=True)


def test_a_one_step_window_told_beyond_its_lead_is_assembled():
    """SYNTHETIC rows of a window of one step: an every-rank row told beyond rank 0's own row. The pandas code stored
    its gains step by step as a 0-d array (``.at`` unwraps an array of one element), which the table's assembly could
    not stack with the others' (``np.stack``: a ValueError); each is an array of one gain now."""
    rows = [(0, "host", "x", 60, 40, 1, 40, 60, {0: 60}, np.array([40])),
            (-1, "host", "x", 80, 60, 1, 60, 80, {0: 60, 1: 10, 2: 10}, np.array([60]))]
    graph = SimpleNamespace(rank=0, steps=pd.DataFrame({"step": [3]}))  # (what the assembly reads of a graph: its steps)
    kept, table, steps = assemble(rows, [graph], 1, set(), 5)  # pyright: ignore[reportArgumentType]
    assert kept["beyond"].tolist() == [-1, 0] and [s.tolist() for s in kept["_steps"]] == [[40], [20]]
    assert table["gain_ns"].tolist() == [40, 20] and steps["gain_ns"].tolist() == [40, 20] and steps["step"].tolist() == [3, 3]
    with pytest.raises(ValueError):  # (the reference's rows, as the table's assembly read them)
        np.stack(kept_rows_frames(rows, 1, set(), 5)[1]["_steps"].tolist())
