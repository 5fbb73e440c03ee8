"""What removing a cause would give back: the job's dependency graph (:mod:`.dependency_graph`) replayed.

Definitions (quoted by docs/measures.md). Replaying the graph with the trace's durations gives the trace's own times
exactly (int64 ns): each chain's times are a running maximum (:func:`replay`), and one sweep over the graph in a
topological order carries time across host, device and rank edges (:mod:`.sweep`). A *what-if* replays it with one
cause's time removed and gives the *gain*: how much earlier the window's last work (anchor or device op, on any rank)
ends; per step, the gain over the number of steps. Causes: each host class of :data:`.dependency_graph.HOST_CLASSES`
(its host time set to zero), ``sync`` (the syncs wait for nothing and their own host time is gone), ``pageable_copy``
(those copies take no time), per rank and on every rank at once; and, across ranks, ``imbalance``: a rank's device
time, per kernel name, beyond the median of the other ranks' (taken from its longest ops of that name first: extra
work is whole kernels, or longer ones). Each what-if is replayed alone: gains of two causes are not added (removing both
may give less than their sum, never more). A cause is replayed only where its bound from the critical paths may clear
the window's noise floor (:mod:`.what_if_plan`): a rank off the path gives nothing back, and is not replayed.

Where we differ from HTA: HTA's critical path is one rank's longest path through the same kinds of edges and
attributes its time to what lies on it; the gain of removing a cause is not the time it holds on the path (other
paths take over: a host sleep while the device is busy costs nothing), so we replay instead of summing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ...keyed import keys
from ..memo import empty_frame
from .class_times import window_rows
from .contention import Slowdowns, charged_waits, last_arrivals, slowdowns, wait_spans
from .dependency_graph import HOST_CLASSES, RankGraph
from .held_times import WindowSteps
from .imbalance import excess_cap, excesses, kernel_codes, segment_codes, without_excess
from .packed import give_back_freed
from .sweep import NEG, Sweep, fits_int32, index_type, joined
from .sync_names import sync_top
from .unseen_peers import alike_inputs, alike_job, alone, pinned_fixed, transfers
from .what_if_order import COLUMNS, EXPOSING_SHARE
from .what_if_plan import INF, Candidate, Make, chosen, critical_bounds, lead_graph, sinks, wanted, with_rank
from .what_if_steps import before_the_work, first_calls_merged, first_step, measured_anchors, step_ends, step_last
from .what_if_table import EVERY_RANK_FACTOR, STEP_COLUMNS, assemble, kept_rows


@dataclass
class WindowJob:
    """The ranks' graphs concatenated: offsets, chain keys, collective groups."""

    graphs: list[RankGraph]
    a_rank: np.ndarray
    k_rank: np.ndarray
    lane: np.ndarray
    target: np.ndarray
    anchor: np.ndarray
    mem_op: np.ndarray
    """Memberships of device ops in cross-rank instances (a collective, or one point-to-point transfer): the op ..."""
    mem_group: np.ndarray
    """... and the instance (an op of a batched point-to-point kernel is a member of several)."""
    d: np.ndarray
    first: np.ndarray
    dep: np.ndarray
    also_anchor: np.ndarray
    """A device-wide sync's other edges (:attr:`.dependency_graph.RankGraph.also_anchor`): the anchor ..."""
    also_op: np.ndarray
    """... and the op it also waits for."""
    collective: np.ndarray
    """(K,) bool: the op is a member of a collective instance every member of which runs the same program (not a
    point-to-point transfer, whose sides do different work)."""
    fixed: np.ndarray
    """(K,) each op's earliest start (:attr:`.dependency_graph.RankGraph.fixed`; raised where its peers are not in the
    window, :mod:`.unseen_peers`)."""
    sweep: Sweep | None = None
    """The graph in topological order (:class:`.sweep.Sweep`), built at the first replay or :func:`swept`."""
    counted: np.ndarray | None = None
    """(A,) bool: :func:`counted_anchors`, found at its first read."""


def counted_anchors(job: WindowJob) -> np.ndarray:
    """The anchors whose time can end the measured work (:func:`.what_if_steps.measured_anchors` of the job's graphs),
    found once a job (:attr:`WindowJob.counted`): the critical path and the what-ifs read it alike."""
    if job.counted is None:
        job.counted = measured_anchors(job.graphs)
    return job.counted


def window_job(graphs: list[RankGraph], per_rank: pd.DataFrame | None) -> WindowJob:
    """The ranks' graphs of one window joined, with its cross-rank instances (``per_rank``: its matched collectives,
    :attr:`..job.collectives.WindowCollectives.per_rank`, None for one rank): what :func:`what_ifs` replays and
    :func:`.critical_path.critical_path` walks, built once for both by :func:`.what_if_windows.window_what_if` (1.9 s at 4,096 ranks)."""
    a_off = np.cumsum([0] + [g.t.size for g in graphs])
    k_off = np.cumsum([0] + [g.start.size for g in graphs])
    l_off = np.cumsum([0] + [int(g.lane.max(initial=-1)) + 1 for g in graphs])
    cat, ix = np.concatenate, index_type(int(a_off[-1] + 2 * k_off[-1] + l_off[-1]) + len(graphs) + 1)  # (indices: int32 where they fit)
    a_rank = cat([np.full(g.t.size, i, ix) for i, g in enumerate(graphs)])
    k_rank = cat([np.full(g.start.size, i, ix) for i, g in enumerate(graphs)])
    lane = cat([(g.lane + l_off[i]).astype(ix) for i, g in enumerate(graphs)])
    target = cat([np.where(g.target >= 0, g.target + k_off[i], -1).astype(ix) for i, g in enumerate(graphs)])
    anchor = cat([np.where(g.anchor >= 0, g.anchor + a_off[i], -1).astype(ix) for i, g in enumerate(graphs)])
    dep = cat([np.where(g.dep >= 0, g.dep + k_off[i], -1).astype(ix) for i, g in enumerate(graphs)])
    d = cat([g.d for g in graphs]).copy()
    mem_op, mem_group = np.zeros(0, np.int64), np.zeros(0, np.int64)
    if per_rank is not None and not per_rank.empty:
        gid = per_rank.groupby(["pg", "seq"], sort=False, dropna=False).ngroup().to_numpy(np.int64)  # (in order of first row)
        start = joined([g.start for g in graphs])
        pg, pg_names = pd.factorize(per_rank["pg"])  # (.p2p.pair_rows's groups: "src->dst"; each name read once, not each row)
        p2p = np.isin(pg, np.flatnonzero(np.array(["->" in str(x) for x in pg_names], bool)))
        mem_op, mem_group = memberships(graphs, k_rank, start, per_rank["rank"].to_numpy(np.int64), per_rank["start_ns"].to_numpy(np.int64), gid)
        last_op = last_arrivals(start, mem_op, mem_group)  # (each instance's last arrival, as the waits read it)
        last = np.where(last_op >= 0, start[np.maximum(last_op, 0)], NEG)
        bound = np.full(d.size, NEG, np.int64)
        np.maximum.at(bound, mem_op, last[mem_group])
        m = bound > NEG
        end = joined([g.end for g in graphs])
        d[m] = np.maximum(end[m] - bound[m], 0)  # a collective's transfer after its last member arrived
    lone = alone(cat([g.comm & g.ranked for g in graphs]), dep, mem_op)  # (peers not in the window: .unseen_peers)
    if lone.any():  # (else the durations and starts as they are: no copy of each, 16 bytes an op)
        d = transfers(d, lone, k_rank.astype(np.int64) * (max((len(g.names) for g in graphs), default=0) + 1) + cat([g.name for g in graphs]))
    first = np.r_[True, lane[1:] != lane[:-1]] if lane.size else np.ones(0, bool)
    also_anchor = cat([g.also_anchor + a_off[i] for i, g in enumerate(graphs)])
    also_op = cat([g.also_op + k_off[i] for i, g in enumerate(graphs)])
    collective = np.zeros(d.size, bool)
    if mem_op.size:
        p2p_instance = np.zeros(int(gid.max()) + 1, bool)  # per instance (its (pg, seq) code): a point-to-point transfer
        p2p_instance[gid[p2p]] = True
        collective[mem_op[~p2p_instance[mem_group]]] = True
    fixed = joined([g.fixed for g in graphs])  # (read, never written: the packed graphs' own where they are)
    fixed = pinned_fixed(fixed, joined([g.end for g in graphs]), d, lone) if lone.any() else np.asarray(fixed, np.int64)
    return WindowJob(graphs, a_rank, k_rank, lane, target, anchor, mem_op, mem_group, d, first, dep, also_anchor, also_op, collective, fixed)


def memberships(graphs: list[RankGraph], k_rank: np.ndarray, start: np.ndarray, row_rank: np.ndarray, row_start: np.ndarray,
                gid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which device op of the window each row of its matched collectives is (:data:`WindowJob.mem_op`, :data:`WindowJob.mem_group`):
    the communication kernel of the row's rank that starts at the row's ``start_ns`` (of several, the first in the
    graph's order); rows are taken rank by rank in the graphs' order, each rank's in their order, a row of a rank
    without a graph or without such a kernel left out. ``k_rank``: each op's graph (index); ``start``: each op's start
    (ns); ``gid``: each row's instance. One sort of (graph, time) keys (:func:`traceprobe.keyed.keys`) for every rank at
    once: a pass over every row per rank made the 4,096-rank job's replay quadratic in its ranks (86 s of its 135 under cProfile)."""
    none = np.zeros(0, np.int64)
    sid = np.array([g.rank for g in graphs], np.int64)
    order = np.argsort(sid, kind="stable")
    sid = sid[order]
    lo, hi = np.searchsorted(sid, row_rank, "left"), np.searchsorted(sid, row_rank, "right")
    rows = np.flatnonzero(hi > lo)
    keep = np.argsort(order[lo[rows]], kind="stable")  # (at its rank's first graph's place; in its last graph, as a dict of
    rows, row_graph = rows[keep], order[hi[rows] - 1][keep]  # the ranks gave where two graphs have one rank)
    ks = np.flatnonzero(np.concatenate([g.comm for g in graphs])) if graphs else none  # (members are communication kernels)
    if not ks.size or not rows.size:
        return none, none
    op_key, row_key = keys((k_rank[ks], start[ks]), (row_graph, row_start[rows]))
    o = np.argsort(op_key, kind="stable")
    p = np.minimum(np.searchsorted(op_key[o], row_key), ks.size - 1)
    hit = op_key[o][p] == row_key
    return ks[o[p[hit]]].astype(np.int64), gid[rows[hit]].astype(np.int64)


def replay(job: WindowJob, h: np.ndarray, d: np.ndarray, no_sync: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`replay_arrivals` without the arrivals: ``(t, end)``."""
    return replay_arrivals(job, h, d, no_sync)[:2]


def replay_arrivals(job: WindowJob, h: np.ndarray, d: np.ndarray, no_sync: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Anchor times and device op ends of the job replayed with host times ``h``, durations ``d`` and the sync edges
    of the anchors in ``no_sync`` (bool) dropped (module docstring). Returns ``(t, end, arrival)`` (int64 ns; arrival:
    when each device op could start, before any cross-rank instance holds it).

    One sweep over the window's graph in a topological order (:mod:`.sweep`, built once per window): each chain's
    times are a running maximum (a device op ends at ``P_k + max_{j<=k}(E_j + d_j - P_j)`` where ``P`` sums its
    stream's lags and durations and ``E`` is its latest other edge, the host at ``H_i + max_{j<=i}(X_j - H_j)``),
    every node computed once from its predecessors' replayed times. O(nodes + edges) per replay."""
    return swept(job).replay(h, d, (job.target >= 0) & ~no_sync)


def swept(job: WindowJob) -> Sweep:
    """The window's graph in a topological order (:class:`.sweep.Sweep`), built at the first call and kept on ``job``."""
    if job.sweep is None:
        cat, graphs = joined, job.graphs  # (the packed graphs' arrays as they are: .packed)
        job.sweep = Sweep(job.a_rank, cat([g.t for g in graphs]), job.anchor, job.dep, job.lane, job.target, job.also_anchor,
                          job.also_op, job.mem_op, job.mem_group, cat([g.start for g in graphs]), cat([g.end for g in graphs]),
                          cat([g.g for g in graphs]), cat([g.l for g in graphs]), job.fixed,
                          cat([g.ret for g in graphs]), cat([g.dep_lag for g in graphs]), cat([g.pre_dur for g in graphs]))
    return job.sweep


def what_ifs(graphs: list[RankGraph], per_rank: pd.DataFrame | None = None, min_ns: int = 0,
             only: set[int] | None = None, groups: Mapping[str, tuple[str, ...]] | None = None,
             before: int = 0, job: WindowJob | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The gain of removing each cause, one at a time (module docstring), in all and step by step; and of each of ``groups`` (a
    name: host classes of :data:`HOST_CLASSES`, sync aside) removed at once, on the ranks where the first of them holds more
    than ``min_ns``, in rows of that name after the ordered ones (they are not causes of their own: their time is their classes').

    Causes: each host class of :data:`HOST_CLASSES` (its host time set to zero), ``sync`` (the syncs wait for nothing),
    ``pageable_copy`` (copies from or to pageable memory take no time: pinned memory would let the host go on), per rank
    and, where two or more ranks hold it, on every rank at once (``rank`` -1: a cause every rank shares, such as a sync in
    the loop or a recompile, gives nothing back when removed from one rank alone); and, across ranks, ``imbalance``: a
    rank's device time per kernel name beyond the median of the other ranks' (not communication, not pageable copies); a
    cause removed on one rank also takes away the slowdown its waits caused the others' compute (:mod:`.contention`).

    Args:
        graphs: the ranks of one window (:func:`rank_graph` of each trace), in any order.
        per_rank: the window's matched collectives (:attr:`.collectives.WindowCollectives.per_rank`), None for one rank.
        min_ns: the window's noise floor: causes whose removed time is at most this are not replayed, nor those whose
            gain is bounded (by the time they hold on the window's and its steps' critical paths) under what any finding
            can show (:mod:`.what_if_plan`; :data:`PRUNE`): they have no row.
        only: the graphs (indices) whose causes are replayed one rank at a time (None: every graph); the causes on every
            rank at once are replayed all the same. Time removed from work off the critical path gives nothing back (the
            path keeps its length), so the ranks the window's critical path visits are enough: a job of thousands of
            ranks replays a few of them alone.
        before: the steps or runs of the program before the window: a slow call is one-time as :func:`.what_if_steps.one_time_slow` says.
        job: ``graphs`` (with their first calls merged as here) and ``per_rank`` joined (:func:`window_job`), where the caller has it; None: joined here.

    Returns:
        DataFrame, largest gain first: ``rank`` (int64, -1 every rank), ``cause`` (str), ``top`` (str: the host op, sync call or kernel
        name holding most of it), ``removed_ns`` (int64: the time taken out, on all its ranks, with the others' compute its contention relief lowers: ``gain_ns``' bound),
        ``gain_ns`` (int64: how much earlier the window's last work ends), ``per_step_ns`` (int64: ``gain_ns`` over
        the most steps n a rank of the window has, or ``gain_ns`` without steps; where n >= 2, at least the gain after
        the first step, ``gain_ns`` less how much earlier the first step's last work ends, over n - 1: a cause that
        delays the step after it, such as a sync at a step's end, gives nothing back in the window's first step; only
        where the first step held at least :data:`FIRST_STEP_SHARE` of an even split of the removed time, so the
        cause was there alike; not for ``imbalance``, whose excess is taken from the window as a whole), ``steps_with`` (int64: the steps
        whose own time the cause held, on the rank holding it most; -1 without steps), ``beyond`` (int64: for a row of
        every rank whose cause one rank holds most of, that rank: the row's gains are what removing it on every rank
        gives beyond removing it on that rank alone (:func:`.what_if_table._beyond_the_lead`); -1 otherwise). Ordered by ``per_step_ns``,
        the figure every view shows first (:func:`.what_if_order.ordered`).

        And its gain step by step: ``rank``, ``cause`` (as in the table), ``step`` (int64, the step's number, of the
        first rank with every step), ``gain_ns`` (int64: how much earlier the step's last work ends, on any rank, less
        how much earlier the step before it ends: the gains of the steps add up to the gain of the window's last step),
        one row per row of the table and step of the window; empty without steps. A step's work is its rank's host work
        up to the step's end and the device work launched in it (the ranks' steps taken by position).
    """
    if not graphs:
        return (empty_frame({c: object if c in ("cause", "top") else np.int64 for c in COLUMNS}),
                empty_frame({c: object if c == "cause" else np.int64 for c in STEP_COLUMNS}))
    n_steps = max((len(g.steps) for g in graphs), default=0)
    graphs = [first_calls_merged(g, n_steps, max(min_ns, 0), before) for g in graphs]
    job = job if job is not None else window_job(graphs, per_rank)
    h0 = joined([g.h for g in graphs])  # (read, never written: the packed graphs' own where they are, .packed)
    no_sync = np.zeros(h0.size, bool)
    t_all, end_all = joined([g.t for g in graphs]), joined([g.end for g in graphs])
    counted = counted_anchors(job)
    base = _finish(t_all, end_all, counted)  # (the replay is exact)
    (fa, fk), floor = first_step(graphs), max(min_ns, 0)
    la, lk, ids = step_last(graphs, job.a_rank, job.lane)
    ends_of = step_ends(graphs, job.a_rank, job.lane, (la, lk, ids))
    base_steps = ends_of(t_all, end_all)
    waits = np.concatenate([np.where(g.target >= 0, g.t - np.concatenate([g.t[:1], g.t[:-1]]) - g.h, 0) for g in graphs])
    free_cls = np.concatenate([g.freeing for g in graphs])  # (device frees: their waits go with their host class, not the syncs')
    steps_of, freed = WindowSteps(graphs, fa, floor), np.flatnonzero(free_cls >= 0)  # (each cause's time per rank: .held_times)
    pageable = joined([g.pageable for g in graphs])
    start0, end0 = joined([g.start for g in graphs]), end_all  # (read, never written: one array)
    w = wait_spans(start0, end0, job.k_rank, job.mem_op, job.mem_group)
    code, names = kernel_codes(graphs)
    slow = slowdowns(start0, end0, job.d, code, job.k_rank, np.concatenate([g.comm for g in graphs]), w, job.lane) if len(graphs) > 1 else Slowdowns.none(job.d.size)
    charged = charged_waits(start0, end0, w, job.mem_op, job.mem_group, len(graphs))  # (each rank's waits, as recorded)
    cands: list[Candidate] = []

    def class_ns(classes: tuple[int, ...], ranks: Iterable[int]) -> Callable[[], np.ndarray]:  # (built where read, for its ranks)
        return lambda: window_rows([g.class_ns for g in graphs], job.a_rank, classes, ranks)

    def host_cut(ranks: list[int], cut: Callable[[], np.ndarray], drop: Callable[[], np.ndarray] | None) -> Make:
        """A what-if removing ``cut()`` (per anchor) of ``ranks``' host time and the sync edges of ``drop()`` (both built where read)."""
        return lambda ia, ik, isx: (h0[ia] - np.where(np.isin(job.a_rank[ia], ranks), cut()[ia], 0), job.d[ik],
                                    np.isin(job.a_rank[isx], ranks) & drop()[isx] if drop is not None else no_sync[isx])

    def add(ranks: list[int], cause: str, removed: list[int], top: str, make: Make, held: list[int], first: int = 0) -> None:
        cands.append(Candidate(ranks, cause, removed, top, make, held, first, ranks[0] if len(ranks) == 1 and ranks[0] in slow else -1))

    def run(c: Candidate, j: WindowJob = job, every: bool = False) -> tuple:  # (j, every: the alike job's twins, below)
        ranks = c.ranks
        rank = graphs[ranks[0]].rank if len(ranks) == 1 and not every else -1
        h, d, drop = c.make(_ALL, _ALL, _ALL)
        (t, end, arrival), cut = replay_arrivals(j, h, d, drop), np.zeros(0, np.int64)
        if c.relief >= 0:  # the others' compute, slowed beside waits for this rank (.contention): taken out too
            share = 1 - charged_waits(arrival, end, w, job.mem_op, job.mem_group, len(graphs))[c.relief] / max(int(charged[c.relief]), 1)
            cut = np.minimum((slow[c.relief] * min(max(share, 0.0), 1.0)).astype(np.int64), d)
            t, end = replay(j, h, d - cut, drop) if share > 0 else (t, end)
        earlier = np.where(base_steps > NEG, base_steps - ends_of(t, end), 0)  # (how much earlier each step's last work ends)
        return (rank, c.cause, c.top, sum(c.removed) + int(cut.sum()), base - _finish(t, end, counted), max(c.held), int(earlier[0]) if earlier.size else 0,
                c.first, {graphs[i].rank: n for i, n in zip(ranks, c.removed)}, np.diff(earlier, prepend=0))

    sync = HOST_CLASSES.index("sync")
    for c, cause in enumerate(HOST_CLASSES):
        if c == sync:
            continue  # (told with the syncs' waits, below)
        held = steps_of.of_classes(graphs, (c,), (mine := freed[free_cls[freed] == c], waits[mine]))  # (a free's wait: its class's)
        holding = np.flatnonzero(held.ns > floor).tolist()
        drop = (lambda c=c: (free_cls == c) & (job.target >= 0)) if holding else None  # (a free's wait goes with it)
        for ranks in _replays(holding, only):
            top = ranks[int(np.argmax(held.ns[ranks]))]
            add(ranks, cause, held.ns[ranks].tolist(), graphs[top].class_top[c], host_cut(ranks, class_ns((c,), ranks), drop),
                held.steps[ranks].tolist(), int(held.first[ranks].sum()))
    unseen = np.concatenate([before_the_work(g) for g in graphs])  # (syncs that waited for work launched before the trace: kept)
    sync_ns = class_ns((sync,), range(len(graphs)))() * ~unseen  # (a sync's wait and its host time)
    waits = np.where(free_cls >= 0, 0, waits) + sync_ns
    sync_ns = sync_ns.astype(np.int32) if fits_int32(sync_ns) else sync_ns  # (held through the replays: half as int32)
    holding = np.flatnonzero((held := steps_of.of_dense(waits)).ns > floor).tolist()
    sync_drop = (job.target >= 0) & ~np.concatenate([g.blocking for g in graphs]) & (free_cls < 0)
    for ranks in _replays(holding, only):
        most = ranks[int(np.argmax(held.ns[ranks]))]
        add(ranks, "sync", held.ns[ranks].tolist(), sync_top(graphs[most], waits[int(steps_of.at[most]):int(steps_of.at[most + 1])]),
            host_cut(ranks, lambda: sync_ns, lambda: sync_drop), held.steps[ranks].tolist(), int(held.first[ranks].sum()))
    for name, classes in (groups or {}).items():  # (several host classes at once: what a CUDA graph of the step removes)
        idx = [HOST_CLASSES.index(c) for c in classes]
        held = steps_of.of_classes(graphs, idx)
        holding = [i for i, g in enumerate(graphs) if g.class_ns.total(idx[0]) > floor]  # (where its first class alone counts)
        for ranks in _replays(holding, only):
            holder = graphs[ranks[int(np.argmax(held.ns[ranks]))]]
            most = max(idx, key=holder.class_ns.total)
            add(ranks, name, held.ns[ranks].tolist(), holder.class_top[most], host_cut(ranks, class_ns(tuple(idx), ranks), None),
                held.steps[ranks].tolist(), int(held.first[ranks].sum()))
    copies = [int(g.d[g.pageable].sum()) for g in graphs]
    holding = [i for i, n in enumerate(copies) if n > floor]
    for ranks in _replays(holding, only):
        add(ranks, "pageable_copy", [copies[i] for i in ranks], "Memcpy (pageable)",
            lambda ia, ik, isx, r=ranks: (h0[ia], np.where(pageable[ik] & np.isin(job.k_rank[ik], r), 0, job.d[ik]), no_sync[isx]), [-1],
            sum(int(graphs[i].d[graphs[i].pageable & fk[i]].sum()) for i in ranks))
    k_at = np.searchsorted(job.k_rank, np.arange(len(graphs) + 1))  # (each rank's ops: one run, the ranks in order)
    for i, g in enumerate(graphs):  # device causes (.what_if_kernels): kernels at their roofline, elementwise chains fused
        for cause, top, dur in g.device_causes if only is None or i in only else ():  # (held as the rank's durations only)
            lo, mine = int(k_at[i]), np.minimum(dur, job.d[k_at[i]:k_at[i + 1]])
            if (cut := int((job.d[k_at[i]:k_at[i + 1]] - mine).sum())) > floor:
                add([i], cause, [cut], top, lambda ia, ik, isx, lo=lo, mine=mine: (h0[ia], with_rank(job.d, ik, lo, mine), no_sync[isx]), [-1])
    del waits, held, steps_of  # (each anchor's wait and step: 12 bytes an anchor)
    give_back_freed()  # (their heap pages given back before the imbalance's and the replays' arrays)
    if len(graphs) > 1:
        s_code, s_names, segment = segment_codes(graphs, code, names, job.collective)
        rows, inside = excesses(graphs, job.k_rank, job.d, floor, s_code, s_names, only, segment)
        for i, top, removed, excess, whole in rows:  # (its durations built where it is replayed)
            d_of = without_excess(i, excess, whole, job.k_rank, job.d, s_code, inside)
            add([i], "imbalance", [removed], top, lambda ia, ik, isx, d_of=d_of: (h0[ia], d_of(ik), no_sync[isx]), [-1])
            cands[-1].cap = excess_cap(i, excess, job.k_rank, job.d, s_code, inside)
    del code  # (the kernel codes: not held through the replays)
    recorded = (h0, t_all, end_all, counted, la, lk, ids, base, base_steps)
    done = _replayed(cands, run, job, recorded, slow, floor, n_steps, groups or {}, graphs)
    rows = [done[i] for i in sorted(done)]
    if (twin := alike_job(job, graphs, floor)) is not None:  # (one rank of a job whose other ranks the window lacks, run alike: .unseen_peers)
        alike, ops = twin
        twins = [replace(c, make=alike_inputs(c.make, ops, alike.d), relief=-1, bound=(INF, INF)) for c in cands]
        more = _replayed(twins, lambda c: run(c, alike, True), alike, recorded, slow, floor, n_steps, groups or {}, graphs, True)
        rows += [more[i] for i in sorted(more)]
    return assemble(rows, graphs, n_steps, set(groups or {}), floor)[1:]


_ALL = slice(None)


PRUNE = True
"""Replay only the what-ifs whose bound on the critical paths may clear the noise floor (:mod:`.what_if_plan`); False
replays every one (the reference of the tests)."""


def _replayed(cands: list[Candidate], run, job: WindowJob, recorded: tuple, slow: Slowdowns, floor: int, n_steps: int,
              groups: Mapping[str, tuple[str, ...]], graphs: list[RankGraph], every: bool = False) -> dict[int, tuple]:
    """The rows (:data:`.what_if_table.ROW`) of the candidates replayed (:mod:`.what_if_plan`), by their index: those whose
    bound may clear the floor, best bound first, then those the replayed rows' figures or order read (each round reads
    the rows kept, :func:`.what_if_table.kept_rows`, not the ordered table); ``every``: each candidate's row is of every
    rank (``rank`` -1)."""
    h0, t_all, end_all, counted, la, lk, ids, base, base_steps = recorded
    chosen_ = set(range(len(cands)))
    if PRUNE and floor > 0 and cands:
        times = replay_arrivals(job, h0, job.d, np.zeros(h0.size, bool))
        exact = _finish(times[0], times[1], counted) == base and np.array_equal(step_ends(graphs, job.a_rank, job.lane, (la, lk, ids))(*times[:2]), base_steps)
        sink, step_sinks = sinks(h0.size, job.d.size, times[0], times[1], counted, la, lk, ids, n_steps)
        bounds = critical_bounds(job.sweep, h0, job.d, times, sink, [s for s in step_sinks if s >= 0], slow) if exact else None
        if bounds is not None:
            for c in cands:
                c.bound = bounds.of(c)
            chosen_ = chosen(cands, floor, EXPOSING_SHARE, n_steps)
        del times, bounds  # (the replay as recorded and its path's bounds: 0.1 GB a 1,024 ranks, not held through the replays)
    done: dict[int, tuple] = {}
    gains: dict[int, int] = {}
    while chosen_:
        for i in sorted(chosen_, key=lambda i: -cands[i].bound[0]):
            done[i] = run(cands[i])
            gains[i] = int(done[i][4])
        kept = kept_rows([done[i] for i in sorted(done)], n_steps, set(groups), floor)[0]
        chosen_ = wanted(cands, gains, kept, lambda c: graphs[c.ranks[0]].rank if len(c.ranks) == 1 and not every else -1, EVERY_RANK_FACTOR,
                         lambda c: lead_graph(c, graphs), groups)
    return done


def what_if(graphs: list[RankGraph], per_rank: pd.DataFrame | None = None, min_ns: int = 0, only: set[int] | None = None) -> pd.DataFrame:
    """:func:`what_ifs`' table alone."""
    return what_ifs(graphs, per_rank, min_ns, only)[0]


def _replays(holding: list[int], only: set[int] | None) -> list[list[int]]:
    """The rank sets a cause held by the graphs ``holding`` is replayed with: each alone (those in ``only``, where
    given), then all of them at once where two or more hold it."""
    return [[i] for i in holding if only is None or i in only] + ([holding] if len(holding) > 1 else [])


def _finish(t: np.ndarray, end: np.ndarray, counted: np.ndarray | None = None) -> int:
    """When the window's last work ends: its last device op, or its last anchor of ``counted`` (bool per anchor; every
    anchor where None): :func:`measured_anchors`."""
    last_t = t[counted].max(initial=NEG) if counted is not None else t.max(initial=NEG)
    return int(max(last_t, end.max(initial=NEG)))
