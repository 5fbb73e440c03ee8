"""Which what-ifs are replayed (traceprobe.analysis.causal.what_if_plan): each cause's bound from the critical paths is a
true upper bound of its gain, and the table replayed with the bounds is the table of every cause replayed, less rows
that no finding can show; on random SYNTHETIC multi-rank jobs (scripts/synth_job.py, hypothesis) and the recorded
samples (slow)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceprobe import load_trace
from traceprobe.analysis.causal import what_if as W
from traceprobe.analysis.causal.dependency_graph import rank_graph
from traceprobe.analysis.causal.what_if_order import EXPOSING_SHARE
from traceprobe.analysis.causal.what_if_windows import AROUND_LAUNCHES, GRAPH_OF_STEP, window_instances
from traceprobe.analysis.job.collectives import collective_table, match_window

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import synth_job  # noqa: E402  # pyright: ignore[reportMissingImports]

GROUPS = {GRAPH_OF_STEP: ("dispatch", *AROUND_LAUNCHES)}


def _window(folder: Path, seed: int, ranks: int, events: int, skewed: int):
    cfg = synth_job.st.Config(events=events, nccl_share=0.2, seed=seed, steps=3)
    paths = synth_job.write_job(cfg, ranks, folder, skewed=min(skewed, ranks - 1), skew_ns=300_000, jobs=1)
    traces = [load_trace(p) for p in paths]
    w = match_window({int(t.rank or 0): collective_table(t) for t in traces})
    return [rank_graph(t) for t in traces], window_instances(w)


def _run(monkeypatch, graphs, per_rank, floor: int, prune: bool, everything: bool = False):
    """``what_ifs`` with pruning on or off; with ``everything`` the bounds are computed and every candidate replayed
    all the same. Returns the table, the steps, and each candidate replayed as (bound, gain, step gains)."""
    seen = []
    orig = W._replayed

    def spy(cands, *args):
        done = orig(cands, *args)
        seen.extend((cands[i].bound, int(r[4]), np.asarray(r[-1])) for i, r in done.items())
        return done

    monkeypatch.setattr(W, "PRUNE", prune)
    monkeypatch.setattr(W, "_replayed", spy)
    if everything:
        monkeypatch.setattr(W, "chosen", lambda cands, *a: set(range(len(cands))))
    table, steps = W.what_ifs(graphs, per_rank, min_ns=floor, groups=GROUPS)
    monkeypatch.undo()
    return table, steps, seen


def _same_but_pruned(full: pd.DataFrame, pruned: pd.DataFrame, floor: int, n_steps: int, full_steps: pd.DataFrame,
                     pruned_steps: pd.DataFrame) -> None:
    """The pruned table is the full one less rows no finding can show, in the same order, every figure equal."""
    key = ["rank", "cause"]
    keys = set(map(tuple, pruned[key].to_numpy().tolist()))
    has = np.array([tuple(x) in keys for x in full[key].to_numpy().tolist()], bool)
    kept = pd.DataFrame(full[has]).reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, pruned.reset_index(drop=True), check_dtype=len(kept) > 0)
    gone = pd.DataFrame(full[~has])
    assert (gone["gain_ns"] < EXPOSING_SHARE * floor).all(), gone
    per_step = floor // max(n_steps, 1)
    for rank, cause in zip(gone["rank"].tolist(), gone["cause"].tolist()):
        s = full_steps[(full_steps["rank"] == rank) & (full_steps["cause"] == cause)]
        assert rank < 0 or not n_steps or (s["gain_ns"] < per_step).all(), (rank, cause, s)
    ps = pruned_steps.merge(full_steps, on=["rank", "cause", "step"], suffixes=("", "_full"))
    assert len(ps) == len(pruned_steps) and (ps["gain_ns"] == ps["gain_ns_full"]).all()
    top = full[full["gain_ns"] >= floor].head(1).to_dict("records")
    assert top == pruned[pruned["gain_ns"] >= floor].head(1).to_dict("records")


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), ranks=st.integers(2, 4), events=st.integers(600, 1500), skewed=st.integers(0, 2),
       share=st.floats(0.0, 0.2))
def test_bounds_hold_and_pruning_changes_no_finding(tmp_path_factory, monkeypatch, seed, ranks, events, skewed, share):
    """SYNTHETIC jobs of 2-4 ranks (matched collectives, late ranks), at a random noise floor up to 20% of the window:
    every candidate's gain lies within its window bound and each step's gain within its step bound; the table with
    pruning equals the table of every cause replayed, less rows under half the floor."""
    graphs, per_rank = _window(tmp_path_factory.mktemp("job"), seed, ranks, events, skewed)
    lo = min(int(g.start.min()) for g in graphs)
    hi = max(int(g.end.max()) for g in graphs)
    floor = int(share * (hi - lo))
    _, _, seen = _run(monkeypatch, graphs, per_rank, floor, prune=True, everything=True)
    for (window, step), gain, steps in seen:
        assert 0 <= gain <= window, (gain, window)
        assert steps.size == 0 or int(steps.max()) <= step, (steps, step)
    full, full_steps, _ = _run(monkeypatch, graphs, per_rank, floor, prune=False)
    pruned, pruned_steps, _ = _run(monkeypatch, graphs, per_rank, floor, prune=True)
    _same_but_pruned(full, pruned, floor, max(len(g.steps) for g in graphs), full_steps, pruned_steps)


def test_ranks_off_the_path_are_not_replayed(tmp_path, monkeypatch):
    """SYNTHETIC job of 6 ranks, one late at every collective: the others wait for it, so their host causes lie off the
    critical path and are bounded at 0 ns: with a floor of 1% of the window, fewer replays than causes, and the same
    findings."""
    graphs, per_rank = _window(tmp_path, 7, 6, 800, 1)
    floor = int(0.01 * (max(int(g.end.max()) for g in graphs) - min(int(g.start.min()) for g in graphs)))
    full, full_steps, every = _run(monkeypatch, graphs, per_rank, floor, prune=False)
    pruned, pruned_steps, some = _run(monkeypatch, graphs, per_rank, floor, prune=True)
    assert len(some) < len(every)
    _same_but_pruned(full, pruned, floor, max(len(g.steps) for g in graphs), full_steps, pruned_steps)


@pytest.mark.slow
@pytest.mark.xdist_group("every_sample_summary")  # (one worker summarises every sample for the three)
def test_every_sample_window_loses_no_finding(every_sample_summary):
    """Every window of sample_traces/ replayed with and without the bounds: the same table less rows no finding can
    show, every bound at or above its gain (every sample's report summarised, conftest's ``every_sample_summary``)."""
    checked = []
    for full, full_steps, pruned, pruned_steps, floor, n_steps, seen in every_sample_summary.windows:
        _same_but_pruned(full, pruned, floor, n_steps, full_steps, pruned_steps)
        assert all(0 <= gain <= bound for bound, gain in seen), seen
        checked.append(len(full) - len(pruned))
    assert len(checked) > 20 and sum(checked) > 0, checked
