"""The replay as one sweep (traceprobe.analysis.causal.sweep) against the rounds it replaced (tests/replay_rounds.py),
to the ns: on random SYNTHETIC multi-rank jobs (scripts/synth_job.py: matched collectives, skewed ranks) with random
causes removed (hypothesis), on a SYNTHETIC cycle, and on every window of the recorded samples (slow)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from replay_rounds import replay_rounds

from traceprobe import load_trace
from traceprobe.analysis.causal import what_if as W
from traceprobe.analysis.causal.dependency_graph import rank_graph
from traceprobe.analysis.causal.sweep import Sweep
from traceprobe.analysis.causal.what_if_windows import window_instances
from traceprobe.analysis.job.collectives import collective_table, match_window

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import synth_job  # noqa: E402


def _same(job, h, d, no_sync) -> None:
    new = W.replay_arrivals(job, h, d, no_sync)
    old = replay_rounds(job, h, d, no_sync)
    for name, a, b in zip(("t", "end", "arrival"), new, old):
        assert np.array_equal(a, b), (name, np.flatnonzero(a != b)[:5])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), ranks=st.integers(2, 4), events=st.integers(800, 3000), skewed=st.integers(0, 1),
       cut=st.floats(0.0, 1.0), shrink=st.floats(0.0, 1.0), drop=st.floats(0.0, 1.0))
def test_the_sweep_equals_the_rounds_on_random_jobs(tmp_path_factory, seed, ranks, events, skewed, cut, shrink, drop):
    """SYNTHETIC: a job of 2-4 ranks, its window replayed as recorded (the trace's own times), then with a random
    share of every anchor's host time, of every op's duration and of the sync edges removed."""
    folder = tmp_path_factory.mktemp("job")
    cfg = synth_job.st.Config(events=events, nccl_share=0.2, seed=seed, steps=3)
    paths = synth_job.write_job(cfg, ranks, folder, skewed=min(skewed, ranks - 1), skew_ns=300_000, jobs=1)
    traces = [load_trace(p) for p in paths]
    w = match_window({t.rank: collective_table(t) for t in traces})
    graphs = [rank_graph(t) for t in traces]
    job = W.window_job(graphs, window_instances(w))
    assert job.mem_op.size > 0  # (collectives matched: cross-rank nodes in the sweep)
    rng = np.random.default_rng(seed)
    h0 = np.concatenate([g.h for g in graphs])
    none = np.zeros(h0.size, bool)
    t, end, _ = W.replay_arrivals(job, h0, job.d, none)
    assert np.array_equal(t, np.concatenate([g.t for g in graphs]))
    _same(job, h0, job.d, none)
    h = np.where(rng.random(h0.size) < cut, (h0 * rng.random(h0.size)).astype(np.int64), h0)
    d = np.where(rng.random(job.d.size) < shrink, (job.d * rng.random(job.d.size)).astype(np.int64), job.d)
    _same(job, h, d, rng.random(h0.size) < drop)
    assert job.sweep is not None and job.sweep.n_acyclic == job.sweep.order.size  # (no cycle: one sweep)


def test_a_cycle_is_swept_until_nothing_changes():
    """SYNTHETIC graph: anchor 1 (a sync) waits for op 1, which anchor 2 launched (clocks that disagree: a cycle
    anchor 1 -> anchor 2 -> op 1 -> anchor 1). The cyclic part is swept again until nothing changes, from the
    recorded times: the greatest solution at or below them, what the rounds found."""
    a_rank = np.zeros(3, np.int64)
    t0 = np.array([0, 1_000, 1_100], np.int64)
    anchor, dep, lane = np.array([0, 2]), np.array([-1, -1]), np.array([0, 0])
    target = np.array([-1, 1, -1])
    start, end = np.array([10, 950]), np.array([500, 990])
    z = np.zeros(2, np.int64)
    s = Sweep(a_rank, t0, anchor, dep, lane, target, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
              np.zeros(0, np.int64), start, end, g_lag=np.array([0, 450]), l_lag=np.array([10, -150]), fixed=np.full(2, -(2**60)),
              ret=np.array([0, 10, 0]), dep_lag=z, pre_dur=np.zeros(3, np.int64))
    assert s.n_acyclic < s.order.size
    h = np.array([0, 0, 100], np.int64)
    t, e, _ = s.replay(h, end - start, target >= 0)
    assert t.tolist() == [0, 1_000, 1_100] and e.tolist() == [500, 990]  # (as recorded: the cycle holds)
    t, e, _ = s.replay(np.array([0, 0, 50]), end - start, target >= 0)  # (op 1 still waits for op 0: the sync holds)
    assert t.tolist() == [0, 1_000, 1_050] and e.tolist() == [500, 990]
    t, e, _ = s.replay(np.array([0, 0, 50]), np.array([100, 40]), target >= 0)  # (op 0 shorter: all of it moves)
    assert t.tolist() == [0, 610, 660] and e.tolist() == [110, 600]


@pytest.mark.parametrize("anchors, ops", [(0, 2), (2, 0), (0, 0)])
def test_a_graph_without_anchors_or_without_ops_is_built_and_replays_as_recorded(anchors, ops):
    """SYNTHETIC graphs of device work without a launching call (a trace whose host side was not recorded), of host calls
    without device work, and of nothing: the sweep is built (a window's what-if builds it before it knows whether any
    cause is replayed) and a replay gives the recorded times."""
    i64 = lambda *x: np.array(x, np.int64)  # noqa: E731
    t0, start, end = i64(*range(0, 100 * anchors, 100)), i64(*range(10, 10 + 50 * ops, 50)), i64(*range(40, 40 + 50 * ops, 50))
    none = np.zeros(0, np.int64)
    s = Sweep(np.zeros(anchors, np.int64), t0, np.full(ops, -1), np.full(ops, -1), np.zeros(ops, np.int64), np.full(anchors, -1),
              none, none, none, none, start, end, g_lag=np.zeros(ops, np.int64), l_lag=np.zeros(ops, np.int64),
              fixed=start.copy(), ret=np.zeros(anchors, np.int64), dep_lag=np.zeros(ops, np.int64), pre_dur=np.zeros(anchors, np.int64))
    t, e, _ = s.replay(np.diff(t0, prepend=0), end - start, np.zeros(anchors, bool))
    assert t.tolist() == t0.tolist() and e.tolist() == end.tolist()


@pytest.mark.slow
@pytest.mark.xdist_group("every_sample_summary")  # (one worker summarises every sample for the three)
def test_the_sweep_equals_the_rounds_on_every_sample(every_sample_summary):
    """Every what-if replay of every window of sample_traces/ (each cause, rank and group; with and without the bounds)
    equals the rounds': every sample's report summarised (conftest's ``every_sample_summary``)."""
    calls = every_sample_summary.replays
    assert len(calls) > 1000 and all(calls), (len(calls), calls.count(False))
