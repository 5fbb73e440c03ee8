"""Host-thread concurrency on SYNTHETIC traces (brute force on random ops) and on real CPU traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
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


def _threads_doc(n: int, launch: bool) -> dict:
    """SYNTHETIC: ``n`` host threads of one ``aten::add`` each (with ``launch``, a launch call inside it and the kernel
    it launched), under one ``ProfilerStep#3`` on the first thread; the shape of issue 56's hostile trace."""
    ev: list[dict] = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 900,
                       "dur": 3 * n + 1000, "args": {}}]
    for t in range(n):
        ts = 1000 + 3 * t
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": t + 1, "ts": ts, "dur": 3, "args": {}})
        if launch:
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": t + 1, "ts": ts + 1,
                       "dur": 1, "args": {"correlation": t + 1}})
            ev.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts + 2, "dur": 2,
                       "args": {"device": 0, "stream": 7, "correlation": t + 1}})
    return {"schemaVersion": 1, "traceEvents": ev}


def test_keyed_count_matches_brute_force():
    """SYNTHETIC: counts of points of the same group inside each query, every side, against a loop per query."""
    from traceprobe import keyed

    rng = np.random.default_rng(56)
    for _ in range(20):
        n, q = int(rng.integers(0, 40)), int(rng.integers(1, 40))
        group, at = rng.integers(0, 4, n), rng.integers(-5, 20, n) * 10**15
        qg, lo = rng.integers(0, 5, q), rng.integers(-5, 20, q) * 10**15
        hi = lo + rng.integers(0, 6, q) * 10**15
        for lo_side in ("left", "right"):
            for hi_side in ("left", "right"):
                got = keyed.count_between(group, at, qg, lo, hi, lo_side, hi_side)
                want = [int(np.sum((group == g) & ((at >= a) if lo_side == "left" else (at > a))
                                   & ((at <= b) if hi_side == "right" else (at < b)))) for g, a, b in zip(qg, lo, hi)]
                assert got.tolist() == want


def test_too_many_host_threads_refused_in_one_line(tmp_path, monkeypatch):
    """SYNTHETIC: one thread past the bound is refused by name and count (the bound lowered to keep the test small)."""
    import json

    import pytest

    from traceprobe import TraceFormatError
    from traceprobe.reading import limits

    monkeypatch.setattr(limits, "MAX_HOST_THREADS", 40)
    p = tmp_path / "threads.json"
    p.write_text(json.dumps(_threads_doc(41, launch=False)))
    with pytest.raises(TraceFormatError, match=r"41 distinct host threads \(pid, tid\) \(limit 40\)"):
        load_trace(p)
    p.write_text(json.dumps(_threads_doc(40, launch=False)))
    assert load_trace(p).host_events["tid"].nunique() == 40


def _cli_seconds(path: Path) -> tuple[float, int, str]:
    import subprocess
    import sys
    import time

    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "traceprobe", "overlap-report", str(path)], capture_output=True, text=True,
                          check=False, timeout=600)
    return time.perf_counter() - t, done.returncode, done.stderr.strip()


@pytest.mark.slow
def test_1e5_host_threads_refused_in_seconds(tmp_path):
    """SYNTHETIC: 10^5 host threads of one op each (1.9 MB; 190 s before the bound) are refused in one line."""
    import json

    p = tmp_path / "threads.json"
    p.write_text(json.dumps(_threads_doc(100_000, launch=False)))
    took, rc, err = _cli_seconds(p)
    assert rc == 2 and err.splitlines() == [f"{p}: absurd trace: 100,000 distinct host threads (pid, tid) (limit 16,384)"]
    assert took < 30


@pytest.mark.slow
def test_host_threads_below_the_bound_linear(tmp_path):
    """SYNTHETIC: host threads that each launch a kernel, 2,048 and 16,384 (the bound): 8x the threads costs at most
    16x the time (quadratic would be 64x; before the per-thread masks went, 16,384 took minutes)."""
    import json

    took = []
    for n in (2048, 16384):
        p = tmp_path / f"threads{n}.json"
        p.write_text(json.dumps(_threads_doc(n, launch=True)))
        t, rc, err = _cli_seconds(p)
        assert rc == 0, err
        took.append(t)
    assert took[1] < 16 * took[0]


def test_innermost_interval_of_each_group():
    """SYNTHETIC intervals of two groups (host threads): per query, the innermost interval of its group holding it (of
    two that cross, the later-starting one), -1 where none does; another group's intervals never answer."""
    import numpy as np

    from traceprobe.keyed import innermost

    group = np.array([0, 0, 0, 1, 0, 0])
    start = np.array([0, 10, 12, 0, 50, 55])
    end = np.array([100, 40, 20, 100, 70, 80])  # (4 and 5 cross)
    q_group = np.array([0, 0, 0, 1, 0, 2, 0])
    at = np.array([5, 15, 30, 15, 52, 15, 60])
    assert innermost(group, start, end, q_group, at).tolist() == [0, 2, 1, 3, 4, -1, 5]
    assert innermost(group[:0], start[:0], end[:0], q_group, at).tolist() == [-1] * 7


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), min_size=1, max_size=30),
       st.sampled_from([1, 10**9, 2**40, 2**60]), st.sampled_from([1, 2**30]))
def test_keys_order_as_the_group_time_pairs_do(pairs, t_scale, g_scale):
    """SYNTHETIC (group, time) pairs: keys compare as the pairs do (group first, then time), equal exactly where both
    are, whether the times and groups fit one int64 as they are (lifted) or only by their ranks (times 6 x 2^60 apart)."""
    from traceprobe import keyed

    g = np.array([p[0] * g_scale for p in pairs], np.int64)
    t = np.array([p[1] * t_scale for p in pairs], np.int64)
    half = len(pairs) // 2
    k1, k2 = keyed.keys((g[:half], t[:half]), (g[half:], t[half:]))
    k = np.concatenate([k1, k2])
    for i in range(len(pairs)):
        for j in range(len(pairs)):
            a, b = (int(g[i]), int(t[i])), (int(g[j]), int(t[j]))
            assert (k[i] < k[j]) == (a < b) and (k[i] == k[j]) == (a == b)
