"""analysis.memo: derived values computed once per trace; event columns read once, read-only (real sample trace)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from traceprobe import load_trace
from traceprobe.analysis.memo import device_column, empty_frame, host_column
from traceprobe.keyed import unique_pairs

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "compute-copy.overlapped.pt.trace.json.gz"


def test_columns_are_the_frames_read_once_and_read_only():
    t = load_trace(SAMPLE)
    for read, frame, names in ((device_column, t.device_events, ("device", "stream", "start_ns", "end_ns", "correlation", "is_comm")),
                               (host_column, t.host_events, ("start_ns", "end_ns", "correlation", "external_id"))):
        for name in names:
            col = read(t, name)
            np.testing.assert_array_equal(col, frame[name].to_numpy())
            assert read(t, name) is col and not col.flags.writeable
            with pytest.raises(ValueError):
                col[:1] = 0


def test_a_replaced_trace_reads_its_own_columns():
    """``dataclasses.replace`` (a clipped trace) starts with no derived values: never the parent's columns."""
    t = load_trace(SAMPLE)
    full = device_column(t, "start_ns")
    half = replace(t, device_events=t.device_events.iloc[: len(t.device_events) // 2].reset_index(drop=True))
    assert len(device_column(half, "start_ns")) == len(full) // 2
    assert device_column(t, "start_ns") is full


@pytest.mark.parametrize("lo,hi", [(0, 3), (-5, 5), (-(2**40), 2**40)])  # (the last: no room for a combined key)
def test_unique_pairs_is_numpys_unique_of_the_stacked_pair(lo: int, hi: int):
    rng = np.random.default_rng(abs(lo))
    a, b = rng.integers(lo, hi, 500), rng.integers(lo, hi, 500)
    pairs, inverse = unique_pairs(a, b)
    want, where = np.unique(np.stack([a, b]), axis=1, return_inverse=True)
    np.testing.assert_array_equal(pairs, want)
    np.testing.assert_array_equal(inverse, where.reshape(-1))
    assert unique_pairs(a[:0], b[:0])[0].shape == (2, 0)


def test_empty_frames_are_built_once_and_never_shared():
    cols = {"device": np.int64, "name": object, "share": np.float64, "rank": "Int64"}
    one, two = empty_frame(cols), empty_frame(cols)
    want = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in cols.items()})
    pd.testing.assert_frame_equal(one, want)
    assert one is not two
    one["device"] = pd.Series([], dtype=np.int32)
    pd.testing.assert_frame_equal(empty_frame(cols), want)
