"""Causes: idle causes (analysis/idle_causes.py) and waits across ranks (analysis/causes.py).

SYNTHETIC traces built here, checked against brute-force references that classify
every ns; then the real recordings of sample_traces/causes/ (scripts/cause_scenarios.py
on 2x H100), whose built-in causes are in sample_traces/causes/injected.csv.
"""

from __future__ import annotations

import csv
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from synthetic import TraceBuilder, load
from test_breakdown import make_trace

from traceprobe import load_trace
from traceprobe.analysis.host import warmup
from traceprobe.analysis.host.host_classes import CAUSES
from traceprobe.analysis.host.idle_causes import LAUNCH_LATENCY_NS, idle_cause_table
from traceprobe.analysis.job.causes import window_causes
from traceprobe.analysis.job.collectives import collective_table, match_window
from traceprobe.analysis.per_trace import overlap_report
from traceprobe.analysis.summary import summarize
from traceprobe.reading import Trace

CAUSE_SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces" / "causes"
GRID = 60

# host event classes the brute force knows: (cat, name) -> cause, in priority order
HOST_NAMES = [("cuda_runtime", "cudaStreamSynchronize", "sync"), ("cpu_op", "compile_fx_inner (dynamo_timed)", "compile"),
              ("cuda_runtime", "cudaHostAlloc", "pinned_alloc"),
              ("cuda_runtime", "cudaMalloc", "device_alloc"), ("cpu_op", "c10d::barrier", "other_rank"),
              ("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "data_loading"),
              ("user_annotation", "Optimizer.step#SGD.step", "optimizer"), ("cpu_op", "aten::mm", "launch"),
              ("user_annotation", "ProfilerStep#1", None)]


def _with_threads(tr: Trace, tids: list[str]) -> Trace:
    host = tr.host_events.copy()
    host["tid"] = pd.Categorical(tids)
    from dataclasses import replace
    return replace(tr, host_events=host)


def first_call_rows(host: pd.DataFrame) -> set[int]:
    """Brute force of analysis/warmup.py: the rows that are the first call of their name, with enough later calls
    all much shorter."""
    rows = list(host.itertuples())
    out = set()
    for name in {r.name for r in rows}:
        same = [r for r in rows if r.name == name]
        first = min(same, key=lambda r: (r.start_ns, r.Index))
        later = [r.end_ns - r.start_ns for r in same if r is not first]
        d = first.end_ns - first.start_ns
        if len(later) >= warmup.MIN_LATER_CALLS and d >= warmup.MIN_FIRST_NS and d >= warmup.FACTOR * np.median(later):
            out.add(first.Index)
    return out


def host_class_reference(host: pd.DataFrame, linked: set[int], firsts: set[int]) -> dict[int, str | None]:
    """Brute force of analysis/host/host_classes.py: each host row's class (None: an annotation that holds none). Its
    name's class (HOST_NAMES; any other op or call: launch); unless a sync, a compile phase or an op holding one and
    launching nothing outside phases is compile, else a first call warmup (an annotation too, as the code has it); an op
    of class launch that holds no launch call (a runtime call linked to device work) is cpu_op."""
    rows = list(host.itertuples())
    calls = [r for r in rows if r.cat == "cuda_runtime" and r.correlation in linked]
    phases = [r for r in rows if r.name.endswith(warmup.COMPILE_SUFFIX)]

    def in_phase(r) -> bool:
        return any(p.tid == r.tid and p.start_ns <= r.start_ns < p.end_ns for p in phases)

    def holds(op, of) -> bool:
        return any(x.tid == op.tid and op.start_ns <= x.start_ns <= op.end_ns for x in of)

    out: dict[int, str | None] = {}
    for r in rows:
        base = next((c for cat, name, c in HOST_NAMES if (r.cat, r.name) == (cat, name)),
                    "launch" if r.cat in ("cpu_op", "cuda_runtime", "cuda_driver") else None)
        op = r.cat == "cpu_op" and r not in phases
        holder = op and holds(r, phases) and not holds(r, [c for c in calls if not in_phase(c)])
        if base != "sync" and (r in phases or holder):
            base = "compile"
        elif base != "sync" and r.Index in firsts:
            base = "warmup"
        if base == "launch" and r.cat == "cpu_op" and not holds(r, calls):
            base = "cpu_op"
        out[r.Index] = base
    return out


def idle_reference(tr: Trace, lo: int, hi: int) -> dict[int, dict[str, int]]:
    """Brute force: the cause of every idle ns of each device (analysis/idle_causes.py's definitions)."""
    ev, host = tr.device_events, tr.host_events
    firsts = first_call_rows(host)
    launch = {r.correlation: (r.start_ns, r.tid, r.end_ns) for r in host.itertuples() if r.cat == "cuda_runtime" and r.correlation >= 0}
    rows = list(host.itertuples())
    captures = []  # (tid, start, end): a begin call to the end of the first end call starting at or after it, same thread
    for b in rows:
        if b.name == "cudaStreamBeginCapture":
            ends = [r for r in rows if r.name == "cudaStreamEndCapture" and r.tid == b.tid and r.start_ns >= b.start_ns]
            if ends:
                captures.append((b.tid, b.start_ns, min(ends, key=lambda r: r.start_ns).end_ns))
    captures += [(r.tid, r.start_ns, r.end_ns) for r in rows if r.name == "cudaGraphExecDestroy"]  # (graph calls count too)
    order = {c: k for k, c in enumerate(CAUSES)}
    classes = host_class_reference(host, set(ev["correlation"].tolist()), firsts)
    phases = [r.start_ns for r in rows if r.name.endswith(warmup.COMPILE_SUFFIX)]  # without steps, time outside ops
    setup = min(phases) if phases and tr.steps.empty else 0  # before the first compile phase is warm-up
    out = {}
    for d in sorted(set(ev["device"].tolist())):
        e = ev[ev["device"] == d]
        busy = np.zeros(hi - lo, bool)
        for r in e.itertuples():
            s, t = max(r.start_ns, lo) - lo, min(r.end_ns, hi) - lo
            if t > s:
                busy[s:t] = True
        res = dict.fromkeys(CAUSES, 0)
        for i in np.flatnonzero(~busy).tolist():
            t = lo + i
            before = np.flatnonzero(busy[:i])
            gap_start = lo + int(before[-1]) + 1 if before.size else lo
            after = np.flatnonzero(busy[i:])
            if not after.size:
                res["unattributed"] += 1
                continue
            nxt = t + int(after[0])
            ls = [launch[r.correlation] for r in e.itertuples() if r.start_ns == nxt and r.end_ns > r.start_ns and r.correlation in launch]
            if not ls:
                res["unattributed"] += 1
                continue
            at, tid, ae = min(ls)
            if at <= gap_start:
                res["queued"] += 1
                continue
            if t >= ae:
                res["launch" if t < ae + LAUNCH_LATENCY_NS else "queued"] += 1
                continue
            if any(c_tid == tid and s <= t < e for c_tid, s, e in captures):
                res["graph_capture"] += 1
                continue
            held = [classes[r.Index] for r in rows if r.tid == tid and r.start_ns <= t < r.end_ns and classes[r.Index]]
            if "launch" in held:  # (inside an optimizer's span, its launches are dispatch)
                held = [c for c in held if c != "optimizer"]
            res[min(held, key=order.__getitem__) if held else "warmup" if t < setup else "host"] += 1
        out[d] = res
    return out


@st.composite
def host_bound_traces(draw):
    dev_rows, host_rows, tids = [], [], []
    for i in range(draw(st.integers(1, 6))):
        s = draw(st.integers(0, GRID - 1))
        d = draw(st.integers(0, 1))
        corr = 100 + i
        dev_rows.append((d, draw(st.integers(0, 2)), draw(st.sampled_from(["compute", "copy", "comm"])), s, min(s + draw(st.integers(0, 10)), GRID), corr))
        if draw(st.booleans()):
            host_rows.append(("cuda_runtime", "cudaLaunchKernel", draw(st.integers(0, GRID)), GRID + 5, corr))
            tids.append(draw(st.sampled_from(["1", "2"])))
    for _ in range(draw(st.integers(0, 5))):
        cat, name, _ = draw(st.sampled_from(HOST_NAMES))
        s = draw(st.integers(0, GRID))
        host_rows.append((cat, name, s, s + draw(st.integers(0, 25)), -1))
        tids.append(draw(st.sampled_from(["1", "2"])))
    for _ in range(draw(st.integers(0, 2))):  # graph captures: a begin and an end call (threads drawn apart)
        s = draw(st.integers(0, GRID))
        host_rows.append(("cuda_runtime", "cudaStreamBeginCapture", s, s + draw(st.integers(0, 3)), -1))
        e = s + draw(st.integers(0, 30))
        host_rows.append(("cuda_runtime", "cudaStreamEndCapture", e, e + draw(st.integers(0, 3)), -1))
        tids += [draw(st.sampled_from(["1", "2"])), draw(st.sampled_from(["1", "2"]))]
    if draw(st.booleans()):
        s = draw(st.integers(0, GRID))
        host_rows.append(("cuda_runtime", "cudaGraphExecDestroy", s, s + draw(st.integers(0, 10)), -1))
        tids.append(draw(st.sampled_from(["1", "2"])))
    if draw(st.booleans()):  # one name called again and again: a first call far longer than the later ones is warm-up
        cat, name, _ = draw(st.sampled_from(HOST_NAMES))
        s = draw(st.integers(0, GRID // 2))
        for k in range(draw(st.integers(2, 4))):
            d = draw(st.integers(0, 25 if k == 0 else 3))
            host_rows.append((cat, name, s, s + d, -1))
            tids.append(draw(st.sampled_from(["1", "2"])))
            s += draw(st.integers(0, 12))
    return _with_threads(make_trace(dev_rows, host_rows), tids)


@pytest.mark.slow  # (7, 5, 3 and 3 s: property and size runs, in CI's slow run)
@settings(max_examples=50, deadline=None)
@given(host_bound_traces(), st.integers(0, 15), st.integers(30, GRID + 5))
def test_idle_causes_match_brute_force(tr, lo, hi):
    with mock.patch.object(warmup, "MIN_FIRST_NS", 5):  # (the grid is in ns: a 5 ns first call may be warm-up here)
        got = idle_cause_table(tr, None, (lo, hi))
        ref = idle_reference(tr, lo, hi)
    for d, want in ref.items():
        mine = got[(got["device"] == d) & (got["step"] == -1)].set_index("cause")["ns"].to_dict()
        assert {c: int(mine.get(c, 0)) for c in CAUSES} == want


def test_idle_cause_names_the_host_call():
    # SYNTHETIC: gap [10, 40) on cuda:0; the host allocates pinned memory [12, 30), then launches B at 35
    tr = make_trace([(0, 7, "compute", 0, 10, 1), (0, 7, "compute", 40, 50, 2)],
                    [("cuda_runtime", "cudaLaunchKernel", 0, 1, 1), ("cuda_runtime", "cudaHostAlloc", 12, 30, -1),
                     ("cuda_runtime", "cudaLaunchKernel", 35, 36, 2)])
    got = idle_cause_table(tr).set_index("cause")
    assert got.loc["pinned_alloc", "ns"] == 18 and got.loc["pinned_alloc", "top"] == "cudaHostAlloc"
    assert got.loc["host", "ns"] == 7 and got.loc["launch", "ns"] == 5  # [35, 40): launch latency


@pytest.mark.parametrize("with_steps", [False, True])
def test_setup_before_the_first_compile_is_warmup_without_steps(with_steps):
    # SYNTHETIC, ms: cuda:0 idle [1, 50); thread 1 compiles [30, 44) ('compile_fx_inner (dynamo_timed)': compile) and
    # launches B at 45. Without steps (a whole script profiled), [1, 30) outside any op precedes the first compile: set-up,
    # warm-up; [44, 45) after it stays host. With a ProfilerStep around it all, [1, 30) is the step's own host time: host.
    ms = 1_000_000
    host = [("cuda_runtime", "cudaLaunchKernel", 0, 10_000, 1), ("cpu_op", "compile_fx_inner (dynamo_timed)", 30 * ms, 44 * ms, -1),
            ("cuda_runtime", "cudaLaunchKernel", 45 * ms, 45 * ms + 10_000, 2)]
    if with_steps:
        host.append(("user_annotation", "ProfilerStep#1", 0, 60 * ms, -1))
    tr = make_trace([(0, 7, "compute", 0, ms, 1), (0, 7, "compute", 50 * ms, 51 * ms, 2)], host)
    got = idle_cause_table(tr, None, (0, 51 * ms)).set_index("cause")["ns"]
    assert got["compile"] == 14 * ms and got.get("warmup", 0) == (0 if with_steps else 29 * ms)
    assert got["host"] == (30 * ms if with_steps else ms)


def test_an_op_holding_a_compile_is_compilation_unless_it_runs_work():
    # SYNTHETIC, ms: cuda:0 idle [1, 50). Thread 1: Dynamo's callback 'dynamo' [10, 30) holds a compile phase [14, 26) and
    # launches nothing: all 20 ms are compilation, 4 + 4 ms of its own time around the phase included, and the device's
    # idle compilation is named by the phase. A 'Torch-Compiled Region' [32, 48) holding a phase [34, 40) but also
    # launching B at 45 runs work: only its phase is compilation, the rest is launch-bound (one ProfilerStep around it all).
    from traceprobe.analysis.host.warmup import compile_holders

    ms = 1_000_000
    host = [("cuda_runtime", "cudaLaunchKernel", 0, 10_000, 1), ("cpu_op", "dynamo", 10 * ms, 30 * ms, -1),
            ("cpu_op", "_compile.compile_inner (dynamo_timed)", 14 * ms, 26 * ms, -1),
            ("cpu_op", "Torch-Compiled Region: 0/1", 32 * ms, 48 * ms, -1),
            ("cpu_op", "_compile.compile_inner (dynamo_timed)", 34 * ms, 40 * ms, -1),
            ("cuda_runtime", "cudaLaunchKernel", 45 * ms, 45 * ms + 10_000, 2), ("user_annotation", "ProfilerStep#1", 0, 60 * ms, -1)]
    tr = make_trace([(0, 7, "compute", 0, ms, 1), (0, 7, "compute", 50 * ms, 51 * ms, 2)], host)
    held = dict(zip(tr.host_events["name"], compile_holders(tr)))
    assert held["dynamo"] and not held["Torch-Compiled Region: 0/1"]
    got = idle_cause_table(tr, None, (0, 51 * ms)).set_index("cause")
    assert got.loc["compile", "ns"] == 20 * ms + 6 * ms and "warmup" not in got.index
    assert "compile_inner" in str(got.loc["compile", "top"])


def test_first_call_warmup_is_its_own_idle_cause():
    # SYNTHETIC, ms: cuda:0 idle [1, 40); the host's first aten::conv2d [2, 40) (38 ms; its two later calls 1 ms each)
    # launches B at 39 (its launch call [39, 39.01) is inside the first call: warm-up too; then launch latency to 39.06,
    # then queued); inside it a first cudaStreamSynchronize [5, 20) (15 ms, later ones 0.1 ms) stays a sync.
    ms = 1_000_000

    def build() -> Trace:
        return make_trace([(0, 7, "compute", 0, ms, 1), (0, 7, "compute", 40 * ms, 41 * ms, 2), (0, 7, "compute", 50 * ms, 51 * ms, 3),
                           (0, 7, "compute", 60 * ms, 61 * ms, 4)],
                          [("cuda_runtime", "cudaLaunchKernel", 0, 10_000, 1), ("cpu_op", "aten::conv2d", 2 * ms, 40 * ms, -1),
                           ("cuda_runtime", "cudaStreamSynchronize", 5 * ms, 20 * ms, -1),
                           ("cuda_runtime", "cudaLaunchKernel", 39 * ms, 39 * ms + 10_000, 2),
                           ("cpu_op", "aten::conv2d", 45 * ms, 46 * ms, -1), ("cuda_runtime", "cudaLaunchKernel", 45 * ms, 45 * ms + 10_000, 3),
                           ("cuda_runtime", "cudaStreamSynchronize", 47 * ms, 47 * ms + 100_000, -1),
                           ("cpu_op", "aten::conv2d", 55 * ms, 56 * ms, -1), ("cuda_runtime", "cudaLaunchKernel", 55 * ms, 55 * ms + 10_000, 4),
                           ("cuda_runtime", "cudaStreamSynchronize", 57 * ms, 57 * ms + 100_000, -1)])

    tr = build()
    assert tr.host_events[warmup.first_calls(tr)]["name"].astype(str).tolist() == ["aten::conv2d", "cudaStreamSynchronize"]
    got = idle_cause_table(tr, None, (0, 41 * ms)).set_index("cause")
    assert got.loc["warmup", "ns"] == 3 * ms + 19 * ms + 10_000 and got.loc["warmup", "top"] == "aten::conv2d"
    assert got.loc["launch", "ns"] == 50_000
    assert got.loc["sync", "ns"] == 15 * ms and got.loc["host", "ns"] == ms
    with mock.patch.object(warmup, "FACTOR", 39):  # 38 ms is not 39 times the later calls' 1 ms: launch-bound, as before
        other = idle_cause_table(build(), None, (0, 41 * ms)).set_index("cause")
    assert "warmup" not in other.index and other.loc["launch", "ns"] == 22 * ms + 60_000 and other.loc["sync", "ns"] == 15 * ms
    rep = overlap_report(tr)
    top = rep.findings.iloc[0]
    assert top["kind"] == "idle_warmup" and top["label"] == "warm-up 22.0 ms" and "torch.profiler.schedule" in top["text"]
    # the note gives the evidence; the long first cudaStreamSynchronize is a sync, not warm-up, and is not in it
    assert ("warm-up in the trace: the first aten::conv2d took 38.0 ms, 38x the median of its 2 later calls (1.0 ms): one-time "
            "work") in " ".join(rep.notes)


def test_warmup_note_names_one_of_two_equal_first_calls():
    # SYNTHETIC, ms: aten::to and aten::_to_copy span the same [2, 30) the first time (1 ms later): the note names the
    # first listed and counts the other as inside it, rather than dropping both as nested in each other
    ms = 1_000_000
    tr = make_trace([(0, 7, "compute", 0, ms, 1), (0, 7, "compute", 40 * ms, 41 * ms, 2)],
                    [("cuda_runtime", "cudaLaunchKernel", 0, 10_000, 1), ("cpu_op", "aten::to", 2 * ms, 30 * ms, -1),
                     ("cpu_op", "aten::_to_copy", 2 * ms, 30 * ms, -1), ("cuda_runtime", "cudaLaunchKernel", 39 * ms, 39 * ms + 10_000, 2),
                     *[("cpu_op", n, t * ms, (t + 1) * ms, -1) for t in (45, 55) for n in ("aten::to", "aten::_to_copy")]])
    (note,) = [n for n in overlap_report(tr).notes if n.startswith("warm-up")]
    assert note.count("the first aten::") == 1 and "took 28.0 ms, 28x the median of its 2 later calls (1.0 ms); 1 more first call like" in note


def test_graph_capture_is_its_own_idle_cause(tmp_path):
    # SYNTHETIC: cuda:0 runs A [0, 10 us); the host captures a graph [20, 100 us) (3 launches and a sync-looking call
    # inside: recorded, not run), instantiates it [100, 110 us), then launches B at 150 us. Idle [10, 150 us): host 10 us,
    # graph capture 90 us, host 40 us, then launch latency; the note and the finding name the capture.
    b = TraceBuilder("graph capture")
    b.step(1, 0, 200_000)
    b.launch(0, "kernel", 0, 7, 0, 10_000)
    b.runtime(20_000, 2_000, "cudaStreamBeginCapture")
    for at in (30_000, 40_000, 50_000):
        b.runtime(at, 5_000, "cudaLaunchKernel")  # (recorded into the graph: no device event)
    b.runtime(60_000, 5_000, "cudaGraphLaunch")  # not a launch of captured work
    b.runtime(70_000, 10_000, "cudaStreamSynchronize")
    b.runtime(95_000, 5_000, "cudaStreamEndCapture")
    b.runtime(100_000, 10_000, "cudaGraphInstantiateWithFlags")
    b.launch(150_000, "kernel", 0, 7, 150_000, 10_000)
    tr = load(b, tmp_path)
    from traceprobe.analysis.host.graph_capture import captures

    c = captures(tr)
    assert c[["start_ns", "end_ns", "launches"]].values.tolist() == [[20_000, 100_000, 3]] and c["begin"].tolist() == ["cudaStreamBeginCapture"]
    got = idle_cause_table(tr).query("step == -1").set_index("cause")
    assert got.loc["graph_capture", "ns"] == 90_000 and got.loc["graph_capture", "top"] == "cudaStreamBeginCapture"
    assert "sync" not in got.index and got.loc["host", "ns"] == 10_000 + 40_000
    rep = overlap_report(tr)
    assert rep.findings["kind"].iloc[0] == "idle_graph_capture" and rep.findings["label"].iloc[0] == "graph capture 0.1 ms"
    assert any(n.startswith("1 CUDA graph capture on the host (cudaStreamBeginCapture ... cudaStreamEndCapture, 0.1 ms): the 3 launches")
               for n in rep.notes)


def _rank_trace(rank: int, comm: list[tuple[int, int]], compute: list[tuple[int, int]]) -> Trace:
    rows = [(0, 9, "comm", s, e, 1000 + i) for i, (s, e) in enumerate(comm)] + [(0, 7, "compute", s, e, 2000 + i) for i, (s, e) in enumerate(compute)]
    return make_trace(rows, rank=rank)


@st.composite
def two_rank_jobs(draw):
    """SYNTHETIC pairs of rank traces with the same number of all-reduce kernels (no overlap on one rank)."""
    n = draw(st.integers(1, 4))
    ranks = []
    for r in range(2):
        t, comm, compute = 0, [], []
        for _ in range(n):
            t += draw(st.integers(0, 8))
            length = draw(st.integers(1, 12))
            comm.append((t, t + length))
            t += length
        for _ in range(draw(st.integers(0, 4))):
            s = draw(st.integers(0, t))
            compute.append((s, s + draw(st.integers(1, 10))))
        ranks.append(_rank_trace(r, comm, compute))
    return ranks


def wait_reference(traces: list[Trace]) -> dict[tuple[int, int], int]:
    """Brute force: per (rank, late rank), the ns of exposed collective time inside the rank's waits for that rank."""
    comm = {t.rank: t.device_events[t.device_events["is_comm"]].sort_values("start_ns") for t in traces}
    out: dict[tuple[int, int], int] = {}
    n = len(comm[0])
    for k in range(n):
        starts = {r: int(c["start_ns"].iloc[k]) for r, c in comm.items()}
        last = max(starts, key=lambda r: (starts[r], -r))  # the latest start; ties: the first rank (as idxmax)
        for tr in traces:
            r = tr.rank
            assert r is not None
            if r == last:
                continue
            s, e = starts[r], int(comm[r]["end_ns"].iloc[k])
            lo, hi = tr.window_ns
            comp = tr.device_events[~tr.device_events["is_comm"]]
            for t in range(max(s, lo), min(e, starts[last], hi)):
                if not ((comp["start_ns"] <= t) & (comp["end_ns"] > t)).any():
                    out[(r, last)] = out.get((r, last), 0) + 1
    return out


@pytest.mark.slow  # (7, 5, 3 and 3 s: property and size runs, in CI's slow run)
@settings(max_examples=50, deadline=None)
@given(two_rank_jobs())
def test_exposed_waits_match_brute_force(traces):
    reports = {t.rank: overlap_report(t) for t in traces}
    wc = match_window({r: collective_table(t) for r, t in zip(reports, traces)})
    got = window_causes(wc, reports)
    mine = {(int(a), int(b)): int(c) for a, b, c in got.exposed.itertuples(index=False) if c > 0}
    assert mine == {k: v for k, v in wait_reference(traces).items() if v > 0}
    # exposed wait + exposed transfer = each rank's exposed collective time
    for r, rep in reports.items():
        total = int((rep.exposed_comm["end_ns"] - rep.exposed_comm["start_ns"]).sum())
        assert sum(v for (a, _), v in mine.items() if a == r) + got.exposed_transfer_ns[r] == total


def test_wait_and_transfer_exact():
    # SYNTHETIC: rank 0's all-reduce [10, 40), rank 1's [30, 40): rank 0 waited [10, 30) for rank 1, with compute
    # beside it [10, 15): exposed wait 15 ns, exposed transfer [30, 40) = 10 ns; rank 1 waited for nobody.
    r0 = _rank_trace(0, [(10, 40)], [(0, 15)])
    r1 = _rank_trace(1, [(30, 40)], [(0, 30)])
    reports = {0: overlap_report(r0), 1: overlap_report(r1)}
    got = window_causes(match_window({0: collective_table(r0), 1: collective_table(r1)}), reports)
    assert got.exposed.values.tolist() == [[0, 1, 15]]
    assert got.exposed_transfer_ns == {0: 10, 1: 10}
    w = got.waits.set_index("rank")
    assert (w.loc[0, "wait_ns"], w.loc[0, "transfer_ns"], w.loc[1, "wait_ns"], w.loc[1, "transfer_ns"]) == (20, 10, 0, 10)


def _injected() -> dict[str, dict[str, str]]:
    with open(CAUSE_SAMPLES / "injected.csv", newline="") as f:
        return {r["scenario"]: r for r in csv.DictReader(f)}


def _summary(name: str):
    return summarize([overlap_report(load_trace(p)) for p in sorted((CAUSE_SAMPLES / name).glob("*.pt.trace.json.gz"))])


@pytest.mark.parametrize(("name", "kind", "fragment", "tolerance"), [
    ("ddp-sleep", "wait", "wait for rank 1: host outside ops -", 0.10),
    ("ddp-compute", "wait", "wait for rank 1: extra device work -", 0.15),
])
def test_ddp_straggler_named_with_its_cause(name, kind, fragment, tolerance):
    s = _summary(name)
    want = float(_injected()[name]["injected_ms_per_step"]) * 1e6
    (c,) = s.causes
    assert c.straggler == 1
    part = "host" if name == "ddp-sleep" else "compute"
    # the cause is the straggler's what-if (the window replayed); its measured excess is the built-in time
    assert c.cause == ("host" if name == "ddp-sleep" else "imbalance") and c.gain_per_step_ns > 0
    assert c.excess_per_step_ns[part] == pytest.approx(want, rel=tolerance)
    # the blame path (the replay's): every step of the window bound by rank 1, for the built-in cause, each step's gain
    # within the tolerance of the built-in time (a step's own, not its measured excess)
    assert c.blame["rank"].tolist() == [1, 1, 1]
    assert c.blame["cause"].tolist() == [c.cause] * 3
    assert c.blame["excess_ns"].median() == pytest.approx(want, rel=tolerance + 0.1)
    r0, r1 = (r for r in s.reports)
    assert r0.findings.iloc[0]["kind"] == kind and r0.findings.iloc[0]["label"].startswith(fragment)
    assert (r1.findings["kind"] == "straggler").any()


def test_balanced_ddp_names_no_straggler():
    s = _summary("ddp-balanced")
    (c,) = s.causes
    assert c.straggler is None and c.label == ""
    assert (c.blame["rank"] == -1).all()
    assert all(not (r.findings["kind"].isin(["wait", "straggler"])).any() for r in s.reports)


@pytest.mark.parametrize(("name", "kind", "label"), [
    ("slow-input", "idle_data_loading", "data loading"),
    ("pinned-alloc", "idle_pinned_alloc", "pinned alloc"),
    ("graph-capture", "idle_graph_capture", "graph capture"),
])
def test_host_causes_recovered(name, kind, label):
    (r,) = _summary(name).reports
    top = r.findings.iloc[0]
    assert top["kind"] == kind and top["label"].startswith(label)
    want = float(_injected()[name]["injected_ms_per_step"]) * 1e6
    assert top["per_step_ns"] == pytest.approx(want, rel=0.10)


@pytest.mark.parametrize(("name", "top_op", "share"), [("startup", "(aten::conv2d)", 0.6), ("compile-startup", "(dynamo_timed)", 0.9)])
def test_startup_samples_read_as_warmup(name, top_op, share):
    """The real startup samples (profiled from the process's start, no schedule; 1x H100, 1x H200): the top finding is
    one-time (first calls; the compiled one's compilation, then first calls), no longer launch-bound, and the one-time
    findings' replayed gains are most of the first step's excess over the steady steps, not all of it:
    the device window opens at the first device work, 178 / 282 ms into the first step (the CUDA context is made
    before it); one-call ops (``aten::randn``) cannot be judged. The compiled one spends 3.2 s outside any profiled op
    before its first compile phase (``torch.compile(model)`` importing Dynamo and Inductor): with no steps in the trace,
    that set-up is warm-up too, and warm-up is 95% of the excess."""
    (r,) = _summary(name).reports
    top = r.findings.iloc[0]
    kind, label = ("idle_compile", "compilation") if name == "compile-startup" else ("idle_warmup", "one-time first calls")
    (w,) = _summary(name).what_ifs  # (its critical path names the one-time work as the finding does: no "slow calls")
    assert "slow calls" not in w.path_line() and ("compilation" if name == "compile-startup" else "one-time first calls") in w.path_line()
    assert top["kind"] == kind and top["label"].startswith(label) and top_op in top["text"]
    assert "one-time" in top["text"] and "launch-bound" not in top["label"]
    inj = _injected()[name]
    excess = (float(inj["first_step_ms"]) - float(inj["steady_step_ms"])) * 1e6
    one_time = r.findings[r.findings["kind"].isin(["idle_warmup", "idle_compile"])]
    assert top["headroom_ns"] <= excess and share * excess <= one_time["headroom_ns"].sum() <= excess  # (replayed one at a time)
    (note,) = [n for n in r.notes if n.startswith("warm-up in the trace: the first ")]  # the evidence, in numbers
    assert ("torch.compile compiled for" in note) == (name == "compile-startup")
    assert ("outside any op before the first compile phase" in note) == (name == "compile-startup")
    if name == "compile-startup":
        idle = r.idle_causes.query("step == -1").set_index("cause")["ns"]
        assert idle["host"] < 0.01 * excess


def test_compiled_samples_advice_fits_the_compile_mode():
    """The real compiled samples (1x H200; a 48-layer MLP trained under torch.compile, after compiling): in the default
    mode the steps are launch-bound inside the compiled backward, and the advice is to replay them as graphs
    (mode="reduce-overhead"), not to compile; under reduce-overhead the trace replays graphs, the wall-clock step is
    less than half as long, and what launch-bound time is left is told so, far less of it."""
    (launch,) = _summary("compiled-launch").reports
    (graphs,) = _summary("compiled-graphs").reports
    top = launch.findings.iloc[0]
    assert top["kind"] == "idle_launch" and "FunctionBackward)" in top["text"] and "it is compiled already" in top["text"]
    assert 'mode="reduce-overhead"' in top["text"] and "torch.compile it" not in top["text"]
    inj = _injected()
    assert float(inj["compiled-graphs"]["steady_step_ms"]) < 0.5 * float(inj["compiled-launch"]["steady_step_ms"])
    left = graphs.findings.set_index("kind").loc["idle_launch"]
    assert "replays CUDA graphs already" in left["text"]
    assert left["per_step_ns"] < 0.25 * top["per_step_ns"]


def test_pipeline_bubble_per_stage():
    s = _summary("pipeline")
    for r in s.reports:
        top = r.findings.iloc[0]
        assert top["kind"] == "bubble" and top["label"].startswith("bubble ") and top["label"].endswith("%")
        assert "2 stages x 8 microbatches: 11.1%" in top["text"]


def test_exposed_transfer_advice_follows_the_process_group():
    # SYNTHETIC waits tables: the group holding most exposed transfer decides the advice
    from traceprobe.analysis.job.causes import _group_advice

    def waits(desc: str) -> pd.DataFrame:
        return pd.DataFrame({"rank": [0, 0], "pg": ["3", "0"], "pg_desc": [desc, "default_pg"], "collective": ["allreduce"] * 2,
                             "exposed_transfer_ns": [900, 100]})

    assert "async tensor parallelism" in _group_advice(waits("mesh_tp"), 0)
    assert "microbatches" in _group_advice(waits("mesh_pp"), 0)
    assert "bucketed" in _group_advice(waits("mesh_dp"), 0)
    assert "process group 3 mesh_dp" in _group_advice(waits("mesh_dp"), 0)


def test_set_aside_work_occupies_the_device(tmp_path):
    """SYNTHETIC (µs): work launched before the first step runs at the window's start. With or without
    --all-device-work, idle time, its causes and exposed copies are the same; compute and copy overlap differ
    only by the set-aside work's own time."""
    from synthetic import BASE, TraceBuilder, load

    b = TraceBuilder("set-aside compute under a kept copy", base_ns=BASE)
    b.step(1, 1_000_000, 11_000_000)
    b.launch(500_000, "kernel", 0, 7, 2_000_000, 4_000_000)  # launched before step 1: set aside, [2000, 6000)
    b.launch(1_100_000, "memcpy", 0, 14, 1_500_000, 1_500_000)  # kept HtoD [1500, 3000): [2000, 3000) under it
    b.launch(1_200_000, "kernel", 0, 7, 6_000_000, 3_000_000)  # kept compute [6000, 9000)
    b.launch(9_500_000, "kernel", 0, 7, 10_000_000, 500_000)  # kept, after an idle gap [9000, 10000)
    t = load(b, tmp_path)
    kept, full = overlap_report(t), overlap_report(t, all_device_work=True)
    k, f = kept.breakdown.iloc[0], full.breakdown.iloc[0]
    assert k["window_ns"] == f["window_ns"] == 9_000_000
    assert (k["set_aside_ns"], f["set_aside_ns"]) == (4_000_000, 0)
    assert k["idle_ns"] == f["idle_ns"] == 1_000_000  # the gap alone: no false idle under the set-aside kernel
    assert k["exposed_copy_ns"] == f["exposed_copy_ns"] == 500_000  # [1500, 2000): the rest was hidden
    assert f["compute_ns"] - k["compute_ns"] == k["set_aside_ns"]
    causes = [r.idle_causes[r.idle_causes["step"] == -1].set_index("cause")["ns"].to_dict() for r in (kept, full)]
    assert causes[0] == causes[1] and sum(causes[0].values()) == 1_000_000
    co = [int(r.copy_overlap.set_index("direction").loc["HtoD", "overlapped_ns"]) for r in (kept, full)]
    assert co == [0, 1_000_000]  # the overlap with the set-aside kernel is its own contribution


def test_prefetcher_reads_as_faster():
    # recorded (2x H100): the same loop with the next batch copied on the compute stream, or one step ahead on a side
    # stream; the prefetcher's steps are shorter and its copies hidden
    (off,), (on,) = (_summary(n).reports for n in ("prefetch-off", "prefetch-on"))
    assert on.throughput > off.throughput and on.headline["mean_step_ns"] < off.headline["mean_step_ns"]
    assert on.headline["copy_overlap"] > 0.5 > off.headline["copy_overlap"]
    assert on.breakdown["exposed_copy_ns"].sum() < off.breakdown["exposed_copy_ns"].sum()


def test_warmup_note_on_a_scheduled_trace_names_a_new_shape_or_recompile(tmp_path):
    """SYNTHETIC, ms: a trace whose steps start at ProfilerStep#2 (recorded after two steps had run, as
    torch.profiler.schedule(wait=1, warmup=1) does) with a first aten::conv2d of 38 ms against later ones of 1 ms: its
    note does not advise a profiler schedule; it names the first call as a new shape's or a recompile's."""
    from synthetic import TraceBuilder

    from traceprobe import load_trace

    ms = 1_000_000
    b = TraceBuilder("scheduled warm-up")
    for i, (step, first) in enumerate([(2, 38), (3, 1), (4, 1)]):
        t0 = i * 60 * ms
        b.step(step, t0, 60 * ms)
        b.cpu_op(t0, first * ms, "aten::conv2d")
        b.launch(t0 + first * ms - 20_000, "kernel", 0, 7, t0 + first * ms, 10 * ms)
    rep = overlap_report(load_trace(b.write(tmp_path / "t.pt.trace.json")))
    (note,) = [n for n in rep.notes if n.startswith("warm-up in the trace")]
    assert "recorded after 2 steps had run" in note and "a new shape or a recompile" in note
    assert "torch.profiler.schedule" not in note


def test_queued_work_bound_to_another_devices_work_is_a_dependency_named_by_it(tmp_path):
    """SYNTHETIC, µs: cuda:0 runs A [0, 100); its next kernel B, launched at 5, starts at 400, when cuda:1's kernel C
    [100, 400) ends (more than 20 µs after both B's launch and A: the dependency graph binds B to C). cuda:0's idle
    [100, 400) is ``dependency``, named by C; a control where nothing ends at B's start leaves it ``queued``."""
    us = 1_000
    for producer in (True, False):
        b = TraceBuilder("SYNTHETIC a cross-device wait")
        b.launch(0, "kernel", 0, 7, 0, 100 * us, name="A")
        b.launch(5 * us, "kernel", 0, 7, 400 * us, 50 * us, name="B")
        b.launch(50 * us, "kernel", 1, 7, 100 * us if producer else 10 * us, 300 * us if producer else 20 * us, name="C")
        tr = load_trace(b.write(tmp_path / f"wait{producer}.pt.trace.json"))
        got = idle_cause_table(tr, None, (0, 450 * us))
        dev0 = got[(got["device"] == 0) & (got["step"] == -1)].set_index("cause")
        if producer:
            assert dev0.loc["dependency", "ns"] == 300 * us and dev0.loc["dependency", "top"] == "C"
            assert "queued" not in dev0.index
        else:
            assert "dependency" not in dev0.index and dev0.loc["queued", "ns"] == 300 * us


@settings(max_examples=40, deadline=None)
@given(host_bound_traces())
def test_host_classes_of_several_threads_are_each_nanosecond_s_first_class_on_any_of_them(tr):
    """The dependency graph reads one thread set's classes (:func:`.host_classes.class_spans` of the launching threads
    together), the idle causes each thread's: each ns of the set's spans is the first class that any of its threads is
    in, the per-thread spans taken ns by ns (brute force over the grid); the classes are disjoint."""
    from traceprobe.analysis.device.busy import host_thread_codes
    from traceprobe.analysis.host.host_classes import class_spans

    if tr.host_events.empty:
        return
    threads = tuple(sorted(set(host_thread_codes(tr).tolist())))
    grid = np.arange(0, 2 * GRID + 40)

    def per_ns(spans) -> np.ndarray:
        out = np.full(grid.size, len(spans), np.int64)  # (none: outside every class)
        for k, (s, e) in enumerate(spans):
            for a, b in zip(s.tolist(), e.tolist()):
                hit = (grid >= a) & (grid < b)
                assert (out[hit] == len(spans)).all()  # disjoint
                out[hit] = k
        return out

    together = per_ns(class_spans(tr, threads))
    each = np.min([per_ns(class_spans(tr, (t,))) for t in threads], axis=0)
    assert np.array_equal(together, each)


@pytest.mark.parametrize("on_device", [True, False])
def test_an_optimizer_s_launches_are_dispatch_and_the_rest_of_it_optimizer(tmp_path, on_device):
    """SYNTHETIC: an ``Optimizer.step`` span of 100 µs holding a foreach op of 30 µs. On the device, the op launches a
    kernel: its 30 µs are ``launch`` (dispatch) and the optimizer keeps the 70 µs around it; on the host (the op
    launches nothing) the optimizer holds all 100 µs and nothing is ``launch``."""
    from traceprobe import intervals as iv
    from traceprobe.analysis.device.busy import host_thread_codes
    from traceprobe.analysis.host.host_classes import HOST_CAUSES, class_spans

    b = TraceBuilder("an optimizer's launches")
    b.step(1, 0, 200_000)
    b.annotation("Optimizer.step#Adam.step", 50_000, 100_000)
    b.cpu_op(60_000, 30_000, "aten::_foreach_add_")
    if on_device:
        b.launch(70_000, "kernel", 0, 7, 75_000, 2_000)
    tr = load(b, tmp_path)
    spans = dict(zip(HOST_CAUSES, class_spans(tr, tuple(sorted(set(host_thread_codes(tr).tolist()))))))
    base = int(tr.host_events["start_ns"].min())  # (the step's start)
    opt, launch = (iv.measure(spans[c], np.array([base]), np.array([base + 200_000]))[0] for c in ("optimizer", "launch"))
    assert (opt, launch) == ((70_000, 30_000) if on_device else (100_000, 0))


@st.composite
def nested_host_ops(draw):
    """SYNTHETIC host events on two threads, nested as Kineto records them: on a thread, two events are apart or one holds
    the other (equal spans included); ``cpu_op`` events and ``cuda_runtime`` calls."""
    b = TraceBuilder("nested host ops")
    kept: list[tuple[str, int, int]] = []
    for _ in range(draw(st.integers(1, 14))):
        tid = draw(st.sampled_from(["1", "2"]))
        s = draw(st.integers(0, GRID))
        e = s + draw(st.integers(0, 30))
        if all(t != tid or e <= a or s >= z or (a <= s and e <= z) or (s <= a and z <= e) for t, a, z in kept):
            kept.append((tid, s, e))
            if draw(st.booleans()):
                b.cpu_op(s, e - s, draw(st.sampled_from(["aten::is_nonzero", "aten::item", "aten::add"])), tid=tid)
            else:
                b.runtime(s, e - s, "cudaStreamSynchronize", tid=tid)
    return b


def _at_a_boundary() -> TraceBuilder:
    """SYNTHETIC: two ops one after the other on a thread and a sync of no length where one ends and the next starts."""
    b = TraceBuilder("a call at a boundary")
    b.cpu_op(0, 10, "aten::item")
    b.cpu_op(10, 10, "aten::add")
    b.runtime(10, 0, "cudaStreamSynchronize")
    return b


@settings(max_examples=150, deadline=None)
@given(nested_host_ops())
@example(b=_at_a_boundary())  # (held by both ops: the first is its call)
def test_program_calls_are_the_outermost_op_holding_each_event(tmp_path_factory, b):
    """Each host event's program call (:func:`.host_classes.program_calls`) is, by brute force, the ``cpu_op`` on its
    thread that holds it and starts first (the longer first, then the first row), or itself where none holds it."""
    from traceprobe.analysis.host.host_classes import program_calls

    tr = load(b, tmp_path_factory.mktemp("nested"))
    host = tr.host_events
    rows = list(zip(host["tid"].astype(str), host["cat"].astype(str), host["start_ns"], host["end_ns"]))
    want = []
    for i, (tid, _, s, e) in enumerate(rows):
        holders = [(a, -z, j) for j, (t, cat, a, z) in enumerate(rows) if t == tid and cat == "cpu_op" and a <= s and z >= e]
        want.append(min(holders)[2] if holders else i)
    assert program_calls(tr).tolist() == want


def _launch_bound_steps(old: bool) -> TraceBuilder:
    """SYNTHETIC, µs: 4 steps of 1,000 µs; in each, 10 ``aten::add`` ops of 20 µs, 95 µs apart, each launching a 3 µs
    kernel; the device idles ~97% and the host is outside any op 80% of each step. ``old``: written in the torch
    1.8/1.9 layout (categories ``Operator``, ``Runtime``, ``Kernel``; ``ProfilerStep#N`` an ``Operator``), else in
    Kineto's (``cpu_op``, ``cuda_runtime``, ``kernel``; the step a ``user_annotation``)."""
    us = 1_000
    b = TraceBuilder("2021 layout" if old else "Kineto layout")
    for n in range(4):
        s0 = n * 1_000 * us
        step = b.step(n + 1, s0, 1_000 * us)
        for i in range(10):
            t = s0 + 10 * us + i * 95 * us
            b.cpu_op(t, 20 * us, "aten::add")
            b.launch(t + 10 * us, "kernel", 0, 7, t + 13 * us, 3 * us, name="add_kernel")
        if old:
            step["cat"] = "Operator"
    if old:
        for e in b.events:
            e["cat"] = {"cpu_op": "Operator", "cuda_runtime": "Runtime", "kernel": "Kernel"}.get(e["cat"], e["cat"])
    return b


def test_a_step_annotation_never_names_the_op_in_the_2021_layout(tmp_path):
    """SYNTHETIC (:func:`_launch_bound_steps`): torch 1.8/1.9 wrote ``ProfilerStep#N`` as an ``Operator`` holding every
    op of its step. It is filed as a ``user_annotation`` (as Kineto writes it), so it neither makes the host "in an op"
    (the time between the ops is host outside ops, not launch-bound) nor names the op that launched the step's work:
    the 2021 layout reads as Kineto's does, ``aten::add`` named."""
    reps = {}
    for old in (True, False):
        tr = load(_launch_bound_steps(old), tmp_path, f"t{old}.pt.trace.json")
        steps = tr.host_events[tr.host_events["name"].astype(str).str.startswith("ProfilerStep#")]
        assert len(steps) == 4 and set(steps["cat"].astype(str)) == {"user_annotation"}
        assert set(tr.host_events["cat"].astype(str)) == {"cpu_op", "cuda_runtime", "user_annotation"}
        reps[old] = overlap_report(tr)
    old, new = reps[True], reps[False]
    for r in (old, new):
        text = " ".join(r.findings["text"].astype(str)) + " ".join(r.idle_causes["top"].astype(str))
        assert "ProfilerStep" not in text and "aten::add" in text
        assert r.findings.iloc[0]["kind"] == "idle_host"
    cols = ["device", "step", "cause", "ns", "top"]
    pd.testing.assert_frame_equal(old.idle_causes[cols], new.idle_causes[cols])
    assert old.findings[["kind", "label", "headroom_ns"]].equals(new.findings[["kind", "label", "headroom_ns"]])


def test_a_step_written_as_an_op_is_never_the_named_op():
    """SYNTHETIC, ns (a Trace built by hand, not through the reader): a ``ProfilerStep#1`` filed as a ``cpu_op``
    holding an ``aten::item`` (a sync) and an ``aten::add`` (a launch). The step is no op: the sync is named by
    ``aten::item``, the launch-bound time by ``aten::add``, never by the step, though it holds the most time."""
    from traceprobe.analysis.host.host_classes import host_classes, program_call_top, program_calls, top_name

    tr = make_trace([(0, 7, "compute", 0, 10, 1), (0, 7, "compute", 60, 70, 2), (0, 7, "compute", 200, 210, 3)],
                    [("cpu_op", "ProfilerStep#1", 0, 300, -1), ("cuda_runtime", "cudaLaunchKernel", 0, 1, 1),
                     ("cpu_op", "aten::item", 20, 50, -1), ("cuda_runtime", "cudaMemcpy", 22, 48, -1),
                     ("cpu_op", "aten::add", 52, 58, -1), ("cuda_runtime", "cudaLaunchKernel", 53, 55, 2),
                     ("cuda_runtime", "cudaLaunchKernel", 150, 152, 3)])
    names = tr.host_events["name"].astype(str).to_numpy()
    step = int(np.flatnonzero(names == "ProfilerStep#1")[0])
    assert host_classes(tr)[step] == -1
    assert names[program_calls(tr)[int(np.flatnonzero(names == "cudaMemcpy")[0])]] == "aten::item"
    everything = np.arange(len(names))
    assert top_name(tr, everything, (np.array([0]), np.array([300]))) == "aten::item"
    assert top_name(tr, np.array([step]), (np.array([0]), np.array([300]))) == ""
    assert program_call_top(tr, np.flatnonzero(names == "cudaMemcpy"), (np.array([20]), np.array([50]))) == "aten::item"
    got = idle_cause_table(tr).set_index("cause")
    assert "ProfilerStep" not in " ".join(got["top"].astype(str))
    assert got.loc["sync", "top"] == "aten::item"
