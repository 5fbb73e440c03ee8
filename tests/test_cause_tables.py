"""The parts per rank and step that the causes across ranks compare (:func:`traceprobe.analysis.job.cause_tables.rank_tables`)
and the blame path (:func:`traceprobe.analysis.job.blame.blame_path`) against the pandas code they were computed with
before (tests/cause_frames.py), on random SYNTHETIC tables (and the parts on every sample window of several ranks): the
same frame, column for column, dtypes and index."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from cause_frames import blame_path_frames, parts_frames
from hypothesis import example, given, settings
from hypothesis import strategies as st

from traceprobe.analysis.job.cause_tables import PARTS, RankColumns, rank_columns, rank_tables

I64, F64 = np.int64, np.float64
CAUSES = [*PARTS[2:], "unattributed", "launch"]


def _none(k: int) -> tuple:
    return tuple(np.zeros(0, I64) for _ in range(k))


@st.composite
def ranks_columns(draw):
    """SYNTHETIC :class:`RankColumns`: a few ranks (repeated too), steps -1 to 3 repeated within a rank, idle rows of
    steps with and without busy rows, causes within and outside :data:`PARTS` (twice in a step too), ns to 10^12."""
    cols = []
    for _ in range(draw(st.integers(0, 5))):
        rank = draw(st.integers(0, 3))
        nb, ni = draw(st.integers(0, 6)), draw(st.integers(0, 8))
        ints = st.integers(0, 10**12)
        busy = (np.array(draw(st.lists(st.integers(-1, 3), min_size=nb, max_size=nb)), I64),
                np.array(draw(st.lists(ints, min_size=nb, max_size=nb)), F64),
                np.array(draw(st.lists(ints, min_size=nb, max_size=nb)), F64))
        idle = (np.array(draw(st.lists(st.integers(-1, 4), min_size=ni, max_size=ni)), I64),
                np.array(draw(st.lists(st.sampled_from(CAUSES), min_size=ni, max_size=ni)), object),
                np.array(draw(st.lists(ints, min_size=ni, max_size=ni)), F64))
        cols.append(RankColumns(rank, 0, _none(3), _none(3), busy, idle, (np.zeros(0, object), np.zeros(0, F64))))
    return cols


def _cols(rank, busy_steps, idle):
    busy = (np.array(busy_steps, I64), np.ones(len(busy_steps), F64), np.zeros(len(busy_steps), F64))
    idle_t = (np.array([s for s, _, _ in idle], I64), np.array([c for _, c, _ in idle], object), np.array([n for _, _, n in idle], F64))
    return RankColumns(rank, 0, _none(3), _none(3), busy, idle_t, (np.zeros(0, object), np.zeros(0, F64)))


@settings(max_examples=200, deadline=None)
@given(ranks_columns())
@example([_cols(1, [0, 1], [(1, "queued", 5.0), (2, "queued", 7.0)]), _cols(0, [1], [(1, "dependency", 3.0), (1, "launch", 2.0)])])
def test_parts_are_the_frames(cols):
    """(The example: idle time of a step without busy rows is left out, a rank's row follows its rank's order.)"""
    pd.testing.assert_frame_equal(rank_tables(cols).parts, parts_frames(cols), check_exact=True, check_index_type=True)


@st.composite
def blamed(draw):
    """SYNTHETIC parts of ranks 0-4 in steps 0-5 (not every rank in every step; values around each other: ties, even
    and odd counts for the medians), the exposed wait each late rank caused per step (around the noise floor; ties
    between late ranks) and the steps present."""
    rows = []
    for rank in range(draw(st.integers(0, 5))):
        for step in sorted(draw(st.sets(st.integers(0, 5), max_size=6))):
            rows.append([rank, step, *(float(draw(st.sampled_from([0, 1, 2, 3, 5]))) * 400_000 for _ in PARTS)])
    parts = pd.DataFrame(rows, columns=["rank", "step", *PARTS]).astype({"rank": I64, "step": I64, **dict.fromkeys(PARTS, F64)})
    waits = [(s, k, draw(st.sampled_from([1, 499_999, 500_000, 900_000]))) for s in range(6) for k in range(5) if draw(st.booleans())]
    by_step = pd.DataFrame(waits, columns=["step", "key", "ns"]).astype(I64)
    present = np.array(sorted(draw(st.sets(st.integers(0, 6), max_size=7))), I64)
    return by_step, present, parts


@settings(max_examples=300, deadline=None)
@given(blamed())
def test_blame_path_is_the_frames(case):
    from types import SimpleNamespace

    from traceprobe.analysis.job.blame import blame_path

    by_step, present, parts = case
    t = SimpleNamespace(parts=parts)
    pd.testing.assert_frame_equal(blame_path(by_step, present, t), blame_path_frames(by_step, present, t), check_exact=True)


@pytest.mark.slow  # (every sample's report)
def test_parts_of_every_sample_window_are_the_frames(every_sample):
    """Every sample window of several ranks: the parts its causes compare are the frames'."""
    from traceprobe.analysis.job.causes import REPORT_TABLES
    from traceprobe.analysis.per_trace import OverlapReport
    from traceprobe.analysis.run import build_runs

    results, _ = every_sample()
    seen = 0
    for run in build_runs([r for r in results if isinstance(r, OverlapReport)]):
        for w in run.windows:
            ranked = {r: rep for r, rep in zip(w.ranks, w.reports) if r is not None}
            if len(ranked) >= 2:
                cols = [rank_columns(r, rep.window_ns, {n: getattr(rep, n) for n in REPORT_TABLES}) for r, rep in ranked.items()]
                pd.testing.assert_frame_equal(rank_tables(cols).parts, parts_frames(cols), check_exact=True, check_index_type=True)
                seen += 1
    assert seen >= 100
