"""GPU time breakdown (analysis/breakdown.py) and intervals.measure.

SYNTHETIC inputs: random interval sets built here by hypothesis, checked against
a brute-force reference that classifies every nanosecond of a small grid; plus
every real sample trace (the parts must sum to the window).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import sample_trace, sweep, swept
from hypothesis import given, settings
from hypothesis import strategies as st

from traceprobe import intervals as iv
from traceprobe import load_trace
from traceprobe.analysis.device.breakdown import IDLE_PARTS, PARTS, gpu_breakdown, step_breakdown
from traceprobe.analysis.device.steps import step_windows
from traceprobe.analysis.host.idle_causes import LAUNCH_LATENCY_NS
from traceprobe.reading import Trace

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
GRID = 60

KINDS = ("compute", "comm", "copy", "memset")


def make_trace(dev_rows: list[tuple], host_rows: list[tuple] = (), rank: int | None = None) -> Trace:
    """A SYNTHETIC Trace from (device, stream, what, start, end, correlation) and (cat, name, start, end, correlation)."""
    kind = {"compute": "kernel", "comm": "kernel", "copy": "memcpy", "memset": "memset"}
    name = {"compute": "gemm", "comm": "ncclDevKernel_AllReduce", "copy": "Memcpy HtoD (Pinned -> Device)", "memset": "Memset (Device)"}
    dev = pd.DataFrame(
        {
            "device": np.array([r[0] for r in dev_rows], dtype=np.int64),
            "stream": np.array([r[1] for r in dev_rows], dtype=np.int64),
            "kind": pd.Categorical([kind[r[2]] for r in dev_rows], categories=["kernel", "memcpy", "memset"]),
            "name": pd.Categorical([name[r[2]] for r in dev_rows]),
            "start_ns": np.array([r[3] for r in dev_rows], dtype=np.int64),
            "end_ns": np.array([r[4] for r in dev_rows], dtype=np.int64),
            "bytes": np.full(len(dev_rows), -1, dtype=np.int64),
            "correlation": np.array([r[5] for r in dev_rows], dtype=np.int64),
            "direction": pd.Categorical([("HtoD" if r[2] == "copy" else None) for r in dev_rows]),
            "is_comm": np.array([r[2] == "comm" for r in dev_rows], dtype=bool),
        }
    ).sort_values("start_ns", kind="stable").reset_index(drop=True)
    host = pd.DataFrame(
        {
            "pid": pd.Categorical(["1"] * len(host_rows)),
            "tid": pd.Categorical(["1"] * len(host_rows)),
            "cat": pd.Categorical([r[0] for r in host_rows]),
            "name": pd.Categorical([r[1] for r in host_rows]),
            "start_ns": np.array([r[2] for r in host_rows], dtype=np.int64),
            "end_ns": np.array([r[3] for r in host_rows], dtype=np.int64),
            "correlation": np.array([r[4] for r in host_rows], dtype=np.int64),
            "external_id": np.full(len(host_rows), -1, dtype=np.int64),
        }
    ).sort_values("start_ns", kind="stable").reset_index(drop=True)
    meta = {"distributedInfo": {"rank": rank}} if rank is not None else {}
    return Trace(path="synthetic", device_events=dev, host_events=host, devices=pd.DataFrame(), metadata=meta)


def reference(tr: Trace, lo: int, hi: int) -> dict[int, dict[str, int]]:
    """Brute force: classify every ns t in [lo, hi) of each device."""
    ev, host = tr.device_events, tr.host_events
    sync = [(r.start_ns, r.end_ns) for r in host.itertuples() if "Synchronize" in r.name]
    launch = {r.correlation: r.start_ns for r in host.itertuples() if r.cat == "cuda_runtime" and r.correlation >= 0}
    out = {}
    for d in sorted(set(ev["device"].tolist())):
        e = ev[ev["device"] == d]
        cover = {k: np.zeros(hi - lo, bool) for k in ("compute", "comm", "copy", "any")}
        for r in e.itertuples():
            s, t = max(r.start_ns, lo) - lo, min(r.end_ns, hi) - lo
            if t <= s:
                continue
            what = "comm" if r.is_comm else ("compute" if r.kind == "kernel" else ("copy" if r.kind == "memcpy" else None))
            if what:
                cover[what][s:t] = True
            cover["any"][s:t] = True
        res = dict.fromkeys(PARTS + IDLE_PARTS, 0)
        res["window_ns"] = hi - lo
        for i in range(hi - lo):
            t = lo + i
            if cover["compute"][i]:
                res["compute_ns"] += 1
            elif cover["comm"][i]:
                res["exposed_comm_ns"] += 1
            elif cover["copy"][i]:
                res["exposed_copy_ns"] += 1
            elif cover["any"][i]:
                res["other_ns"] += 1
            else:
                # idle causes (traceprobe.analysis.host.idle_causes), all on one host thread here
                res["idle_ns"] += 1
                busy_before = [j for j in range(i) if cover["any"][j]]
                gap_start = lo + busy_before[-1] + 1 if busy_before else lo
                after = [j for j in range(i, hi - lo) if cover["any"][j]]
                if not after:
                    res["idle_other_ns"] += 1  # unattributed: nothing followed
                    continue
                nxt = lo + after[0]
                ls = [launch.get(r.correlation, -1) for r in e.itertuples() if r.start_ns == nxt and r.end_ns > r.start_ns]
                ls = [x for x in ls if x >= 0]
                if not ls or min(ls) <= gap_start:
                    res["idle_other_ns"] += 1  # unattributed, or queued: launched before the gap
                elif t >= GRID + 5:
                    # from the launch call's end (GRID + 5 here) to LAUNCH_LATENCY_NS after it: launch, then queued
                    res["idle_launch_ns" if t < GRID + 5 + LAUNCH_LATENCY_NS else "idle_other_ns"] += 1
                elif any(a <= t < b for a, b in sync):  # (the launch call's own time too: by what holds it)
                    res["idle_sync_ns"] += 1
                else:
                    res["idle_launch_ns"] += 1  # in a runtime call or outside any op: the host was late
        out[d] = res
    return out


_iv = st.tuples(st.integers(0, GRID - 1), st.integers(0, 12))


@st.composite
def traces(draw):
    n = draw(st.integers(1, 9))
    dev_rows, host_rows = [], []
    for i in range(n):
        s, length = draw(_iv)
        what = draw(st.sampled_from(KINDS))
        d = draw(st.integers(0, 1))
        corr = 100 + i
        dev_rows.append((d, draw(st.integers(0, 2)), what, s, min(s + length, GRID), corr))
        if draw(st.booleans()):
            host_rows.append(("cuda_runtime", "cudaLaunchKernel", draw(st.integers(0, GRID)), GRID + 5, corr))
    for _ in range(draw(st.integers(0, 2))):
        s, length = draw(_iv)
        host_rows.append(("cuda_runtime", "cudaDeviceSynchronize", s, s + length, -1))
    return make_trace(dev_rows, host_rows)


@settings(max_examples=60, deadline=None)
@given(traces(), st.integers(0, 20), st.integers(20, GRID + 5))
def test_breakdown_matches_brute_force(tr, lo, hi):
    got = gpu_breakdown(tr, (lo, hi))
    ref = reference(tr, lo, hi)
    assert sorted(got["device"].tolist()) == sorted(ref)
    for row in got.to_dict(orient="records"):
        r = ref[row["device"]]
        assert {k: row[k] for k in r} == r
        assert sum(row[p] for p in PARTS) == row["window_ns"]
        assert sum(row[p] for p in IDLE_PARTS) == row["idle_ns"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, GRID), st.integers(0, 10)), max_size=8), st.lists(st.tuples(st.integers(-5, GRID + 5), st.integers(-3, 30)), min_size=1, max_size=5))
def test_measure_matches_brute_force(ivs, wins):
    s = np.array([a for a, _ in ivs], dtype=np.int64)
    e = s + np.array([b for _, b in ivs], dtype=np.int64)
    u = iv.union(s, e)
    lo = np.array([a for a, _ in wins], dtype=np.int64)
    hi = lo + np.array([b for _, b in wins], dtype=np.int64)
    covered = {t for a, b in zip(s.tolist(), e.tolist()) for t in range(a, b)}
    want = [sum(1 for t in range(a, b) if t in covered) for a, b in zip(lo.tolist(), hi.tolist())]
    assert iv.measure(u, lo, hi).tolist() == want


def test_hand_computed_breakdown():
    # cuda:0, window [0, 100): compute [0,30), NCCL [20,50), copy [40,70), memset [65,80); idle [80,100)
    # the launch of the copy (correlation 3) started at 10, before any gap; sync [85, 95)
    tr = make_trace(
        [(0, 7, "compute", 0, 30, 1), (0, 8, "comm", 20, 50, 2), (0, 9, "copy", 40, 70, 3), (0, 7, "memset", 65, 80, 4),
         (0, 7, "compute", 100, 100, 5)],
        [("cuda_runtime", "cudaMemcpyAsync", 10, 12, 3), ("cuda_runtime", "cudaDeviceSynchronize", 85, 95, -1)],
        rank=3,
    )
    row = gpu_breakdown(tr, (0, 100)).iloc[0].to_dict()
    assert row["rank"] == 3
    assert [row[p] for p in PARTS] == [30, 20, 20, 10, 0, 20]
    # idle [80,100) follows the device's last work: nothing launched ends it, so it is unattributed (idle_other),
    # although the host synchronized in it (idle causes look at the thread that launched the work ending a gap)
    assert [row["idle_launch_ns"], row["idle_sync_ns"], row["idle_other_ns"]] == [0, 0, 20]


def test_host_bound_gap_is_idle_launch():
    # kernel A [0,10); kernel B [30,40) launched at 25 (after A ended): the gap [10,30) is host-bound.
    # kernel C [50,60) launched at 5: queued before the gap [40,50), which is "other". From B's launch at 25 to its
    # start at 30 the device waited for the launch itself (launch latency): idle_launch too.
    tr = make_trace(
        [(0, 7, "compute", 0, 10, 1), (0, 7, "compute", 30, 40, 2), (0, 7, "compute", 50, 60, 3)],
        [("cuda_runtime", "cudaLaunchKernel", 0, 1, 1), ("cuda_runtime", "cudaLaunchKernel", 25, 26, 2),
         ("cuda_runtime", "cudaLaunchKernel", 5, 6, 3)],
    )
    row = gpu_breakdown(tr).iloc[0]
    assert (row["window_ns"], row["idle_ns"], row["idle_launch_ns"], row["idle_other_ns"]) == (60, 30, 20, 10)


def test_step_breakdown_sums_per_step():
    tr = make_trace([(0, 7, "compute", 0, 30, 1), (0, 7, "copy", 30, 50, 2), (1, 7, "comm", 10, 60, 3)])
    windows = pd.DataFrame({"step": [1, 2], "start_ns": [0, 40], "end_ns": [40, 70]})
    got = step_breakdown(tr, windows)
    assert got[["step", "device"]].values.tolist() == [[1, 0], [1, 1], [2, 0], [2, 1]]
    assert got["compute_ns"].tolist() == [30, 0, 0, 0]
    assert got["exposed_copy_ns"].tolist() == [10, 0, 10, 0]
    assert got["exposed_comm_ns"].tolist() == [0, 30, 0, 20]
    assert (got[list(PARTS)].sum(axis=1) == got["window_ns"]).all()


SAMPLE_FILES = sorted(p for p in SAMPLES.rglob("*.pt.trace.json.gz") if swept(p))


@pytest.mark.parametrize("path", sweep(SAMPLE_FILES, ids=lambda p: str(p.relative_to(SAMPLES))))  # (a few by default, all under slow)
def test_parts_sum_to_window_on_every_sample(path):
    tr = sample_trace(path)
    b = gpu_breakdown(tr)
    lo, hi = tr.window_ns
    assert (b["window_ns"] == hi - lo).all()
    assert (b[list(PARTS)].sum(axis=1) == b["window_ns"]).all()
    assert (b[list(IDLE_PARTS)].sum(axis=1) == b["idle_ns"]).all()
    assert (b[list(PARTS + IDLE_PARTS)] >= 0).all().all()
    s = step_breakdown(tr, step_windows(tr))
    assert (s[list(PARTS)].sum(axis=1) == s["window_ns"]).all()


def test_nonblocking_copies_are_exposed_overlapped_are_not():
    nb = gpu_breakdown(load_trace(SAMPLES / "compute-copy.nonblocking.pt.trace.json.gz")).iloc[0]
    ov = gpu_breakdown(load_trace(SAMPLES / "compute-copy.overlapped.pt.trace.json.gz")).iloc[0]
    assert 57e6 < nb["exposed_copy_ns"] < 59e6
    assert ov["exposed_copy_ns"] < 0.05 * nb["exposed_copy_ns"]
