"""analysis.memo: derived values computed once per trace; event columns read once, read-only (real sample trace)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from traceprobe import load_trace
from traceprobe.analysis.memo import device_column, host_column

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
