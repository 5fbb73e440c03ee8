"""The dependency-graph replay and its what-ifs (traceprobe.analysis.causal.dependency_graph, traceprobe.analysis.causal.what_if).

SYNTHETIC traces (tests/synthetic.py's TraceBuilder) with gains computed by hand, exact to the ns; a brute-force
reference of the replay (every node's formula, re-evaluated in plain Python until nothing changes) on random
SYNTHETIC traces (hypothesis); and the recorded matrix of sample_traces/matrix (4x H200), each scenario against
what was built into it (its injected.json).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import HELDOUT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recorded import replayed
from synthetic import TraceBuilder

from traceprobe import load_trace
from traceprobe.analysis.causal.class_times import ClassTimes
from traceprobe.analysis.causal.critical_path import critical_path
from traceprobe.analysis.causal.dependency_graph import HOST_CLASSES, rank_graph
from traceprobe.analysis.causal.sweep import NEG
from traceprobe.analysis.causal.what_if import replay, what_if, window_job
from traceprobe.analysis.causal.what_if_windows import window_what_if
from traceprobe.analysis.job.collectives import collective_table, match_window

MATRIX = Path(__file__).resolve().parent.parent / "sample_traces" / "matrix"


def _gain(df, rank: int, cause: str) -> int:
    row = df[(df["rank"] == rank) & (df["cause"] == cause)]
    assert len(row) == 1, df
    return int(row["gain_ns"].iloc[0])


def _one_rank(tmp_path: Path) -> Path:
    """A step: a 1 ms kernel launched at 50 µs, a 5 ms host sleep, a second 1 ms kernel, a stream sync after it."""
    b = TraceBuilder("one rank, a sleep between two launches")
    b.step(1, 0, 6_170_000)  # (to the sync's return: prof.step() right after it)
    b.cpu_op(0, 100_000, "aten::linear")
    b.launch(50_000, "kernel", 0, 7, 60_000, 1_000_000)           # call [50, 51] µs, kernel A [60, 1060] µs
    b.cpu_op(5_100_000, 100_000, "aten::relu")                    # (sleep: outside ops from 100 µs to 5.1 ms)
    b.launch(5_150_000, "kernel", 0, 7, 5_160_000, 1_000_000)     # kernel B [5160, 6160] µs
    b.runtime(5_200_000, 970_000, "cudaStreamSynchronize")         # returns at 6170 µs, 10 µs after B
    return b.write(tmp_path / "one.pt.trace.json")


def test_a_sleep_gives_back_what_the_device_did_not_fill(tmp_path):
    g = rank_graph(load_trace(_one_rank(tmp_path)))
    job = window_job([g], None)
    t, end = replay(job, g.h, job.d, np.zeros(g.t.size, bool))
    assert np.array_equal(t, g.t) and np.array_equal(end, g.end)  # the trace's own times, exactly
    host = HOST_CLASSES.index("host")
    assert g.class_ns.total(host) == 5_000_000 and g.class_ns.total(HOST_CLASSES.index("dispatch")) == 200_000
    df = what_if([g])
    # without the sleep B is launched at 160 µs but waits for A (ends 1060 µs): it ends at 2060 µs, the sync returns
    # 10 µs later: 6170 - 2070 µs, not the 5 ms slept
    assert _gain(df, 0, "host") == 4_100_000
    assert _gain(df, 0, "sync") == 10_000          # the sync waits for nothing: it returns when it is called
    assert _gain(df, 0, "dispatch") == 151_000     # 200 µs in launching ops, of which the 49 µs before the sync end under B
    assert df["cause"].iloc[0] == "host" and (df["per_step_ns"] == df["gain_ns"]).all()


def test_a_trace_without_host_ops_or_sampled_does_not_call_its_host_time_outside_ops(tmp_path):
    """SYNTHETIC: the same launches and sync as :func:`_one_rank` but no ``cpu_op`` recorded (a trace of runtime calls and
    kernels only, as TraceLens's ``gpu_only_trace``): the 5 ms between the launches is the host's, but whether an op, Python
    or a sleep held it the trace cannot tell. The what-if gives 4.1 ms and the 50 µs before the second launch that
    ``aten::relu`` held there (here no op holds them: host time too); its name and advice say what is known."""
    b = TraceBuilder("SYNTHETIC: runtime calls only")
    b.step(1, 0, 6_170_000)
    b.launch(50_000, "kernel", 0, 7, 60_000, 1_000_000)
    b.launch(5_150_000, "kernel", 0, 7, 5_160_000, 1_000_000)
    b.runtime(5_200_000, 970_000, "cudaStreamSynchronize")
    g = rank_graph(load_trace(b.write(tmp_path / "bare.pt.trace.json")))
    assert not g.host_ops and rank_graph(load_trace(_one_rank(tmp_path))).host_ops
    w = window_what_if("bare", "steps 1-1", "", [g], None)
    assert w.top is not None and w.top["cause"] == "host" and w.top["gain_ns"] == 4_100_000 + 50_000
    assert w.label().startswith("host between launch calls -")
    assert "cannot be told" in w.finding() and "outside any op" not in w.finding()
    from dataclasses import replace

    from traceprobe.report.actions import what_if_top
    top = what_if_top(w)
    assert top is not None and "record host ops" in top.do
    from traceprobe.analysis.job.graph_tables import graph_blob, graph_from_blob
    assert not graph_from_blob(graph_blob(g)).host_ops  # (a summary's packed graph keeps it)
    # a sampled trace (host ops recorded, but few of its correlation ids kept): the ops it dropped may hold that time
    sampled = replace(w, host_ops=True, id_density=0.001)
    assert sampled.label().startswith("host between launch calls -") and "sampled trace kept" in sampled.finding()
    top = what_if_top(sampled)
    assert top is not None and "not sampled" in top.do
    assert replace(w, host_ops=True).label().startswith("host outside ops -")


def test_the_host_time_after_the_last_call_of_the_last_step_is_on_the_path(tmp_path):
    """SYNTHETIC, after HTA's ``triton_example``: a 10 s step whose one op dispatches for 1.4 ms a 2 µs kernel, then
    nothing recorded to the step's end. The path is walked back from the step's end: its host time after the last call
    is the step's (outside ops), and removing it gives back 9,998.6 ms; the 1.4 ms dispatch is under the floor, 1% of
    the step (it was the top, ``launch-bound dispatch -1.4 ms/step``, with the host tail left out)."""
    b = TraceBuilder("SYNTHETIC: a long step, a short kernel")
    b.step(1, 0, 10_000_000_000)
    b.cpu_op(100_000, 1_400_000, "aten::add")
    b.launch(1_450_000, "kernel", 0, 7, 1_460_000, 2_000)
    w = window_what_if("long", "steps 1-1", "", [rank_graph(load_trace(b.write(tmp_path / "long.pt.trace.json")))], None)
    assert w.floor_ns == 100_000_000 and w.top is not None
    assert (w.top["cause"], w.top["gain_ns"]) == ("host", 9_998_600_000) and "dispatch" not in set(w.table["cause"])
    assert w.path_line() == "critical path: 100% host outside ops"


def _nccl(b: TraceBuilder, at: int, start: int, dur: int) -> None:
    ev = b.launch(at, "nccl", 0, 17, start, dur)
    ev["args"].update({"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000, "Group size": 2,
                       "dtype": "Float", "Process Group Name": "0"})


def _sleeping_pair(tmp_path: Path):
    """SYNTHETIC two ranks: each launches a 1 ms kernel at 50 µs, then an all-reduce; rank 1 sleeps 3 ms before its
    launch, so rank 0 waits inside its kernel; both end at 3660 µs. Returns the ranks' graphs and matched window."""
    tables, graphs = {}, []
    for r in (0, 1):
        b = TraceBuilder(f"rank {r}", rank=r, world_size=2)
        b.step(1, 0, 200_000 + (3_000_000 if r == 1 else 0))  # (to the end of its last op)
        b.cpu_op(0, 100_000, "aten::linear")
        b.launch(50_000, "kernel", 0, 7, 60_000, 1_000_000)
        late = 3_000_000 if r == 1 else 0
        b.cpu_op(100_000 + late, 100_000, "c10d::allreduce_")
        _nccl(b, 150_000 + late, 160_000 + late, 3_500_000 - late)
        trace = load_trace(b.write(tmp_path / f"r{r}.pt.trace.json"))
        tables[r], graphs = collective_table(trace), graphs + [rank_graph(trace)]
    return graphs, match_window(tables)


def test_a_sleeping_rank_delays_the_other_through_their_all_reduce(tmp_path):
    """Rank 1 sleeps 3 ms before launching its all-reduce; rank 0 waits inside its kernel. Without the sleep both
    arrive at 160 µs and finish at 660 µs: the window ends with rank 0's and 1's compute kernels, at 1060 µs."""
    graphs, w = _sleeping_pair(tmp_path)
    assert w.matched == 1 and w.wait_ns == {0: 3_000_000, 1: 0}
    df = what_if(graphs, w.per_rank)
    assert _gain(df, 1, "host") == 3_660_000 - 1_060_000
    assert df.iloc[0]["rank"] == 1 and df.iloc[0]["cause"] == "host"
    assert not ((df["rank"] == 0) & (df["cause"] == "host")).any()  # rank 0 has no time outside ops to remove


def _brute_force(g, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The replay's formulas, node by node, re-evaluated until nothing changes (one rank, no collectives)."""
    t, end = g.t.astype(object).tolist(), g.end.astype(object).tolist()
    while True:
        changed = False
        for k in range(g.start.size):
            cands = [g.fixed[k]] if g.fixed[k] > NEG else []
            if k > 0 and g.lane[k - 1] == g.lane[k]:
                cands.append(end[k - 1] + g.g[k])
            if g.anchor[k] >= 0:  # from the launch call's start
                i = g.anchor[k]
                cands.append((t[i - 1] + int(h[i]) if i > 0 else t[0]) - int(g.pre_dur[i]) + g.l[k])
            if g.dep[k] >= 0:
                cands.append(end[g.dep[k]] + g.dep_lag[k])
            v = max(cands) + int(g.d[k])
            changed |= v != end[k]
            end[k] = v
        for i in range(g.t.size):
            v = int(g.t[0]) if i == 0 else t[i - 1] + int(h[i])
            if i > 0 and g.target[i] >= 0:
                v = max(v, end[g.target[i]] + int(g.ret[i]))
            for a, k in zip(g.also_anchor.tolist(), g.also_op.tolist()):  # (a device-wide sync: every stream's work)
                if a == i and i > 0:
                    v = max(v, end[k] + int(g.ret[i]))
            changed |= v != t[i]
            t[i] = v
        if not changed:
            return np.array(t, np.int64), np.array(end, np.int64)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.integers(0, 1), st.integers(1_000, 400_000), st.integers(0, 300_000),
                              st.integers(0, 60_000), st.booleans()), min_size=1, max_size=25),
       cls=st.integers(0, len(HOST_CLASSES) - 1))
def test_replay_equals_a_brute_force_evaluation(tmp_path, ops, cls):
    """Random SYNTHETIC traces: launches on two streams with host gaps (ops or sleeps) between them, some followed by a
    stream sync. The replay gives the trace's own times, and with one host class removed the brute force's."""
    b = TraceBuilder("random launches")
    now, busy = 0, {0: 0, 1: 0}
    b.step(1, 0, 10**9)
    for stream, dur, gap, op_gap, sync in ops:
        now += gap
        if op_gap:
            b.cpu_op(now, op_gap, "aten::randn")
            now += op_gap
        start = max(now + 1_000 + 5_000, busy[stream])
        b.launch(now, "kernel", 0, 7 + stream, start, dur)
        busy[stream] = start + dur
        now += 1_000
        if sync:
            ret = max(busy.values()) + 2_000
            b.runtime(now, max(ret - now, 1_000), "cudaDeviceSynchronize")
            now = max(ret, now + 1_000)
    g = rank_graph(load_trace(b.write(tmp_path / "r.pt.trace.json")))
    job = window_job([g], None)
    t, end = replay(job, g.h, job.d, np.zeros(g.t.size, bool))
    assert np.array_equal(t, g.t) and np.array_equal(end, g.end)
    h = g.h - g.class_ns.row(cls)
    t, end = replay(job, h, job.d, np.zeros(g.t.size, bool))
    bt, bend = _brute_force(g, h)
    assert np.array_equal(t, bt) and np.array_equal(end, bend)


def test_a_device_wide_sync_waits_for_every_stream(tmp_path):
    """SYNTHETIC: stream 7's A runs 10-500 µs; stream 9's B is launched after a 300 µs CPU op and ends last (600 µs);
    cudaDeviceSynchronize returns at 602 µs, then C runs 100 µs. Without the CPU op B ends at 300 µs, but the sync
    still waits for A: the window ends 100 µs earlier, not 300."""
    us = 1_000
    b = TraceBuilder("device-wide sync")
    b.step(1, 0, 10**7)
    b.launch(0, "kernel", 0, 7, 10 * us, 490 * us)  # A
    b.cpu_op(2 * us, 300 * us, "aten::randn")
    b.launch(303 * us, "kernel", 0, 9, 310 * us, 290 * us)  # B
    b.runtime(320 * us, 282 * us, "cudaDeviceSynchronize")
    b.launch(603 * us, "kernel", 0, 7, 610 * us, 100 * us)  # C
    g = rank_graph(load_trace(b.write(tmp_path / "s.pt.trace.json")))
    assert g.also_op.size == 1 and g.lane_names[g.lane[g.also_op[0]]] == "cuda:0 stream 7"
    table = what_if([g])
    gain = table.loc[table["cause"] == "cpu_op", "gain_ns"]
    assert gain.tolist() == [100 * us]


def _matrix(name: str):
    w, found = replayed(MATRIX / name)
    facts = {f["folder"]: f for f in map(json.loads, (MATRIX / "injected.jsonl").read_text().splitlines())}[name]
    return facts, w, found.table


# scenario: the top what-if's cause, and the tolerance of its gain per step against the built-in time (None: the
# gain is not within the tolerance yet; the cause and rank must still be the built-in ones). A cause built
# into every rank (late_rank null) is named for every rank (-1).
NAMED = {
    "mesh-compute": ("imbalance", 0.10), "mesh-sleep": ("host", 0.15), "ddp-pageable": ("pageable_copy", 0.10),
    "ddp-new-shape": ("slow_call", 0.10), "ddp-recompile": ("compile", None), "ep-skew": ("imbalance", 0.10),
    "ddp-compute": ("imbalance", 0.10), "fsdp-compute": ("imbalance", 0.10), "fsdp-sleep": ("host", None),
    "ddp-pinned-alloc": ("pinned_alloc", None), "ddp-device-alloc": ("device_alloc", None),
    "pp-compute": ("imbalance", None),
}


def _few(names, default):
    """The matrix scenarios as parameters, those not in ``default`` marked slow (each loads and replays four ranks)."""
    return [pytest.param(n, marks=() if n in default else pytest.mark.slow) for n in names]


@pytest.mark.parametrize("name", _few(sorted(NAMED), {"mesh-compute", "mesh-sleep", "ddp-pageable"}))
def test_matrix_top_what_if_names_the_built_in_cause_and_rank(name):
    facts, w, df = _matrix(name)
    assert not w.mismatched
    cause, tolerance = NAMED[name]
    top = df.iloc[0]
    late = facts["late_rank"] if facts["late_rank"] is not None else -1
    assert (top["cause"], int(top["rank"])) == (cause, late)
    if tolerance is not None:
        built_in = facts["injected_ms_per_step"] * 1e6
        assert abs(top["per_step_ns"] - built_in) <= tolerance * built_in


@pytest.mark.parametrize("name", _few(["ddp-sleep", "ddp-cpu-op", "ddp-dataloader"], {"ddp-sleep"}))
def test_matrix_host_delays_hidden_behind_device_work_give_nothing_back(name):
    """Without a sync in its loop, rank 1's 20 ms of host delay per step hides behind the device work the host queued
    ahead (the steps take as long as the balanced run's): removing any cause of that rank gives back under 5% of it."""
    facts, _, df = _matrix(name)
    # (a rank's causes are replayed alone only where the critical path runs: the late rank's rows, if any, and the
    # built-in cause removed on every rank at once give back under 5% of it)
    mine = df[(df["rank"] == facts["late_rank"]) | ((df["rank"] == -1) & df["cause"].isin(["host", "cpu_op", "data_loading"]))]
    assert len(mine) and (mine["per_step_ns"] < 0.05 * facts["injected_ms_per_step"] * 1e6).all()


@pytest.mark.parametrize("name", _few(["ddp-balanced", "fsdp-balanced", "mesh-balanced", "ep-balanced"], {"mesh-balanced"}))
def test_matrix_balanced_controls_name_no_straggler(name):
    _, w, df = _matrix(name)
    assert not w.mismatched and w.matched > 0
    assert (df["per_step_ns"] < 500_000).all(), df.head()


def test_the_critical_path_of_one_rank_covers_its_window_exactly(tmp_path):
    """SYNTHETIC (the sleep between two launches above): the sync's return, kernel B, its launch, then the host back to
    the step's start: 5 ms outside ops (the sleep) and 151 µs in the launching ops (the launch call's own 1 µs with them:
    the launch segment is its latency, from the call's end)."""
    g = rank_graph(load_trace(_one_rank(tmp_path)))
    p = critical_path([g])
    got = [(c, n, s, e) for c, n, s, e in zip(p["cause"], p["ns"], p["start_ns"], p["end_ns"])]
    assert got == [("sync", 10_000, 6_160_000, 6_170_000), ("compute", 1_000_000, 5_160_000, 6_160_000),
                   ("launch", 9_000, 5_151_000, 5_160_000), ("dispatch", 151_000, 0, 5_151_000), ("host", 5_000_000, 0, 5_151_000)]
    assert p["ns"].sum() == 6_170_000  # the window, from the step's start to the sync's return


def test_a_launched_op_that_starts_late_puts_a_queued_wait_on_the_path(tmp_path):
    """SYNTHETIC (the step above, kernel B starting 400 µs after its call returned, the stream idle, no dependency in
    the trace): the launch latency on the path is 50 µs (the idle causes' ``LAUNCH_LATENCY_NS``), the other 350 µs a
    ``queued`` wait on B's stream, named as a wait the trace does not show; together they still cover the window."""
    b = TraceBuilder("one rank, a late start after a launch")
    b.step(1, 0, 6_561_000)
    b.cpu_op(0, 100_000, "aten::linear")
    b.launch(50_000, "kernel", 0, 7, 60_000, 1_000_000)
    b.cpu_op(5_100_000, 100_000, "aten::relu")
    b.launch(5_150_000, "kernel", 0, 7, 5_551_000, 1_000_000)     # call [5150, 5151] µs, kernel B [5551, 6551] µs
    b.runtime(5_200_000, 1_361_000, "cudaStreamSynchronize")       # returns at 6561 µs
    p = critical_path([rank_graph(load_trace(b.write(tmp_path / "late.pt.trace.json")))])
    got = [(c, n, s, e) for c, n, s, e in zip(p["cause"], p["ns"], p["start_ns"], p["end_ns"])]
    assert got[:4] == [("sync", 10_000, 6_551_000, 6_561_000), ("compute", 1_000_000, 5_551_000, 6_551_000),
                       ("queued", 350_000, 5_201_000, 5_551_000), ("launch", 50_000, 5_151_000, 5_201_000)]
    assert p["lane"].iloc[2] == "cuda:0 stream 7" and p["name"].iloc[2] == "(a wait the trace does not show)"
    assert p["ns"].sum() == 6_561_000


def test_the_critical_path_crosses_into_the_rank_that_arrived_last(tmp_path):
    """SYNTHETIC (the sleeping rank above): rank 0's all-reduce transfer after rank 1 arrived, then rank 1: its launch
    and its 3 ms sleep; rank 0's 3 ms wait inside its kernel is not on the path."""
    graphs, w = _sleeping_pair(tmp_path)
    p = critical_path(graphs, w.per_rank)
    got = [(r, c, n) for r, c, n in zip(p["rank"], p["cause"], p["ns"])]
    assert got[:3] == [(0, "comm", 500_000), (1, "launch", 9_000), (1, "dispatch", 151_000)]
    assert got[3:] == [(1, "host", 3_000_000)] and p["ns"].sum() == 3_660_000


def test_collectives_listed_for_a_rank_without_communication_kernels(tmp_path):
    """A window whose collectives name a rank whose trace holds no communication kernel (SYNTHETIC: rank 1 has one
    compute kernel only): its rows bind nothing, and the replay runs (it raised IndexError)."""
    graphs, w = _sleeping_pair(tmp_path)
    b = TraceBuilder("rank 1 without NCCL", rank=1, world_size=2)
    b.launch(50_000, "kernel", 0, 7, 60_000, 1_000_000)
    lone = rank_graph(load_trace(b.write(tmp_path / "lone.pt.trace.json")))
    df = what_if([graphs[0], lone], w.per_rank)
    assert len(df) and (df["gain_ns"] >= 0).all()


def _logged_steps(tmp_path: Path, outer: str = "") -> Path:
    """SYNTHETIC: three steps 5.03 ms apart, each to its sync's return; each prepares its batch on the host (2 ms outside
    ops), launches a 3 ms kernel, then logs its loss (``aten::item``: a stream sync that returns when the kernel ends),
    or, with ``outer``, reads it inside that op (``aten::is_nonzero``: ``if loss > x``)."""
    us = 1_000
    b = TraceBuilder("a sync at each step's end exposes the next step's host work")
    for i in range(3):
        s = i * 5_030 * us
        b.step(i + 1, s, 5_020 * us)  # (to the sync's return)
        b.cpu_op(s + 2_000 * us, 20 * us, "aten::linear")
        b.launch(s + 2_005 * us, "kernel", 0, 7, s + 2_010 * us, 3_000 * us)
        if outer:
            b.cpu_op(s + 2_038 * us, 2_988 * us, outer)
        b.cpu_op(s + 2_040 * us, 2_985 * us, "aten::item")
        b.runtime(s + 2_050 * us, 2_970 * us, "cudaStreamSynchronize")  # returns at s + 5,020 µs, 10 µs after the kernel
    return b.write(tmp_path / "logged.pt.trace.json")


def test_a_sync_that_exposes_the_host_work_after_it_is_named_before_it(tmp_path):
    g = rank_graph(load_trace(_logged_steps(tmp_path)))
    w = window_what_if("r", "w", "", [g], None)
    top = w.table.iloc[0]
    # without the syncs each step's 2 ms of host work runs under the kernel before it: every step after the first
    # gains it (the first step's work comes before any sync); without the host work each step gains it too, but it is
    # work the step needs, and it cost time only because the sync had emptied the queue
    assert top["cause"] == "sync" and top["top"] == "aten::item"
    assert _gain(w.table, 0, "host") > top["gain_ns"] >= 0.5 * _gain(w.table, 0, "host")
    # 4.07 ms in the window, of which 20 µs by the first step's end (its sync's return after the kernel): per step, the
    # gain after the first step over the two others, not the window's gain over three
    assert (top["gain_ns"], top["per_step_ns"]) == (4_070_000, (4_070_000 - 20_000) // 2)
    assert "the host work after it (host outside ops" in w.finding()


@pytest.mark.parametrize(("outer", "says", "do"), [
    ("aten::is_nonzero", "a Python condition reads a device tensor (aten::is_nonzero)", "keep the check on the device"),
    ("aten::index", "an op whose output size depends on the data (aten::index)", "use torch.where or give the output size"),
    ("", "drop the syncs in the loop (aten::item)", "drop syncs from the loop")])
def test_a_sync_is_named_by_the_op_the_program_called(tmp_path, outer, says, do):
    """SYNTHETIC: the logged steps above with the loss read inside another op: ``if loss > x`` (``aten::is_nonzero``
    holding ``aten::item``) or boolean-mask indexing (``aten::index``); the sync's finding names the op the program
    called, not the ``aten::item`` inside it, and its action fits it."""
    from traceprobe.report.actions import what_if_top

    w = window_what_if("r", "w", "", [rank_graph(load_trace(_logged_steps(tmp_path, outer)))], None)
    assert w.top is not None and w.top["cause"] == "sync" and w.top["top"] == (outer or "aten::item")
    assert says in w.finding()
    top = what_if_top(w)
    assert top is not None and top.do.startswith(do)


def test_a_host_side_finding_of_a_trace_with_stacks_says_its_gain_is_an_upper_bound(tmp_path):
    """SYNTHETIC: the one-rank sleep above, its graph marked as recorded with 1,200 Python frames (Kineto's stack
    recording slows the host): the host finding says so; without frames it does not. The packed graph keeps them."""
    from dataclasses import replace

    from traceprobe.analysis.job.graph_tables import graph_blob, graph_from_blob

    g = rank_graph(load_trace(_one_rank(tmp_path)))
    assert g.stack_frames == 0 and "Python stacks" not in window_what_if("r", "w", "", [g], None).finding()
    w = window_what_if("r", "w", "", [replace(g, stack_frames=1_200)], None)
    assert w.top is not None and w.top["cause"] == "host"
    assert "recorded with Python stacks (1,200 frames a step on a rank), whose recording slows the host" in w.finding()
    assert graph_from_blob(graph_blob(replace(g, stack_frames=1_200))).stack_frames == 1_200


def test_each_critical_path_segment_names_the_step_holding_its_end(tmp_path):
    """SYNTHETIC (three logged steps above): each segment's ``step`` is the step whose host interval holds its end,
    checked one segment at a time; the path covers all three steps."""
    g = rank_graph(load_trace(_logged_steps(tmp_path)))
    cp = critical_path([g])
    steps = g.steps
    for end, step in zip(cp["end_ns"], cp["step"]):
        holding = steps[(steps["start_ns"] <= end) & (end <= steps["end_ns"])]["step"].tolist()
        assert step == (holding[-1] if holding else -1)
    assert set(cp["step"]) >= {1, 2, 3}


def _last_step_sleep(tmp_path: Path) -> Path:
    """SYNTHETIC: three 1.1 ms steps, each a 1 ms kernel and a stream sync after it (returning 10 µs after the kernel);
    the third step's host sleeps 3 ms before its launch."""
    us = 1_000
    b = TraceBuilder("a host gap in the last step only")
    at = 0
    for i in range(3):
        sleep = 3_000 * us if i == 2 else 0
        b.step(i + 1, at, 1_100 * us + sleep)
        b.cpu_op(at + sleep, 20 * us, "aten::linear")
        b.launch(at + sleep + 5 * us, "kernel", 0, 7, at + sleep + 10 * us, 1_000 * us)
        b.runtime(at + sleep + 20 * us, 1_000 * us, "cudaStreamSynchronize")
        at += 1_100 * us + sleep
    return b.write(tmp_path / "last.pt.trace.json")


def test_a_cause_of_the_last_step_alone_is_not_given_per_step_after_the_first(tmp_path):
    """SYNTHETIC: three 2 ms steps, each a 1 ms kernel and a stream sync after it; the third step's host sleeps 3 ms
    before its launch. The sleep gives back 3 ms, all in the third step: per step, the gain over the three steps (the
    first step held no such host time: the figure after the first step would count it twice)."""
    us = 1_000
    t = what_if([rank_graph(load_trace(_last_step_sleep(tmp_path)))])
    row = t[(t["rank"] == 0) & (t["cause"] == "host")].iloc[0]
    assert row["gain_ns"] >= 3_000 * us and row["per_step_ns"] == row["gain_ns"] // 3


def test_step_gains_add_up_and_fall_in_the_step_that_held_the_cause(tmp_path):
    """SYNTHETIC: the logged steps above and the last-step sleep. Step by step, the syncs give nothing back in the first
    step (its host work comes before any sync) and 2 ms in each later one, and the steps' gains add up to the window's
    (the last step's work ends last); the sleep of the third step gives back its 3 ms there, not before."""
    from traceprobe.analysis.causal.what_if import what_ifs

    g = rank_graph(load_trace(_logged_steps(tmp_path)))
    table, steps = what_ifs([g])
    sync = steps[steps["cause"] == "sync"].sort_values("step")
    assert sync["step"].tolist() == [1, 2, 3]
    assert sync["gain_ns"].iloc[0] == 20_000 and sync["gain_ns"].sum() == _gain(table, 0, "sync")
    assert (sync["gain_ns"].iloc[1:] >= 2_000_000).all()
    w = window_what_if("r", "w", "", [g], None)
    tops = w.step_tops()
    assert tops["cause"].tolist()[1:] == ["sync", "sync"]  # (the table's order: the sync before the work it exposed)

    us = 1_000
    table, steps = what_ifs([rank_graph(load_trace(_last_step_sleep(tmp_path)))])
    host = steps[steps["cause"] == "host"].sort_values("step")["gain_ns"].tolist()
    assert max(host[:2]) < 100 * us and host[2] >= 3_000 * us and sum(host) == _gain(table, 0, "host")  # (the steps' own
    # time outside ops, 80 µs each, besides)


def test_a_run_on_the_critical_path_is_named_by_what_holds_most_of_it(tmp_path):
    """SYNTHETIC: two 1 ms GEMMs launched back to back, then a 10 µs DtoH copy queued behind them on the same stream (a
    loss's ``.item()``): the run ends in the copy but is compute, named by the GEMM (it was called ``copy`` by its last op)."""
    us = 1_000
    b = TraceBuilder("a run of kernels ending in a copy")
    b.step(1, 0, 19 * us)  # (the host is done after its last launch)
    b.launch(10 * us, "kernel", 0, 7, 20 * us, 1_000 * us)
    b.launch(15 * us, "kernel", 0, 7, 1_020 * us, 1_000 * us)
    b.launch(18 * us, "memcpy", 0, 7, 2_020 * us, 10 * us, "DtoH")
    p = critical_path([rank_graph(load_trace(b.write(tmp_path / "run.pt.trace.json")))])
    top = p.iloc[0]
    assert (top["cause"], top["ns"]) == ("compute", 2_010_000) and top["name"].startswith("sm90_xmma_gemm")


def test_syncs_on_copies_from_pageable_memory_ask_for_pinned_batches_not_fewer_items():
    """Recorded (tests/data/heldout/w2-patterns/ddp-dataloader-workers, 2x H200): each step moves its DataLoader
    batch with ``.to(device)`` from pageable memory, and the copy's call waits for the stream's queued work: the syncs
    are those copies, so the action is to pin the batches, not to drop ``.item()``. The synthetic ``aten::item`` syncs
    above keep their name (test_a_sync_that_exposes_the_host_work_after_it_is_named_before_it)."""
    from traceprobe.analysis.causal.sync_names import PAGEABLE_HTOD
    from traceprobe.report.actions import DO_CAUSE, what_if_top

    _, w = replayed(HELDOUT / "w2-patterns" / "ddp-dataloader-workers")
    assert w.top is not None and (w.top["cause"], w.top["top"]) == ("sync", PAGEABLE_HTOD)
    assert "pin_memory=True" in w.finding()
    top = what_if_top(w)
    assert top is not None and top.do == DO_CAUSE["sync_htod"]


def test_a_sampled_or_cut_short_window_says_so_beside_its_top_finding(tmp_path):
    """SYNTHETIC (the one-rank sleep above): the first screen's top finding of a window whose runtime calls hold under 1%
    of the correlation ids they span reads ``(sampled trace)``; one that links under half its device work to launches
    reads how much it links; a whole trace neither."""
    from dataclasses import replace

    from traceprobe.report.actions import what_if_top

    w = window_what_if("r", "w", "", [rank_graph(load_trace(_one_rank(tmp_path)))], None)
    whole = what_if_top(w)
    assert whole is not None and "sampled" not in whole.label and "linked" not in whole.label
    sampled = what_if_top(replace(w, id_density=0.0046))  # (its host time is between the calls it kept: named so)
    assert sampled is not None and sampled.label == whole.label.replace("host outside ops", "host between launch calls") + " (sampled trace)"
    cut = what_if_top(replace(w, linked=0.13))
    assert cut is not None and cut.label == whole.label + " (13% of the work linked)"


def test_a_device_free_drains_the_queue_and_its_what_if_takes_the_drain_away(tmp_path):
    """SYNTHETIC, µs: kernel K [50, 5,050) launched at 0; ``cudaFree`` [100, 5,060) waits for it (a device free
    synchronizes the device: ``torch.cuda.empty_cache()``), ``cudaMalloc`` [5,060, 5,100); then ten launches 500 µs apart
    (host time outside ops between them) of 100 µs kernels, each 20 µs after its launch: the device idles while the host
    dispatches them, to 9,720. Without the allocation (its host time and the free's wait) the host launches them while K
    runs, 500 µs apart from 140: they queue behind K and end at 6,050 (gain 3,670 µs); a what-if that kept the free's wait
    would gain 40 µs. The critical path names the free's return after K ``device_alloc``, not ``sync``."""
    us = 1_000
    b = TraceBuilder("SYNTHETIC a device free in the step")
    b.step(1, 0, 9_601 * us)  # (to its last launch call's end)
    b.launch(0, "kernel", 0, 7, 50 * us, 5_000 * us, name="K")
    b.runtime(100 * us, 4_960 * us, "cudaFree", correlation=-1)
    b.runtime(5_060 * us, 40 * us, "cudaMalloc", correlation=-1)
    for j in range(10):
        b.launch((5_100 + 500 * j) * us, "kernel", 0, 7, (5_120 + 500 * j) * us, 100 * us, name="k")
    g = rank_graph(load_trace(b.write(tmp_path / "free.pt.trace.json")))
    assert (g.freeing >= 0).sum() == 1
    df = what_if([g])
    row = df[df["cause"] == "device_alloc"].iloc[0]
    assert (row["removed_ns"], row["gain_ns"]) == (5_000 * us, 9_720 * us - 6_050 * us), df  # (the free's 4,960 µs and the malloc's 40)
    assert "sync" not in set(df[df["gain_ns"] > 100 * us]["cause"])
    p = critical_path([g])
    assert "device_alloc" in set(p["cause"]) and not (p["cause"] == "sync").any()


@pytest.mark.parametrize("busy", [True, False])
def test_a_first_device_free_that_waited_for_the_device_is_no_warm_up(tmp_path, busy):
    """SYNTHETIC, µs: the first ``cudaFree`` of the trace lasts 30 ms, two later ones 0.1 ms each (a first call far
    longer than its later ones). Beside a 29 ms kernel it waited for (a drain: ``torch.cuda.empty_cache()`` after queued
    work) it keeps its class, device allocation, as a sync's wait; with the device idle its 30 ms are its own work, a
    first call's warm-up (HTA's alexnet: 6 s in its first free)."""
    from traceprobe.analysis.host.host_classes import EVENT_CAUSES, host_classes

    b = TraceBuilder("SYNTHETIC: a first free")
    b.step(1, 0, 100_000_000)
    b.launch(10_000, "kernel", 0, 7, 1_000_000 if busy else 50_000_000, 29_000_000)
    b.runtime(500_000, 30_000_000, "cudaFree")
    for t in (60_000_000, 70_000_000):
        b.runtime(t, 100_000, "cudaFree")
    trace = load_trace(b.write(tmp_path / "free.pt.trace.json"))
    first = int(np.flatnonzero(trace.host_events["name"].astype(str).to_numpy() == "cudaFree")[0])
    assert EVENT_CAUSES[host_classes(trace)[first]] == ("device_alloc" if busy else "warmup")


def test_a_graph_of_the_step_gives_back_the_launches_and_the_host_time_around_them_at_once(tmp_path):
    """SYNTHETIC: three launch-bound steps of 1.8 ms: five ops of 200 µs, each launching a 50 µs kernel, 150 µs of Python
    between them, then an optimizer step of 50 µs holding a foreach op that launches one more. Removing the launches
    alone leaves the Python; removing them with the host time around them at once (:attr:`.WindowWhatIf.graph_of_step`)
    gives back at least each alone and at most their sum, and the finding says so."""
    us = 1_000
    b = TraceBuilder("a launch-bound step with Python between its ops")
    for i in range(3):
        s = i * 1_800 * us
        b.step(i + 1, s, 1_800 * us)
        for k in range(5):
            t = s + k * 350 * us
            b.cpu_op(t, 200 * us, "aten::mm")
            b.launch(t + 100 * us, "kernel", 0, 7, t + 110 * us, 50 * us)
        b.annotation("Optimizer.step#SGD.step", s + 1_750 * us, 50 * us)
        b.cpu_op(s + 1_755 * us, 40 * us, "aten::_foreach_add_")
        b.launch(s + 1_760 * us, "kernel", 0, 7, s + 1_770 * us, 20 * us)
    w = window_what_if("r", "w", "", [rank_graph(load_trace(b.write(tmp_path / "t.pt.trace.json")))], None)
    assert w.top is not None and w.top["cause"] == "dispatch"
    singles = w.table[w.table["cause"].isin(["dispatch", "host", "optimizer", "cpu_op"])]["gain_ns"]
    whole = int(w.graph_of_step[w.graph_of_step["rank"] == 0]["gain_ns"].iloc[0])
    assert singles.max() < whole <= singles.sum()
    assert "graph_of_step" not in set(w.table["cause"]) and "graph_of_step" not in set(w.by_step["cause"])
    assert "all of it at once, -" in w.finding()


def _memberships_per_rank(graphs, k_rank, start, row_rank, row_start, gid):
    """The pass per rank :func:`memberships` replaced (its definition): each rank's rows matched, in order, to the
    first of its communication kernels in their order that starts at the row's time."""
    k_off = np.cumsum([0] + [g.comm.size for g in graphs])
    ranks = {g.rank: i for i, g in enumerate(graphs)}
    by_rank = np.argsort(row_rank, kind="stable")
    ops, grp = [], []
    for r, i in ranks.items():
        sel = by_rank[np.searchsorted(row_rank[by_rank], r, "left"):np.searchsorted(row_rank[by_rank], r, "right")]
        ks = np.arange(k_off[i], k_off[i + 1])[graphs[i].comm]
        if not sel.size or not ks.size:
            continue
        key = start[ks]
        o = np.argsort(key, kind="stable")
        p = np.searchsorted(key[o], row_start[sel])
        hit = (p < key.size) & (key[o][np.minimum(p, key.size - 1)] == row_start[sel])
        ops.append(ks[o[p[hit]]])
        grp.append(gid[sel][hit])
    return (np.concatenate(ops).astype(np.int64), np.concatenate(grp).astype(np.int64)) if ops else (np.zeros(0, np.int64),) * 2


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.lists(st.tuples(st.booleans(), st.integers(0, 6)), max_size=8)), max_size=6),
       st.lists(st.tuples(st.integers(-1, 6), st.integers(0, 7), st.integers(0, 4)), max_size=30))
def test_memberships_match_the_pass_per_rank(ranks, rows):
    """SYNTHETIC graphs (ranks drawn with repeats, communication kernels and starts with ties) and collective rows (of
    ranks with and without a graph, at times with and without a kernel): the one sort gives the pass per rank's
    memberships, op for op and in its order."""
    from types import SimpleNamespace

    from traceprobe.analysis.causal.what_if import memberships

    graphs = [SimpleNamespace(rank=r, comm=np.array([c for c, _ in ops], bool)) for r, ops in ranks]
    start = np.array([t for _, ops in ranks for _, t in ops], np.int64)
    k_rank = np.repeat(np.arange(len(graphs)), [g.comm.size for g in graphs])
    row_rank, row_start, gid = (np.array([x[k] for x in rows], np.int64) for k in range(3))
    got = memberships(graphs, k_rank, start, row_rank, row_start, gid)  # pyright: ignore[reportArgumentType]
    want = _memberships_per_rank(graphs, k_rank, start, row_rank, row_start, gid)
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()


def _steps_per_rank(graphs, rank: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The step of each path segment, one pass over the path per graph: the reference :func:`_steps_of` must equal."""
    step = np.full(rank.size, -1, np.int64)
    for g in graphs:
        sel = np.flatnonzero(rank == g.rank)
        lo, hi = g.step_bounds
        if not sel.size or not lo.size:
            continue
        o = np.argsort(lo, kind="stable")
        i = np.searchsorted(lo[o], end[sel], "right") - 1
        ok = (i >= 0) & (end[sel] <= hi[o][np.maximum(i, 0)])
        step[sel[ok]] = g.steps["step"].to_numpy(np.int64)[o][i[ok]]
    return step


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20)), max_size=5)), max_size=6),
       st.lists(st.tuples(st.integers(-1, 5), st.integers(0, 80)), max_size=25))
def test_the_steps_of_path_segments_match_the_pass_per_rank(ranks, segments):
    """SYNTHETIC graphs (ranks drawn with repeats: a later graph of a rank overrides; steps overlapping, out of order,
    none) and path segments (of ranks with and without a graph): each rank's segments found once give the pass per
    rank's steps."""
    from types import SimpleNamespace

    import pandas as pd

    from traceprobe.analysis.causal.critical_path import _steps_of

    graphs = []
    for r, steps in ranks:
        lo = np.array([s for s, _ in steps], np.int64)
        graphs.append(SimpleNamespace(rank=r, step_bounds=(lo, lo + np.array([n for _, n in steps], np.int64)),
                                      steps=pd.DataFrame({"step": np.arange(len(steps), dtype=np.int64) + 3 * r})))
    path = pd.DataFrame({"rank": np.array([r for r, _ in segments], np.int64), "end_ns": np.array([e for _, e in segments], np.int64)})
    got = _steps_of(graphs, path)  # pyright: ignore[reportArgumentType]
    assert got.tolist() == _steps_per_rank(graphs, path["rank"].to_numpy(), path["end_ns"].to_numpy()).tolist()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(moved=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, len(HOST_CLASSES) - 1), st.floats(0, 1)), max_size=12),
       n_steps=st.integers(0, 4), floor=st.integers(0, 2_000_000), before=st.integers(0, 2))
def test_merging_first_calls_keeps_the_anchors_that_end_the_measured_work(tmp_path, moved, n_steps, floor, before):
    """``window_what_if`` finds the anchors that can end the measured work once, on the graphs before their one-time
    slow calls are merged into the warm-up (:func:`first_calls_merged`), and the replay reads them after: the two must
    agree. A SYNTHETIC rank (``_one_rank``), random shares of random anchors' host time moved to ``slow_call`` from any
    class (the program's own work among them)."""
    from dataclasses import replace

    from traceprobe.analysis.causal.what_if_steps import first_calls_merged, measured_anchors

    g = rank_graph(load_trace(_one_rank(tmp_path)))
    cls, s = g.class_ns.dense(), HOST_CLASSES.index("slow_call")
    for at, c, share in moved:
        a = at % g.t.size
        x = int(cls[c, a] * share)
        cls[c, a] -= x
        cls[s, a] += x
    g = replace(g, class_ns=ClassTimes.of(cls))
    merged = first_calls_merged(g, n_steps, floor, before)
    assert np.array_equal(measured_anchors([merged]), measured_anchors([g]))


def test_a_packed_graph_is_written_as_before_it_was_held_sparse(tmp_path):
    """SYNTHETIC: a graph held with sparse host classes and int32 indices is written as summaries always held it (every
    array in its place, the host classes a dense int64 table, the indices int64: older readers read it, and a summary
    is the same byte for byte), and read back equal to itself."""
    import base64
    import io
    import zipfile

    from traceprobe.analysis.causal.dependency_graph import INDICES
    from traceprobe.analysis.job.graph_tables import _ARRAYS, _OPTIONAL, graph_blob, graph_from_blob

    g = rank_graph(load_trace(_one_rank(tmp_path)))
    assert isinstance(g.class_ns, ClassTimes) and all(getattr(g, k).dtype == np.int32 for k in INDICES)
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(graph_blob(g)))) as z:
        names = [i.filename.removesuffix(".npy") for i in z.infolist()]
        arrays = {k: np.load(io.BytesIO(z.read(k + ".npy"))) for k in ("class_ns", *INDICES)}
    assert names[:len(_ARRAYS) + len(_OPTIONAL) - 1] == [k for k in (*_ARRAYS, *_OPTIONAL) if k != "end"]
    assert arrays["class_ns"].dtype == np.int64 and np.array_equal(arrays["class_ns"], g.class_ns.dense())
    assert all(arrays[k].dtype == np.int64 and np.array_equal(arrays[k], getattr(g, k)) for k in INDICES)
    back = graph_from_blob(graph_blob(g))
    assert back.class_ns == g.class_ns and all(np.array_equal(getattr(back, k), getattr(g, k)) for k in INDICES)


def _late_rank_alone(tmp_path: Path, kernel: str | None = None) -> Path:
    """SYNTHETIC rank 1 of the sleeping pair above, its trace alone (rank 0's not in the window): a 1 ms kernel at
    60 µs, 3 ms of host time outside ops, then its all-reduce [3160, 3660] µs (it came last: no wait inside it)."""
    b = TraceBuilder("rank 1 of 2, alone", rank=1, world_size=2)
    b.step(1, 0, 3_200_000)
    b.cpu_op(0, 100_000, "aten::linear")
    b.launch(50_000, "kernel", 0, 7, 60_000, 1_000_000)
    b.cpu_op(3_100_000, 100_000, "c10d::allreduce_")
    if kernel is None:
        _nccl(b, 3_150_000, 3_160_000, 500_000)
    else:
        b.launch(3_150_000, "nccl", 0, 17, 3_160_000, 500_000, name=kernel)
    return b.write(tmp_path / "r1.pt.trace.json")


def test_one_rank_of_a_job_is_also_replayed_with_its_unseen_ranks_alike(tmp_path):
    """Its all-reduce waits for a rank the trace does not hold. For rank 1 alone the kernel keeps that rank's recorded
    arrival (3160 µs), so removing its 3 ms outside ops gives nothing back; with the other rank taken to run alike (the
    same time removed there, its arrival as late against rank 1's as recorded) both arrive at 160 µs, the all-reduce
    ends at 660 µs and the window with the 1 ms kernel at 1060 µs: 2.6 ms, what the pair's own replay gives above."""
    from traceprobe.analysis.causal.unseen_peers import alike_job
    from traceprobe.analysis.causal.what_if import replay_arrivals

    g = rank_graph(load_trace(_late_rank_alone(tmp_path)))
    job = window_job([g], None)
    twin = alike_job(job, [g], 0)  # (its all-reduce waited for nothing: it came last)
    assert twin is not None and twin[1].tolist() == [False, True]
    t, end, _ = replay_arrivals(twin[0], g.h, twin[0].d, np.zeros(g.t.size, bool))
    assert np.array_equal(t, g.t) and np.array_equal(end, g.end)  # (the trace's own times, exactly, as the job's replay)
    w = window_what_if("run", "w", "", [g], None)
    t = w.table
    assert _gain(t, -1, "host") == 3_660_000 - 1_060_000
    assert not ((t["rank"] == 1) & (t["cause"] == "host") & (t["gain_ns"] > 0)).any(), t
    assert w.alike and w.label(w.top).startswith("every rank (if alike) host outside ops"), w.label(w.top)
    assert "taken to run alike" in w.finding(w.top)


def test_point_to_point_kernels_of_one_rank_are_not_taken_alike(tmp_path):
    """The same trace with a SendRecv kernel: a pipeline's neighbour is not this rank's like, so no every-rank row."""
    g = rank_graph(load_trace(_late_rank_alone(tmp_path, "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)")))
    w = window_what_if("run", "w", "", [g], None)
    assert not w.alike and not (w.table["rank"] == -1).any(), w.table


def test_a_rank_that_waited_for_its_unseen_peers_is_not_taken_alike(tmp_path):
    """SYNTHETIC rank 0 of 2, its trace alone: two all-reduces, the first 500 µs (its transfer: the shortest of the
    name), the second 3.5 ms, 3 ms of it waiting for a rank the trace does not hold, more than the window's noise floor
    (0.5 ms): that rank ran otherwise, so no every-rank row assumes it alike (its own rows say the trace cannot tell what
    the others would give); with both at 500 µs it is taken alike."""
    def window(second_ns: int):
        b = TraceBuilder("rank 0 of 2, alone", rank=0, world_size=2)
        b.step(1, 0, 600_000 + second_ns)
        b.cpu_op(0, 100_000, "c10d::allreduce_")
        _nccl(b, 50_000, 60_000, 500_000)
        b.cpu_op(100_000, 100_000, "c10d::allreduce_")
        _nccl(b, 150_000, 560_000, second_ns)
        g = rank_graph(load_trace(b.write(tmp_path / f"r0-{second_ns}.pt.trace.json")))
        return window_what_if("run", "w", "", [g], None)

    waited = window(3_500_000)
    assert not waited.alike and waited.unseen_wait_ns == 3_000_000 and waited.floor_ns < 3_000_000
    row = {"rank": 0, "cause": "host", "top": "", "removed_ns": 1_000_000, "gain_ns": 1_000_000, "per_step_ns": 1_000_000,
           "steps_with": 1, "beyond": -1}
    assert "waited 3.0 ms in all for ranks it does not hold" in waited.finding(row) and "cannot tell" in waited.finding(row)
    assert window(500_000).alike


@pytest.mark.slow
@pytest.mark.parametrize("folder, rank", [("sample_traces/script-ddp", 0), ("sample_traces/sync-log/w4/ddp-item", 1),
                                          ("tests/data/heldout/w2-late0/ddp-recompile", 0),
                                          ("tests/data/heldout/w2-late0/mesh-item-log", 0)])
def test_one_rank_alone_taken_alike_gives_what_the_whole_window_gives_every_rank(folder, rank):
    """Recorded DDP and 2-D mesh windows (2 and 4 ranks): one rank's trace alone, in step with the others its
    collectives show, taken alike (.unseen_peers), gives for its top every-rank cause within 5% of what the window's own
    replay, every rank's trace in it, gives for that cause on every rank at once (3.5 / 3.5 ms, 21.2 / 21.2 ms, 160.9 /
    158.0 ms, 37.5 / 37.5 ms when this test was written)."""
    root = Path(__file__).resolve().parent.parent / folder
    _, whole = replayed(root)
    trace = load_trace(next(p for p in sorted(root.glob("*.pt.trace.json.gz")) if load_trace(p).rank == rank))
    alone = window_what_if(folder, "", "", [rank_graph(trace)], None)
    assert alone.alike
    top = alone.table[alone.table["rank"] == -1].iloc[0]
    every = whole.table[(whole.table["rank"] == -1) & (whole.table["cause"] == top["cause"]) & (whole.table["beyond"] < 0)]
    assert len(every) == 1, whole.table
    assert abs(int(top["gain_ns"]) - int(every["gain_ns"].iloc[0])) <= 0.05 * int(every["gain_ns"].iloc[0]), (top, every)


@pytest.mark.slow
@pytest.mark.parametrize("run, rank", [("w2-late0", 0), ("w4-late3", 2)])
def test_one_rank_alone_names_every_ranks_recompiles_near_their_measured_cost(run, rank):
    """Recorded DDP runs whose every rank recompiled each step (tests/data/heldout, torch.compile dynamic=False, a new
    batch size a step), one rank's trace alone: before it was taken alike it had no claim (its collectives pinned the
    others' arrival); now its top claim is every rank's compilation, within 10% under the cost measured there (host time
    of forward+backward at a new shape less at a compiled one: 57.5 and 51.8 ms/step; -53.6 and -48.8 given)."""
    root = HELDOUT / run / "ddp-recompile"
    facts = next(f for f in map(json.loads, (root.parent / "injected.jsonl").read_text().splitlines()) if f["folder"] == "ddp-recompile")
    trace = load_trace(next(p for p in sorted(root.glob("*.pt.trace.json.gz")) if load_trace(p).rank == rank))
    w = window_what_if(run, "", "", [rank_graph(trace)], None)
    assert w.top is not None and w.top["rank"] == -1 and w.top["cause"] == "compile", w.table
    measured = facts["injected_ms_per_step"] * 1e6
    assert 0.9 * measured <= w.top["per_step_ns"] <= measured, (w.top["per_step_ns"], measured)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(1_000, 400_000), st.integers(0, 300_000), st.integers(0, 200_000)),
                    min_size=1, max_size=16),
       cls=st.sampled_from(["dispatch", "host"]))
def test_the_alike_replay_is_exact_and_never_later_than_the_ranks_own(tmp_path, ops, cls):
    """SYNTHETIC rank 0 of 2, alone, random: host ops each launching a compute kernel (stream 7) or an all-reduce (stream
    17) of random length, random host gaps between them. The job taken alike (.unseen_peers.alike_job, its waits let
    through) replays the trace's own times exactly, as the rank's own job does; with a host class removed, no anchor and no
    op of it ends later than in the rank's own replay (its all-reduces start when the rank lets them and keep their
    recorded length, never later than the peers' recorded arrival plus their transfer), so its gain is at least that one's."""
    from traceprobe.analysis.causal.unseen_peers import alike_job
    from traceprobe.analysis.causal.what_if import replay_arrivals

    b = TraceBuilder("rank 0 of 2, alone, random", rank=0, world_size=2)
    at, free = 0, {7: 0, 17: 0}
    for comm, dur, work, gap in ops:
        b.cpu_op(at, 20_000 + work, "c10d::allreduce_" if comm else "aten::mm")
        stream = 17 if comm else 7
        start = max(at + 15_000, free[stream] + 1_000)
        if comm:
            _nccl(b, at + 10_000, start, dur)
        else:
            b.launch(at + 10_000, "kernel", 0, 7, start, dur)
        free[stream] = start + dur
        at += 20_000 + work + gap
    b.step(1, 0, max(at, *free.values()))
    g = rank_graph(load_trace(b.write(tmp_path / f"r{len(ops)}.pt.trace.json")))
    job = window_job([g], None)
    twin = alike_job(job, [g], 2**62)
    if not any(c for c, *_ in ops):
        assert twin is None
        return
    assert twin is not None
    alike, none = twin[0], np.zeros(g.t.size, bool)
    for j in (job, alike):
        t, end, _ = replay_arrivals(j, g.h, j.d, none)
        assert np.array_equal(t, g.t) and np.array_equal(end, g.end)
    h = g.h - g.class_ns.row(HOST_CLASSES.index(cls))
    t0, end0, _ = replay_arrivals(job, h, job.d, none)
    t1, end1, _ = replay_arrivals(alike, h, alike.d, none)
    assert (t1 <= t0).all() and (end1 <= end0).all()
