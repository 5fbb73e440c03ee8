"""Idle gaps per device (analysis/idle_gaps.py), a figure declared once in analysis/registry.py.

SYNTHETIC inputs: Trace objects built here in memory from random intervals (hypothesis), checked
against a brute-force reference that walks every nanosecond of a small grid; then every real
sample trace, against the devices' idle time and the JSON document.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from traceprobe import load_trace, overlap_report
from traceprobe.analysis.device.idle_gaps import idle_gaps
from traceprobe.collect import analyze_paths
from traceprobe.reading import Trace
from traceprobe.report.json_document import to_json

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
GRID = 40


def synthetic_trace(rows: list[tuple[int, int, int, int]]) -> Trace:
    """A SYNTHETIC Trace of kernels from (device, stream, start, end) in ns, built in memory."""
    n = len(rows)
    dev = pd.DataFrame({
        "device": np.array([r[0] for r in rows], dtype=np.int64),
        "stream": np.array([r[1] for r in rows], dtype=np.int64),
        "kind": pd.Categorical(["kernel"] * n, categories=["kernel", "memcpy", "memset"]),
        "name": pd.Categorical(["gemm"] * n),
        "start_ns": np.array([r[2] for r in rows], dtype=np.int64),
        "end_ns": np.array([r[3] for r in rows], dtype=np.int64),
        "bytes": np.full(n, -1, dtype=np.int64),
        "correlation": np.full(n, -1, dtype=np.int64),
        "direction": pd.Categorical([None] * n),
        "is_comm": np.zeros(n, dtype=bool),
    }).sort_values("start_ns", kind="stable").reset_index(drop=True)
    host = pd.DataFrame({c: pd.Series([], dtype=np.int64) for c in ("start_ns", "end_ns", "correlation", "external_id")})
    return Trace(path="synthetic", device_events=dev, host_events=host, devices=pd.DataFrame())


def reference(tr: Trace) -> dict[int, tuple[int, int, int]]:
    """Brute force: per device, walk every ns of the window; (gaps, longest, start of the first longest)."""
    ev = tr.device_events
    lo, hi = tr.window_ns
    out = {}
    for d in sorted(set(ev["device"].tolist())):
        busy = np.zeros(hi - lo, dtype=bool)
        for s, e in zip(ev.loc[ev["device"] == d, "start_ns"], ev.loc[ev["device"] == d, "end_ns"]):
            busy[s - lo:e - lo] = True
        gaps, longest, start, run = 0, 0, -1, 0
        for t in range(hi - lo + 1):
            if t < hi - lo and not busy[t]:
                run += 1
                continue
            if run:
                gaps += 1
                if run > longest:
                    longest, start = run, lo + t - run
            run = 0
        out[d] = (gaps, longest, start)
    return out


event = st.tuples(st.integers(0, 2), st.integers(0, 1), st.integers(0, GRID), st.integers(0, 8)).map(
    lambda t: (t[0], t[1], 1000 + t[2], 1000 + t[2] + t[3]))


@settings(max_examples=150, deadline=None)
@given(st.lists(event, min_size=1, max_size=12))
def test_idle_gaps_match_brute_force(rows):
    tr = synthetic_trace(rows)
    got = idle_gaps(tr)
    assert got["device"].tolist() == sorted({r[0] for r in rows})
    assert all(got[c].dtype == np.int64 for c in got.columns)
    want = reference(tr)
    assert {d: (g, n, s) for d, g, n, s in got.itertuples(index=False)} == want


def test_no_device_work_gives_an_empty_table():
    got = idle_gaps(synthetic_trace([]))
    assert got.empty and list(got.columns) == ["device", "gaps", "longest_gap_ns", "longest_gap_start_ns"]


def test_real_samples_gaps_within_the_idle_time_and_in_the_document():
    """On real traces: the longest gap lies inside the window and is no longer than the device's idle time
    (equal to it with one gap; no gap exactly when the device is never idle); the report and the JSON carry it."""
    paths = [SAMPLES / "multi-gpu.concurrent.pt.trace.json.gz", SAMPLES / "small-ops.one-stream.pt.trace.json.gz",
             SAMPLES / "data-parallel.ddp.rank1.pt.trace.json.gz"]
    for p in paths:
        r = overlap_report(load_trace(p))
        gaps = r.extra["idle_gaps"]
        idle = r.devices.devices.set_index("device")["idle_ns"]
        lo, hi = r.window_ns
        assert len(gaps) == len(idle) > 0
        for d, n, longest, start in gaps.itertuples(index=False):
            assert longest <= idle[d] and (n == 0) == (idle[d] == 0) and (n != 1 or longest == idle[d])
            assert start == -1 if n == 0 else lo <= start and start + longest <= hi
    table = overlap_report(load_trace(paths[0])).extra["idle_gaps"]
    doc = msgspec.json.decode(to_json(analyze_paths([paths[0]], jobs=1)))
    assert doc["traces"][0]["idle_gaps"] == [dict(zip(table.columns, map(int, row))) for row in table.itertuples(index=False)]
