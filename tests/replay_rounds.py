"""The replay as it was before :mod:`traceprobe.analysis.causal.sweep`: rounds, each carrying time across one more
host-device or cross-rank edge, until nothing changes (a fixed point from the recorded times). Kept as the sweep's
reference: tests/test_sweep.py checks the two agree to the ns."""

from __future__ import annotations

import numpy as np

from traceprobe import intervals as iv
from traceprobe.analysis.causal.sweep import NEG

MAX_ROUNDS = 2_000


def _grouped_cummax(key: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Running maximum of ``v`` within runs of equal ``key`` (``key`` sorted); values at or below NEG / 2 (no edge)
    are lifted to just under the least other value first, so that the running maximum works on a small range."""
    if v.size == 0:
        return v
    none = v <= NEG // 2
    if none.all():
        return v
    low = int(v[~none].min()) - 1
    out = iv.grouped_running_max(key, np.where(none, low, v))
    return np.where(out == low, NEG, out)


def _segments(key: np.ndarray) -> list[tuple[int, int]] | None:
    """The runs of equal ``key`` (sorted) as slices, where there are few enough to loop over (None: too many)."""
    if key.size == 0:
        return []
    cut = np.flatnonzero(key[1:] != key[:-1]) + 1
    if cut.size > 256:
        return None
    bounds = [0, *cut.tolist(), key.size]
    return list(zip(bounds[:-1], bounds[1:]))


def _running_max(key: np.ndarray, v: np.ndarray, runs: list[tuple[int, int]] | None) -> np.ndarray:
    """Running maximum of ``v`` within each run of ``key``: a slice at a time where ``runs`` lists them."""
    if runs is None:
        return _grouped_cummax(key, v)
    out = np.empty_like(v)
    for lo, hi in runs:
        np.maximum.accumulate(v[lo:hi], out=out[lo:hi])
    return out


def replay_rounds(job, h: np.ndarray, d: np.ndarray, no_sync: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Anchor times and device op ends of the job replayed with host times ``h``, durations ``d`` and the sync edges
    of the anchors in ``no_sync`` (bool) dropped (module docstring). Returns ``(t, end, arrival)`` (int64 ns; arrival:
    when each device op could start, before any cross-rank instance holds it).

    Each chain is a running maximum: a device op ends at ``P_k + max_{j<=k}(E_j + d_j - P_j)`` where ``P`` sums its
    stream's lags and durations and ``E`` is its latest other edge, the host at ``H_i + max_{j<=i}(X_j - H_j)``.
    A round computes every chain from the other chains' times of the round before; rounds end when nothing moves."""
    cat = np.concatenate
    graphs = job.graphs
    t0 = cat([g.t for g in graphs])
    g_lag, l_lag = cat([g.g for g in graphs]), cat([g.l for g in graphs])
    fixed = job.fixed  # (each op's earliest start, raised where its peers are not in the window: .unseen_peers)
    ret, dep_lag, pre_dur = cat([g.ret for g in graphs]), cat([g.dep_lag for g in graphs]), cat([g.pre_dur for g in graphs])
    first_a = np.ones(t0.size, bool)
    first_a[1:] = job.a_rank[1:] != job.a_rank[:-1]
    H = np.cumsum(h)
    P = np.cumsum(g_lag + d)
    t, end = t0.copy(), cat([g.end for g in graphs])
    arrival = cat([g.start for g in graphs])
    if end.size == 0 or t.size == 0:
        return t, end, arrival
    a_idx, has_a = np.maximum(job.anchor, 0), job.anchor >= 0
    lag_a = np.where(has_a, l_lag, NEG)  # (an op without a launch: no launch edge)
    d_idx, has_d = np.maximum(job.dep, 0), job.dep >= 0
    any_dep = bool(has_d.any())
    sync = (job.target >= 0) & ~no_sync
    s_idx, ret_s = np.maximum(job.target, 0), np.where(sync, ret, NEG)
    x_first = np.where(first_a, t0, NEG)
    keep = sync[job.also_anchor] if job.also_anchor.size else np.zeros(0, bool)
    also, also_op = job.also_anchor[keep], job.also_op[keep]
    n_groups = int(job.mem_group.max(initial=-1)) + 1
    m = np.zeros(end.size, bool)
    m[job.mem_op] = True
    not_first = ~job.first
    lanes, ranks = _segments(job.lane), _segments(job.a_rank)
    rounds = 0
    for _ in range(MAX_ROUNDS):
        rounds += 1
        issue = np.empty_like(t)
        issue[1:] = t[:-1] + h[1:]
        issue[first_a] = t[first_a]
        issue -= pre_dur  # each launch call's start
        own = np.maximum(issue[a_idx] + lag_a, np.where(has_d, end[d_idx] + dep_lag, fixed) if any_dep else fixed)
        ext = own
        if n_groups:
            last = np.full(n_groups, NEG, np.int64)
            np.maximum.at(last, job.mem_group, arrival[job.mem_op])
            bound = np.full(end.size, NEG, np.int64)
            np.maximum.at(bound, job.mem_op, last[job.mem_group])
            ext = np.where(m, np.maximum(own, bound), own)
        new_end = P + _running_max(job.lane, np.maximum(ext + d - P, NEG), lanes)
        prev = np.empty_like(new_end)
        prev[1:] = new_end[:-1] + g_lag[1:]
        new_arrival = np.where(not_first, np.maximum(prev, own), own)
        x = np.maximum(x_first, new_end[s_idx] + ret_s)
        if also.size:  # (a device-wide sync also waits for every other stream's work)
            np.maximum.at(x, also, new_end[also_op] + ret[also])
        new_t = H + _running_max(job.a_rank, np.maximum(x - H, NEG), ranks)
        if np.array_equal(new_t, t) and np.array_equal(new_end, end) and np.array_equal(new_arrival, arrival):
            break
        t, end, arrival = new_t, new_end, new_arrival
    return t, end, arrival
