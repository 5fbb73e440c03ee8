"""Compute slowed beside a waiting collective, and the relief a what-if gives back (traceprobe.analysis.causal.contention).

SYNTHETIC two ranks built with tests/synthetic.py's TraceBuilder, times exact and gains worked out by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from synthetic import TraceBuilder

from traceprobe import load_trace
from traceprobe.analysis.causal import contention
from traceprobe.analysis.causal.dependency_graph import rank_graph
from traceprobe.analysis.causal.imbalance import excess_device_work, kernel_codes, segment_codes
from traceprobe.analysis.causal.what_if import what_if, window_job
from traceprobe.analysis.causal.what_if_windows import window_instances
from traceprobe.analysis.job.collectives import collective_table, match_window

US = 1_000


def _pair(tmp_path: Path, slowed_us: int):
    """Rank 1 runs three 1,000 µs GEMMs, then 2,000 µs of extra work X, then its all-reduce (500 µs of transfer);
    rank 0's all-reduce starts at 100 µs and waits for rank 1 until 5,100 µs while its three GEMMs of the same name
    run beside it, ``slowed_us`` each."""
    tables, graphs = {}, []
    for r in (0, 1):
        b = TraceBuilder(f"SYNTHETIC rank {r}", rank=r, world_size=2)
        t = 100 * US
        for i in range(3):
            d = (slowed_us if r == 0 else 1_000) * US
            b.launch((10 + 10 * i) * US, "kernel", 0, 7, t, d, name="G")
            t += d
        if r == 1:
            b.launch(40 * US, "kernel", 0, 7, t, 2_000 * US, name="X")
        ev = b.launch(50 * US, "nccl", 0, 17, 100 * US if r == 0 else 5_100 * US, (5_500 if r == 0 else 500) * US)
        ev["args"].update({"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000, "Group size": 2,
                           "dtype": "Float", "Process Group Name": "0"})
        trace = load_trace(b.write(tmp_path / f"r{r}.pt.trace.json"))
        tables[r], graphs = collective_table(trace), graphs + [rank_graph(trace)]
    w = match_window(tables)
    return graphs, w


def _gain(df, rank: int, cause: str) -> int:
    row = df[(df["rank"] == rank) & (df["cause"] == cause)]
    assert len(row) == 1, df
    return int(row["gain_ns"].iloc[0])


def test_removing_the_late_work_relieves_the_compute_slowed_beside_the_wait(tmp_path, monkeypatch):
    """Without X rank 1 arrives at 3,100 µs: both all-reduces end at 3,600 µs. Rank 0's GEMMs took 1,250 µs against
    rank 1's 1,000 (250 µs each under the wait charged to rank 1); the what-if takes away 2,000 of the 5,000 µs of that
    wait (rank 0 now waits 100 -> 3,100 µs), so 40% of the slowdown: 100 µs a GEMM, and they end at 3,550 µs instead of
    3,850. The window ends at 3,600 µs instead of 5,600: the gain is 2,000 µs; without the relief it would be 1,750."""
    graphs, w = _pair(tmp_path, 1_250)
    assert w.matched == 1 and w.wait_ns == {0: 5_000 * US, 1: 0}
    assert _gain(what_if(graphs, window_instances(w)), 1, "imbalance") == 2_000 * US
    monkeypatch.setattr(contention, "MAX_SLOWDOWN", 1.0)  # (no kernel is then taken as slowed)
    assert _gain(what_if(graphs, window_instances(w)), 1, "imbalance") == 1_750 * US


@pytest.mark.parametrize(("slowed_us", "gain_us"), [(1_000, 2_000), (1_600, 700)])
def test_no_relief_without_a_slowdown_or_for_other_work(tmp_path, slowed_us, gain_us):
    """Rank 0's GEMMs as fast as rank 1's: nothing to relieve (rank 0's compute ends at 3,100 µs, before the all-reduces'
    3,600: the gain is 2,000 µs). GEMMs of 1,600 µs (more than 1.5x rank 1's): other work under the same name, no relief
    (they end at 4,900 µs; the window gains 5,600 - 4,900 = 700 µs)."""
    graphs, w = _pair(tmp_path, slowed_us)
    assert _gain(what_if(graphs, window_instances(w)), 1, "imbalance") == gain_us * US


def test_the_late_ranks_extra_kernels_of_the_same_name_are_not_the_reference():
    """SYNTHETIC arrays: rank 1 (late) runs three GEMMs ``G`` of 1,000 µs and, as its extra work, three ``G`` of
    2,000 µs (another shape under the same name); rank 0 runs its three ``G`` at 1,250 µs beside a wait charged to
    rank 1. Rank 1's median over all six is 1,500 µs, which would leave rank 0 unslowed; the reference is the median of
    rank 1's three shortest (as many as rank 0 ran): 1,000 µs, so each of rank 0's GEMMs is 250 µs slowed."""
    import numpy as np

    d1 = [1_000, 1_000, 1_000, 2_000, 2_000, 2_000]
    start = np.array([0, 2_000, 4_000, 10_000, 12_000, 14_000, 20_000, 22_000, 24_000, 0], np.int64) * US  # rank 1, rank 0, rank 0's all-reduce
    d = np.array([*d1, 1_250, 1_250, 1_250, 30_000], np.int64) * US
    end = start + d
    code = np.array([0] * 9 + [1], np.int64)
    k_rank = np.array([1] * 6 + [0] * 4, np.int64)
    comm = np.array([False] * 9 + [True])
    w = (np.array([9]), np.array([0]), np.array([30_000 * US]), np.array([1]))  # (rank 0's all-reduce waits for rank 1)
    slow = contention.slowdowns(start, end, d, code, k_rank, comm, w)
    assert slow[1].tolist() == [0] * 6 + [250 * US] * 3 + [0]


def test_longer_kernels_lose_their_excess_in_proportion_and_extra_kernels_whole(tmp_path):
    """SYNTHETIC: three steps of 10 ms; rank 0 runs one GEMM ``G`` of 1,000 µs a step. Rank 1 runs its ``G`` at 3,000 µs
    (more tokens: the same kernel, longer) and, in its last step, one extra ``G`` of 3,500 µs (an extra kernel, another
    shape). Its excess, 9,500 µs, goes first from the extra kernel, whole (as many of its longest as it ran beyond rank 0's count),
    then from its other ``G`` in proportion to their durations: each step's 3,000 µs becomes 1,000 µs (longest first
    would have emptied two steps and left the third at 3,000)."""
    graphs = []
    for r in (0, 1):
        b = TraceBuilder(f"SYNTHETIC rank {r}", rank=r, world_size=2)
        for s in range(3):
            t0 = s * 10_000 * US
            b.step(s + 1, t0, 10_000 * US)
            b.launch(t0 + 10 * US, "kernel", 0, 7, t0 + 100 * US, (3_000 if r else 1_000) * US, name="G")
            if r and s == 2:
                b.launch(t0 + 20 * US, "kernel", 0, 7, t0 + 4_000 * US, 3_500 * US, name="G")
        graphs.append(rank_graph(load_trace(b.write(tmp_path / f"r{r}.pt.trace.json"))))
    code, names = kernel_codes(graphs)
    k_rank = np.concatenate([np.full(g.start.size, i) for i, g in enumerate(graphs)])
    dur = np.concatenate([g.d for g in graphs])
    (i, top, removed, d), = excess_device_work(graphs, k_rank, dur, 0, code, names, {1})
    assert (i, top, removed) == (1, "G", 9_500 * US)
    assert sorted(d[k_rank == 1].tolist()) == [0, 1_000 * US, 1_000 * US, 1_000 * US]


def test_work_under_another_kernel_name_is_matched_by_its_place_between_collectives(tmp_path):
    """SYNTHETIC: an expert layer between all-reduces, one stream. Rank 0's two expert GEMMs run as ``G128`` (1,000 µs
    each); rank 1's (4x the tokens) run 4,000 µs each, the first under another tile's name ``G256``; a shared ``G128``
    of 500 µs runs between the collectives on both. Rank 1's excess is 3,000 µs per expert GEMM: matched by segment
    (the kernels between the same two collectives) it leaves 1,000 µs of each, the window ends at 2,900 µs instead of
    8,900 and the gain is 6,000 µs. By kernel name alone ``G256`` would go whole and the rest be taken from both
    ``G128`` in proportion, the shared one included: the gain would be 4,778 µs."""
    graphs, tables = [], {}
    for r in (0, 1):
        b = TraceBuilder(f"SYNTHETIC rank {r}", rank=r, world_size=2)
        b.step(1, 0, 71 * US)  # (to its last launch call's end)
        expert = 4_000 if r else 1_000
        b.launch(10 * US, "kernel", 0, 7, 100 * US, expert * US, name="G256" if r else "G128")
        t = (100 + expert) * US
        for i, (shared, end) in enumerate([(500, 4_200), (None, 4_800), (expert, 8_900)]):
            ev = b.launch((20 + 20 * i) * US, "nccl", 0, 7, t, end * US - t)
            ev["args"].update({"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000, "Group size": 2,
                               "dtype": "Float", "Process Group Name": "0"})
            t = end * US
            if shared is not None:
                b.launch((30 + 20 * i) * US, "kernel", 0, 7, t, shared * US, name="G128")
                t += shared * US
        trace = load_trace(b.write(tmp_path / f"r{r}.pt.trace.json"))
        tables[r], graphs = collective_table(trace), graphs + [rank_graph(trace)]
    w = match_window(tables)
    assert w.matched == 3
    df = what_if(graphs, window_instances(w))
    row = df[(df["rank"] == 1) & (df["cause"] == "imbalance")].iloc[0]
    assert (int(row["removed_ns"]), int(row["gain_ns"]), row["top"]) == (6_000 * US, 6_000 * US, "G128")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.lists(st.tuples(st.sampled_from(["A", "B", "C"]), st.integers(10, 3_000)), min_size=0, max_size=4),
                     min_size=3, max_size=3),
       extra=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["A", "B", "D"]), st.integers(10, 5_000)), max_size=4))
def test_extra_device_work_removal_keeps_its_invariants(tmp_path, plan, extra):
    """Random SYNTHETIC pairs: three segments of kernels (names A-C) between all-reduces, the same on both ranks, and on
    rank 1 random extra kernels (names A, B, D) in random segments. Whatever the split, the removal touches only rank 1's
    ops, leaves no duration negative, sums exactly to the removed time reported, and removes no more than the rule's
    excess of each segment's kernel names (rank 1's time beyond rank 0's, or beyond rank 0's count at rank 1's median
    duration), summed where positive: offsets only lower it."""
    graphs, tables = [], {}
    for r in (0, 1):
        b = TraceBuilder(f"SYNTHETIC rank {r}", rank=r, world_size=2)
        b.step(1, 0, 10**9)
        t, at = 100 * US, 10 * US
        for s, kernels in enumerate(plan):
            mine = list(kernels) + [(n, d) for seg, n, d in extra if r == 1 and seg == s]
            for name, d in mine:
                b.launch(at, "kernel", 0, 7, t, d * US, name=name)
                t, at = t + d * US, at + 2 * US
            ev = b.launch(at, "nccl", 0, 7, t, 50 * US)
            ev["args"].update({"Collective name": "allreduce", "In msg nelems": 1000, "Out msg nelems": 1000, "Group size": 2,
                               "dtype": "Float", "Process Group Name": "0"})
            t, at = t + 50 * US, at + 2 * US
        trace = load_trace(b.write(tmp_path / f"r{r}.pt.trace.json"))
        tables[r], graphs = collective_table(trace), graphs + [rank_graph(trace)]
    w = match_window(tables)
    job = window_job(graphs, window_instances(w))
    code, names = kernel_codes(graphs)
    s_code, s_names, segment = segment_codes(graphs, code, names, job.collective)
    rows = excess_device_work(graphs, job.k_rank, job.d, 0, s_code, s_names, {1}, segment)
    beyond = 0  # (per segment and name: rank 1's time beyond rank 0's, or beyond rank 0's count at rank 1's median duration)
    for s, kernels in enumerate(plan):
        for name in "ABCD":
            zero = [d for n, d in kernels if n == name]
            one = zero + [d for seg, n, d in extra if seg == s and n == name]
            if one:
                beyond += max(sum(one) - sum(zero), sum(one) - len(zero) * float(np.median(one)), 0) * US
    for i, _, removed, d in rows:
        assert i == 1 and (d >= 0).all() and (d <= job.d).all()
        assert np.array_equal(d[job.k_rank == 0], job.d[job.k_rank == 0])
        assert int((job.d - d).sum()) == removed <= beyond


@st.composite
def _window(draw):
    """SYNTHETIC arrays of a window: ops of 2-5 ranks on two chains a rank (not always one after another: the join
    must not depend on it), kernel names 0-3, some communication; waits on random ops, charged to the ranks of random
    ops (a last arrival's)."""
    ranks = draw(st.integers(2, 5))
    k = draw(st.integers(1, 60))
    ints = st.lists(st.integers(0, 10**6), min_size=k, max_size=k)
    start = np.array(draw(ints), np.int64)
    end = start + np.array(draw(st.lists(st.integers(0, 50_000), min_size=k, max_size=k)), np.int64)
    d = np.array(draw(st.lists(st.integers(-100, 60_000), min_size=k, max_size=k)), np.int64)  # (some below 0: the sort's fallback)
    k_rank = np.array(draw(st.lists(st.integers(0, ranks - 1), min_size=k, max_size=k)), np.int64)
    lane = k_rank * 2 + np.array(draw(st.lists(st.integers(0, 1), min_size=k, max_size=k)), np.int64)
    code = np.array(draw(st.lists(st.integers(0, 3), min_size=k, max_size=k)), np.int64)
    comm = np.array(draw(st.lists(st.booleans(), min_size=k, max_size=k)))
    n = draw(st.integers(0, 30))
    op = np.array(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)), np.int64)
    lo = np.array(draw(st.lists(st.integers(0, 10**6), min_size=n, max_size=n)), np.int64)
    hi = lo + np.array(draw(st.lists(st.integers(-10, 200_000), min_size=n, max_size=n)), np.int64)
    charged = k_rank[np.array(draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n)), np.int64)]  # (the last member's rank)
    return ranks, start, end, d, code, k_rank, lane, comm, (op, lo, hi, charged)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_window(), st.booleans())
def test_slowdowns_equal_the_pass_per_pair_of_ranks(window, by_lane):
    """The one-pass slowdowns (the waits' overlaps with compute joined chain by chain, every pair of ranks at once)
    equal the first version's pass per pair of ranks (tests/contention_reference.py), op for op and rank for rank, with
    the chains given or one chain a rank; and the waits charged to each rank equal its per-rank sums."""
    from contention_reference import charged_wait, slowdowns_by_pair

    ranks, start, end, d, code, k_rank, lane, comm, w = window
    want = slowdowns_by_pair(start, end, d, code, k_rank, comm, w)
    got = contention.slowdowns(start, end, d, code, k_rank, comm, w, lane if by_lane else None)
    assert sorted(want) == sorted(set(got.rank.tolist())) and len(got) == len(want)
    for i, dense in want.items():
        assert i in got and got[i].tolist() == dense.tolist()
        some = np.arange(0, start.size, 2)
        assert got.at(i, some).tolist() == dense[some].tolist()
    assert all(i not in got for i in range(ranks) if i not in want)
    mem_op = np.arange(start.size, dtype=np.int64)
    mem_group = code.copy()  # (SYNTHETIC instances: the ops of one name)
    all_ranks = contention.charged_waits(start, end, w, mem_op, mem_group, ranks)
    assert all_ranks.tolist() == [charged_wait(start, end, w, mem_op, mem_group, i) for i in range(ranks)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(-3, 10**12)), max_size=40), st.integers(0, 3))
def test_grouped_medians_are_pandas_grouped_medians(rows, extra):
    """SYNTHETIC (key, duration) pairs (ties, odd and even counts, keys without values, a negative duration now and
    then): the one sort gives pandas' ``groupby(key).median()`` per key, to the bit, 0 where a key has no value."""
    import pandas as pd

    from traceprobe.analysis.causal.imbalance import medians

    key = np.array([k for k, _ in rows], np.int64)
    d = np.array([v for _, v in rows], np.int64)
    size = 7 + extra
    want = np.zeros(size, np.float64)
    if key.size:
        m = pd.Series(d).groupby(key).median()
        want[m.index.to_numpy()] = m.to_numpy()
    assert medians(key, d, size).tobytes() == want.tobytes()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-5, 30), max_size=40), st.lists(st.integers(-8, 35), max_size=40))
def test_runs_of_keys_are_the_searches_over_every_key(keys_, queries):
    """SYNTHETIC sorted keys (repeats, gaps, none) and queries (present, absent, below and above them all): the search
    among the distinct keys gives ``searchsorted`` left and right less left over every key."""
    from traceprobe.analysis.causal.contention import key_runs, run_of

    by_key = np.sort(np.array(keys_, np.int64))
    q = np.array(queries, np.int64)
    start, count = run_of(key_runs(by_key), by_key.size, q)
    left = np.searchsorted(by_key, q, "left")
    assert start.tolist() == left.tolist()
    assert count.tolist() == (np.searchsorted(by_key, q, "right") - left).tolist()
