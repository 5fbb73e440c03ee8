"""Host-thread concurrency on SYNTHETIC traces (brute force on random ops) and on real CPU traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.synthetic import TraceBuilder
from traceprobe import load_trace
from traceprobe.analysis.host.host_threads import host_thread_concurrency, host_thread_verdict

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
SPAN = 400

op = st.tuples(st.integers(0, 3), st.integers(0, SPAN - 1), st.integers(0, 80))


def _grid(ops: list[tuple[int, int, int]]) -> dict[int, np.ndarray]:
    """Brute force: a boolean ns grid per thread, True where the thread is in some op."""
    g: dict[int, np.ndarray] = {}
    for tid, s, d in ops:
        if d > 0:
            g.setdefault(tid, np.zeros(SPAN + 80, dtype=bool))[s:s + d] = True
    return g


@settings(max_examples=60, deadline=None)
@given(st.lists(op, min_size=1, max_size=25))
def test_matches_brute_force(tmp_path_factory, ops):
    b = TraceBuilder("synthetic: host threads")
    for tid, s, d in ops:
        b.cpu_op(s, d, tid=tid + 1)
    h = host_thread_concurrency(load_trace(b.write(tmp_path_factory.mktemp("t") / "t.json")))
    g = _grid(ops)
    count = np.sum([x.astype(int) for x in g.values()], axis=0) if g else np.zeros(1, int)
    lengths = [int(x.sum()) for x in g.values() if x.any()]
    assert h.threads == len(lengths)
    assert h.busy_ns == int((count >= 1).sum())
    assert h.multi_thread_ns == int((count >= 2).sum())
    assert h.thread_ns_sum == sum(lengths)
    if len(lengths) >= 2 and sum(lengths) > max(lengths):
        want = (sum(lengths) - int((count >= 1).sum())) / (sum(lengths) - max(lengths))
        assert abs(h.fair_concurrency - want) < 1e-12
        assert 0.0 <= h.fair_concurrency <= 1.0


def test_two_threads_hand_computed(tmp_path):
    # SYNTHETIC: main thread 0-1000 µs; a worker 200-400 beside it, then 1000-1100 alone
    b = TraceBuilder("synthetic: worker beside main")
    b.cpu_op(0, 1_000_000, tid=1)
    b.cpu_op(200_000, 200_000, tid=2)
    b.cpu_op(1_000_000, 100_000, tid=2)
    h = host_thread_concurrency(load_trace(b.write(tmp_path / "t.json")))
    assert (h.threads, h.busy_ns, h.multi_thread_ns, h.thread_ns_sum, h.busiest_thread_ns) == (2, 1_100_000, 200_000, 1_300_000, 1_000_000)
    assert h.concurrency == 200 / 1100
    assert h.fair_concurrency == 200 / 300  # the worker's 300 µs: 200 of them beside main
    [v] = host_thread_verdict(h, has_device_work=False)
    assert v.level == "confirmed" and v.figure == "host_threads"
    assert host_thread_verdict(h, has_device_work=True) == []
    # the same in ns: the worker's 300 ns are under the verdicts' 50 µs floor
    b = TraceBuilder("synthetic: worker beside main, ns")
    b.cpu_op(0, 1000, tid=1)
    b.cpu_op(200, 200, tid=2)
    b.cpu_op(1000, 100, tid=2)
    assert host_thread_verdict(host_thread_concurrency(load_trace(b.write(tmp_path / "ns.json"))), has_device_work=False) == []


def test_real_cpu_threads_sample():
    # real trace: small-ops.cpu-threads ran 4 host threads; small-ops.cpu-serial one
    threads = host_thread_concurrency(load_trace(SAMPLES / "small-ops.cpu-threads.pt.trace.json.gz"))
    assert threads.threads == 4 and threads.fair_concurrency > 0.9
    serial = host_thread_concurrency(load_trace(SAMPLES / "small-ops.cpu-serial.pt.trace.json.gz"))
    assert serial.threads == 1 and serial.multi_thread_ns == 0
    assert host_thread_verdict(serial, has_device_work=False) == []
