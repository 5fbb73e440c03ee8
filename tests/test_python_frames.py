"""Python stack frames (``with_stack=True``): read into their own table, and the frame holding host time named.

The traces built here are SYNTHETIC (tests/synthetic.py); the last test reads a real recording
(sample_traces/stream-wait/event-sync, one H200, torch 2.11).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic import TraceBuilder, load

from traceprobe import intervals as iv
from traceprobe import load_trace
from traceprobe.analysis.host.python_frames import _innermost, frame_holding, short_frame
from traceprobe.reading import Trace

SAMPLES = Path(__file__).parent.parent / "sample_traces" / "stream-wait"


def _frame(b: TraceBuilder, name: str, start: int, dur: int, tid: int = 123) -> None:
    b.host("python_function", name, start, dur, tid=tid)


def test_python_frames_are_their_own_table_and_leave_host_ops_alone(tmp_path):
    b = TraceBuilder()
    b.cpu_op(0, 10_000, "aten::mm")
    _frame(b, "train.py(10): step", 0, 50_000)
    _frame(b, "train.py(20): prepare_batch", 20_000, 30_000)
    _frame(b, "<built-in function sleep>", 21_000, 28_000)
    b.raw({"ph": "X", "cat": "python_function", "name": "bad", "pid": 123, "tid": 123, "ts": "x", "dur": 1})
    t = load(b, tmp_path)
    assert list(t.host_events["name"]) == ["aten::mm"]
    assert list(t.python_events["name"]) == ["train.py(10): step", "train.py(20): prepare_batch", "<built-in function sleep>"]
    assert t.python_events["start_ns"].dtype == np.int64
    assert any("1 python_function event(s)" in w for w in t.metadata["warnings"])


def test_a_trace_without_stacks_has_an_empty_frame_table(tmp_path):
    b = TraceBuilder()
    b.cpu_op(0, 10_000)
    t = load(b, tmp_path)
    assert t.python_events.empty and list(t.python_events.columns) == ["tid", "name", "start_ns", "end_ns"]
    assert frame_holding(t, (np.array([0], np.int64), np.array([10**18], np.int64))) == ""


def _trace_of(frames: list[tuple[int, int, int, str]]) -> Trace:
    """A Trace holding only the given frames ``(tid, start, end, name)`` (SYNTHETIC)."""
    py = pd.DataFrame({"tid": pd.Categorical([str(f[0]) for f in frames]), "name": pd.Categorical([f[3] for f in frames]),
                       "start_ns": np.array([f[1] for f in frames], np.int64), "end_ns": np.array([f[2] for f in frames], np.int64)})
    py = py.sort_values("start_ns", kind="stable").reset_index(drop=True)
    return Trace(path="synthetic", device_events=pd.DataFrame(), host_events=pd.DataFrame(), devices=pd.DataFrame(), python_events=py)


def test_a_builtin_is_named_with_the_function_that_called_it():
    t = _trace_of([(1, 0, 100, "train.py(10): step"), (1, 20, 80, "train.py(20): prepare_batch"),
                   (1, 30, 70, "<built-in function sleep>")])
    span = (np.array([0], np.int64), np.array([100], np.int64))
    assert frame_holding(t, span) == "<built-in function sleep> in train.py(20): prepare_batch"
    assert short_frame(frame_holding(t, span)) == "sleep in prepare_batch (train.py:20)"
    # over the caller's own stretches only, the caller
    assert frame_holding(t, (np.array([0], np.int64), np.array([20], np.int64))) == "train.py(10): step"
    # a frame of torch's own modules: named with the program's function that called into torch (SYNTHETIC frames)
    t3 = _trace_of([(1, 0, 100, "train.py(80): train_step"), (1, 10, 90, "/usr/lib/python3/site-packages/torch/nn/modules/module.py(1750): _call_impl"),
                    (1, 20, 85, "torch/optim/adam.py(210): step")])
    assert frame_holding(t3, span) == "torch/optim/adam.py(210): step in train.py(80): train_step"
    assert short_frame(frame_holding(t3, span)) == "step in train_step (train.py:80)"
    # frames of another thread are left out when the host threads are named
    t2 = _trace_of([(1, 0, 100, "train.py(10): step"), (2, 0, 100, "worker.py(5): load")])
    assert frame_holding(t2, span, {"1"}) == "train.py(10): step"


@st.composite
def _nested(draw):
    """Random properly nested frames on up to two threads: (start, end, thread) arrays."""
    out = []
    for thread in range(draw(st.integers(1, 2))):
        def grow(lo: int, hi: int, depth: int, thread: int = thread) -> None:
            at = lo
            for _ in range(draw(st.integers(0, 3 if depth < 3 else 0))):
                if hi - at < 2:
                    return
                s = draw(st.integers(at, hi - 1))
                e = draw(st.integers(s + 1, hi))
                out.append((s, e, thread))
                grow(s, e, depth + 1, thread)
                at = e
        grow(0, 60, 0)
    if not out:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    a = np.array(out, np.int64)
    return a[:, 0], a[:, 1], a[:, 2]


@settings(max_examples=150, deadline=None)
@given(_nested())
def test_innermost_frame_matches_brute_force(frames):
    start, end, thread = frames
    lo, hi, frame = _innermost(start, end, thread)
    got = {}
    for a, b, f in zip(lo.tolist(), hi.tolist(), frame.tolist()):
        for x in range(a, b):
            got[(int(thread[f]), x)] = f
    want = {}
    for th in set(thread.tolist()):
        for x in range(0, 61):
            open_ = [i for i in range(start.size) if thread[i] == th and start[i] <= x < end[i]]
            if open_:  # the innermost: the shortest (frames nest), the later-listed on a tie (a callee)
                want[(th, x)] = max(open_, key=lambda i: (-(end[i] - start[i]), i))
    assert got.keys() == want.keys()
    for k, f in got.items():  # (two frames of equal bounds: either is innermost)
        g = want[k]
        assert (start[f], end[f]) == (start[g], end[g])


def test_real_trace_names_the_sleeping_function():
    """Real recording: the host sleeps in prepare_batch after event.synchronize() drained the queue."""
    t = load_trace(next((SAMPLES / "event-sync").glob("*.pt.trace.json.gz")))
    assert len(t.python_events) > 100
    names = set(t.python_events["name"].astype(str))
    assert any(n.endswith(": prepare_batch") for n in names)
    from traceprobe.analysis.causal.dependency_graph import HOST_CLASSES, rank_graph

    top = rank_graph(t).class_top[HOST_CLASSES.index("host")]
    assert short_frame(top).startswith("sleep in prepare_batch (stream_wait_scenarios.py:")
    assert iv.length(iv.union(t.python_events["start_ns"].to_numpy(), t.python_events["end_ns"].to_numpy())) > 0
