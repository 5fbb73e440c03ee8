"""The steps of a replayed window: which step each piece of work belongs to, when each step's last work ends in a replay,
which anchors can end the measured work, the steps a cause held, and a one-time slow call given to the warm-up
(:mod:`.what_if`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ...keyed import keys
from .class_times import window_rows
from .dependency_graph import HOST_CLASSES, RankGraph
from .sweep import NEG, joined


def step_ends(graphs: list[RankGraph], a_rank: np.ndarray, lane: np.ndarray,
              last: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """A function of replayed times ``(t, end)`` (every anchor and device op of the graphs) giving, per step position, the
    latest end of the step's work, NEG where none: a host anchor's by its time in the trace, a device op's by its
    launch (its own end without one), each in the first of its rank's steps that ends at or after it (:func:`step_last`;
    ``last``: its result where the caller has it, 0.5 s at 4,096 ranks each time)."""
    n = max((len(g.steps) for g in graphs), default=0)
    la, lk, ids = last if last is not None else step_last(graphs, a_rank, lane)

    def ends(t: np.ndarray, end: np.ndarray) -> np.ndarray:
        out = np.full(n, NEG, np.int64)
        np.maximum.at(out, ids, np.concatenate([t[la], end[lk]]))
        return out
    return ends


def step_last(graphs: list[RankGraph], a_rank: np.ndarray, lane: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The work whose times can end a step (:func:`step_ends`): anchors ``la`` and device ops ``lk`` (int64 indices over the
    graphs' anchors and ops concatenated), and the step position of each (``ids``, ``la``'s then ``lk``'s). Anchor times
    rise along each rank's host chain and op ends along each device chain, in a replay as in the trace, and so do their
    steps, so the latest of a run of one step is its last: only those are kept."""
    n = max((len(g.steps) for g in graphs), default=0)
    sid_a, sid_k = [], []
    for g in graphs:
        e = g.step_bounds[1]
        sid_a.append(np.searchsorted(e, g.t, "left") if e.size else np.full(g.t.size, n))
        at = np.where(g.anchor >= 0, g.t[np.maximum(g.anchor, 0)] if g.t.size else 0, g.end)  # (device work: by its launch)
        sid_k.append(np.searchsorted(e, at, "left") if e.size else np.full(g.end.size, n))
    a, k = np.concatenate(sid_a).astype(np.int64), np.concatenate(sid_k).astype(np.int64)

    def last(key: np.ndarray, sid: np.ndarray) -> np.ndarray:
        if sid.size == 0:
            return np.zeros(0, np.int64)
        edge = np.ones(sid.size, bool)
        edge[:-1] = (key[1:] != key[:-1]) | (sid[1:] != sid[:-1])
        return np.flatnonzero(edge & (sid < n))

    la, lk = last(a_rank, a), last(lane, k)
    return la, lk, np.concatenate([a[la], k[lk]])


def first_step(graphs: list[RankGraph]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per graph, its anchors and its device ops (masks) that end within its rank's first step (none where the rank has
    no steps)."""
    ends = [int(g.step_bounds[1][0]) if g.step_bounds[1].size else NEG for g in graphs]
    return [g.t <= e for g, e in zip(graphs, ends)], [g.end <= e for g, e in zip(graphs, ends)]


def steps_with(g: RankGraph, ns: np.ndarray, min_ns: int) -> int:
    """The steps of ``g`` in which ``ns`` (per anchor) adds up to more than ``min_ns`` (at least 1 ns); -1 without steps."""
    lo, hi = g.step_bounds
    if not lo.size:
        return -1
    t = g.t
    s = np.searchsorted(lo, t, "right") - 1
    ok = (s >= 0) & (t <= int(hi[-1]))
    per = np.bincount(s[ok], weights=ns[ok].astype(np.float64), minlength=lo.size)
    return int((per > max(min_ns, 0)).sum())


def one_time_slow(with_: int, n_steps: int, before: int) -> bool:
    """Whether slow calls held in ``with_`` of a window's ``n_steps`` steps (-1 or 0 without steps) are one-time, first
    calls: in fewer than every step but one; in a window without steps, only where no run of the program went before it
    (``before``, :func:`..host.warmup_notes.runs_before`): one run of a program that ran before cannot tell a one-time
    call from one of every run."""
    if n_steps <= 0 and with_ <= 0:
        return before <= 0
    return not (with_ >= 2 and with_ >= n_steps - 1)


def first_calls_merged(g: RankGraph, n_steps: int, floor: int, before: int = 0) -> RankGraph:
    """``g`` with its ``slow_call`` time given to ``warmup`` where it is one-time (:func:`one_time_slow`: held in fewer
    than every step but one of the window's ``n_steps``, or in a trace without steps of a program that had not run before
    it, ``before``): a call far slower than its median once is a first call, and its what-if is the warm-up's (replayed
    together, not as two rows of one cause)."""
    s, w = HOST_CLASSES.index("slow_call"), HOST_CLASSES.index("warmup")
    if not g.class_ns.held(s):
        return g
    held = g.class_ns.row(s)
    if not one_time_slow(steps_with(g, held, floor), n_steps, before):
        return g
    cls = g.class_ns.moved(s, w)
    top = list(g.class_top)
    top[w] = top[s] if int(held.sum()) > g.class_ns.total(w) else top[w]
    top[s] = ""
    freeing = np.where(g.freeing == s, w, g.freeing).astype(np.int8)  # (a one-time slow free is a first call's too)
    return replace(g, class_ns=cls, class_top=tuple(top), freeing=freeing)


def before_the_work(g: RankGraph) -> np.ndarray:
    """Per anchor of ``g``: a sync call (host time of class ``sync``) that waited for no device work of the trace and
    returned before the rank's first device work began: it waited for work launched before the trace began (a warm-up's
    or capture's queue, the profiler started mid-run), which the trace does not show. Its time is not the loop's sync:
    removing it gives nothing the trace can show (the ``sync`` what-if keeps it)."""
    if g.start.size == 0:
        return np.zeros(g.t.size, bool)
    return (g.class_ns.row(HOST_CLASSES.index("sync")) > 0) & (g.target < 0) & (g.t <= g.start.min())


PROGRAM_WORK = ("graph_capture", "compile", "data_loading", "optimizer", "dispatch", "cpu_op")
"""Host classes that are the program's own work (ops, launches, loading, compiling): an anchor after such time ends
measured work (:func:`measured_anchors`); syncs, allocator calls and time outside ops after the last of them do not."""


def measured_anchors(graphs: list[RankGraph]) -> np.ndarray:
    """Per anchor of the window (the ranks' anchors concatenated): whether its time can end the measured work. Where its
    rank ran device work, every anchor up to its last step boundary, sync that waited (it returned when its work ended)
    or anchor after the program's own work (:data:`PROGRAM_WORK`: CPU ops, launches, loading): the host's time after that,
    past the rank's last device work and step, is the window's tail (the program's own code after what it measured: a
    benchmark's report, a shutdown), not a loss of the measured work, and its removal gives nothing back. A rank without
    device work: every anchor. Every rank at once (a pass over each rank's anchors per rank took 1.2 s of the 1,024-rank
    job's replay under a profiler)."""
    if not graphs:
        return np.zeros(0, bool)
    n_a, n_k = np.array([g.t.size for g in graphs], np.int64), np.array([g.start.size for g in graphs], np.int64)
    a_at, k_at = np.concatenate([[0], np.cumsum(n_a)]), np.concatenate([[0], np.cumsum(n_k)])
    a_rank = np.repeat(np.arange(len(graphs), dtype=np.int64), n_a)
    t, ret, end = joined([g.t for g in graphs]), joined([g.ret for g in graphs]), joined([g.end for g in graphs])
    target = np.concatenate([np.where(g.target >= 0, g.target.astype(np.int64) + int(k_at[i]), -1) for i, g in enumerate(graphs)])
    waited = (target >= 0) & (end[np.maximum(target, 0)] + ret >= t) if end.size else np.zeros(t.size, bool)  # (a sync that returned when its work ended)
    worked = window_rows([g.class_ns for g in graphs], a_rank, [HOST_CLASSES.index(c) for c in PROGRAM_WORK], range(len(graphs))) > 0
    bounds = [np.concatenate(g.step_bounds) for g in graphs]
    at_bound, bound = keys((a_rank, t), (np.repeat(np.arange(len(graphs), dtype=np.int64), [b.size for b in bounds]),
                                         np.concatenate(bounds).astype(np.int64)))
    bound = np.sort(bound)
    on_bound = bound[np.minimum(np.searchsorted(bound, at_bound), bound.size - 1)] == at_bound if bound.size else np.zeros(t.size, bool)
    marked = np.flatnonzero(worked | waited | on_bound)  # (the program's work before it, a sync that waited, a step's bound)
    last = a_at[:-1] - 1  # (each rank's last marked anchor; before its first where it has none)
    if marked.size:
        at = marked[np.maximum(np.searchsorted(marked, a_at[1:]) - 1, 0)]  # (the last marked before the next rank)
        last = np.where((at >= a_at[:-1]) & (at < a_at[1:]), at, last)
    return (np.arange(t.size) <= last[a_rank]) | (n_k == 0)[a_rank]
