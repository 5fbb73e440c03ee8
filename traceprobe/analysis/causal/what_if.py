"""What removing a cause would give back: the job's dependency graph (:mod:`.dependency_graph`) replayed.

Definitions (quoted by the README). Replaying the graph with the trace's durations gives the trace's own times
exactly (int64 ns): each chain's times are a running maximum (:func:`replay`), and one sweep over the graph in a
topological order carries time across host, device and rank edges (:mod:`.sweep`). A *what-if* replays it with one
cause's time removed and gives the *gain*: how much earlier the window's last work (anchor or device op, on any rank) ends; per step, the gain over the number of
steps. Causes: each host class of :data:`.dependency_graph.HOST_CLASSES` (its host time set to zero), ``sync`` (the
syncs wait for nothing and their own host time is gone), ``pageable_copy`` (those copies take no time), per rank and
on every rank at once; and, across ranks, ``imbalance``: a rank's device time, per kernel name, beyond the median of
the other ranks' (taken from its longest ops of that name first: extra work is whole kernels, or longer ones). Each what-if is replayed alone: gains of two causes are not added (removing both may give less
than their sum, never more).

Where we differ from HTA: HTA's critical path is one rank's longest path through the same kinds of edges and
attributes its time to what lies on it; the gain of removing a cause is not the time it holds on the path (other
paths take over: a host sleep while the device is busy costs nothing), so we replay instead of summing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .contention import charged_wait, last_arrivals, slowdowns, wait_spans
from .dependency_graph import HOST_CLASSES, NEG, RankGraph
from .imbalance import excess_device_work, kernel_codes, segment_codes
from .sweep import Sweep
from .sync_names import sync_top
from .what_if_order import COLUMNS, ordered
from .what_if_steps import first_calls_merged, first_step, step_ends, steps_with

EVERY_RANK_FACTOR = 1.2
"""A cause removed on every rank is listed when it gains more than this times its best single rank's removal."""

LEAD_SHARE = 0.5
"""A cause on every rank is told beyond one rank's own row where that rank holds at least this share of its time ..."""

LEAD_FACTOR = 2.0
"""... and at least this many times the median of the other ranks holding it (:func:`_beyond_the_lead`)."""

FIRST_STEP_SHARE = 0.5
"""A cause's gain after the window's first step stands for its gain per step only where the first step held at least
this share of an even split of the time the cause removes (it was there alike, its effect came a step later)."""

@dataclass
class _Job:
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
    sweep: Sweep | None = None
    """The graph in topological order (:class:`.sweep.Sweep`), built at the first replay."""


def _job(graphs: list[RankGraph], per_rank: pd.DataFrame | None) -> _Job:
    a_off = np.cumsum([0] + [g.t.size for g in graphs])
    k_off = np.cumsum([0] + [g.start.size for g in graphs])
    l_off = np.cumsum([0] + [int(g.lane.max(initial=-1)) + 1 for g in graphs])
    cat = np.concatenate
    a_rank = cat([np.full(g.t.size, i, np.int64) for i, g in enumerate(graphs)])
    k_rank = cat([np.full(g.start.size, i, np.int64) for i, g in enumerate(graphs)])
    lane = cat([g.lane + l_off[i] for i, g in enumerate(graphs)])
    target = cat([np.where(g.target >= 0, g.target + k_off[i], -1) for i, g in enumerate(graphs)])
    anchor = cat([np.where(g.anchor >= 0, g.anchor + a_off[i], -1) for i, g in enumerate(graphs)])
    dep = cat([np.where(g.dep >= 0, g.dep + k_off[i], -1) for i, g in enumerate(graphs)])
    d = cat([g.d for g in graphs]).copy()
    mem_op, mem_group = np.zeros(0, np.int64), np.zeros(0, np.int64)
    if per_rank is not None and not per_rank.empty:
        ranks = {g.rank: i for i, g in enumerate(graphs)}
        gid = pd.MultiIndex.from_arrays([per_rank["pg"], per_rank["seq"]]).factorize()[0]
        start = cat([g.start for g in graphs])
        ops, grp = [], []
        p2p = per_rank["pg"].astype(str).str.contains("->", regex=False).to_numpy()  # (.p2p.pair_rows's groups)
        for r, i in ranks.items():  # (one pass per rank)
            sel = (per_rank["rank"] == r).to_numpy()
            if not sel.any():
                continue
            ks = np.arange(k_off[i], k_off[i + 1])[graphs[i].comm]  # (members are communication kernels)
            if ks.size == 0:
                continue
            key = start[ks]
            o = np.argsort(key, kind="stable")
            p = np.searchsorted(key[o], per_rank["start_ns"].to_numpy(np.int64)[sel])
            hit = (p < key.size) & (key[o][np.minimum(p, key.size - 1)] == per_rank["start_ns"].to_numpy(np.int64)[sel])
            ops.append(ks[o[p[hit]]])
            grp.append(gid[sel][hit])
        if ops:
            mem_op, mem_group = cat(ops).astype(np.int64), cat(grp).astype(np.int64)
        last_op = last_arrivals(start, mem_op, mem_group)  # (each instance's last arrival, as the waits read it)
        last = np.where(last_op >= 0, start[np.maximum(last_op, 0)], NEG)
        bound = np.full(d.size, NEG, np.int64)
        np.maximum.at(bound, mem_op, last[mem_group])
        m = bound > NEG
        end = cat([g.end for g in graphs])
        d[m] = np.maximum(end[m] - bound[m], 0)  # a collective's transfer after its last member arrived
    first = np.ones(lane.size, bool)
    first[1:] = lane[1:] != lane[:-1]
    also_anchor = cat([g.also_anchor + a_off[i] for i, g in enumerate(graphs)])
    also_op = cat([g.also_op + k_off[i] for i, g in enumerate(graphs)])
    collective = np.zeros(d.size, bool)
    if mem_op.size:
        p2p_instance = np.zeros(int(gid.max()) + 1, bool)  # per instance (its (pg, seq) code): a point-to-point transfer
        p2p_instance[gid[p2p]] = True
        collective[mem_op[~p2p_instance[mem_group]]] = True
    return _Job(graphs, a_rank, k_rank, lane, target, anchor, mem_op, mem_group, d, first, dep, also_anchor, also_op, collective)


def replay(job: _Job, h: np.ndarray, d: np.ndarray, no_sync: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`replay_arrivals` without the arrivals: ``(t, end)``."""
    t, end, _ = replay_arrivals(job, h, d, no_sync)
    return t, end


def replay_arrivals(job: _Job, h: np.ndarray, d: np.ndarray, no_sync: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Anchor times and device op ends of the job replayed with host times ``h``, durations ``d`` and the sync edges
    of the anchors in ``no_sync`` (bool) dropped (module docstring). Returns ``(t, end, arrival)`` (int64 ns; arrival:
    when each device op could start, before any cross-rank instance holds it).

    One sweep over the window's graph in a topological order (:mod:`.sweep`, built once per window): each chain's
    times are a running maximum (a device op ends at ``P_k + max_{j<=k}(E_j + d_j - P_j)`` where ``P`` sums its
    stream's lags and durations and ``E`` is its latest other edge, the host at ``H_i + max_{j<=i}(X_j - H_j)``),
    every node computed once from its predecessors' replayed times. O(nodes + edges) per replay."""
    if job.sweep is None:
        cat, graphs = np.concatenate, job.graphs
        job.sweep = Sweep(job.a_rank, cat([g.t for g in graphs]), job.anchor, job.dep, job.lane, job.target, job.also_anchor,
                          job.also_op, job.mem_op, job.mem_group, cat([g.start for g in graphs]), cat([g.end for g in graphs]),
                          cat([g.g for g in graphs]), cat([g.l for g in graphs]), cat([g.fixed for g in graphs]),
                          cat([g.ret for g in graphs]), cat([g.dep_lag for g in graphs]), cat([g.pre_dur for g in graphs]))
    return job.sweep.replay(h, d, (job.target >= 0) & ~no_sync)


WHAT_IF_COLUMNS = COLUMNS

STEP_COLUMNS = ["rank", "cause", "step", "gain_ns"]
"""The what-ifs step by step (:func:`what_ifs`)."""


def what_ifs(graphs: list[RankGraph], per_rank: pd.DataFrame | None = None, min_ns: int = 0,
             only: set[int] | None = None, groups: Mapping[str, tuple[str, ...]] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The gain of removing each cause, one at a time (module docstring), in all and step by step; and of each of
    ``groups`` (a name: host classes of :data:`HOST_CLASSES`, sync aside) removed at once, on the ranks where the first
    of them holds more than ``min_ns``, in rows of that name after the ordered ones (they are not causes of their own:
    their time is their classes').

    Causes: each host class of :data:`HOST_CLASSES` (its host time set to zero), ``sync`` (the syncs wait for
    nothing), ``pageable_copy`` (copies from or to pageable memory take no time: pinned memory would let the host go
    on), per rank and, where two or more ranks hold it, on every rank at once (``rank`` -1: a cause every rank
    shares, such as a sync in the loop or a recompile, gives nothing back when removed from one rank alone); and,
    across ranks, ``imbalance``: a rank's device time per kernel name beyond the median of the other ranks' (not
    communication, not pageable copies); a cause removed on one rank also takes away the slowdown its waits caused
    the others' compute (:mod:`.contention`).

    Args:
        graphs: the ranks of one window (:func:`rank_graph` of each trace), in any order.
        per_rank: the window's matched collectives (:attr:`.collectives.WindowCollectives.per_rank`), None for one rank.
        min_ns: causes whose removed time is at most this are not replayed.
        only: the graphs (indices) whose causes are replayed one rank at a time (None: every graph); the causes on every
            rank at once are replayed all the same. Time removed from work off the critical path gives nothing back (the
            path keeps its length), so the ranks the window's critical path visits are enough: a job of thousands of
            ranks replays a few of them alone.

    Returns:
        DataFrame, largest gain first: ``rank`` (int64, -1 every rank), ``cause`` (str), ``top`` (str: the host op,
        sync call or kernel name holding most of it), ``removed_ns`` (int64: the time taken out, on all its ranks),
        ``gain_ns`` (int64: how much earlier the window's last work ends), ``per_step_ns`` (int64: ``gain_ns`` over
        the most steps n a rank of the window has, or ``gain_ns`` without steps; where n >= 2, at least the gain after
        the first step, ``gain_ns`` less how much earlier the first step's last work ends, over n - 1: a cause that
        delays the step after it, such as a sync at a step's end, gives nothing back in the window's first step; only
        where the first step held at least :data:`FIRST_STEP_SHARE` of an even split of the removed time, so the
        cause was there alike; not for ``imbalance``, whose excess is taken from the window as a whole),
        ``steps_with`` (int64: the steps
        whose own time the cause held, on the rank holding it most; -1 without steps), ``beyond`` (int64: for a row of
        every rank whose cause one rank holds most of, that rank: the row's gains are what removing it on every rank
        gives beyond removing it on that rank alone (:func:`_beyond_the_lead`); -1 otherwise). Ordered by ``per_step_ns``,
        the figure every view shows first (:func:`.what_if_order.ordered`).

        And its gain step by step: ``rank``, ``cause`` (as in the table), ``step`` (int64, the step's number, of the
        first rank with every step), ``gain_ns`` (int64: how much earlier the step's last work ends, on any rank, less
        how much earlier the step before it ends: the gains of the steps add up to the gain of the window's last step),
        one row per row of the table and step of the window; empty without steps. A step's work is its rank's host work
        up to the step's end and the device work launched in it (the ranks' steps taken by position).
    """
    if not graphs:
        return pd.DataFrame({c: pd.Series([], dtype=object if c in ("cause", "top") else np.int64) for c in WHAT_IF_COLUMNS}), \
            pd.DataFrame({c: pd.Series([], dtype=object if c == "cause" else np.int64) for c in STEP_COLUMNS})
    n_steps = max((len(g.steps) for g in graphs), default=0)
    graphs = [first_calls_merged(g, n_steps, max(min_ns, 0)) for g in graphs]
    job = _job(graphs, per_rank)
    h0 = np.concatenate([g.h for g in graphs])
    no_sync = np.zeros(h0.size, bool)
    t_all, end_all = np.concatenate([g.t for g in graphs]), np.concatenate([g.end for g in graphs])
    counted = measured_anchors(graphs)
    base = _finish(t_all, end_all, counted)  # (the replay is exact)
    fa, fk = first_step(graphs)
    ends_of = step_ends(graphs, job.a_rank, job.lane)
    base_steps = ends_of(t_all, end_all)
    floor = max(min_ns, 0)
    cls_all = np.concatenate([g.class_ns for g in graphs], axis=1)
    waits = [np.where(g.target >= 0, g.t - np.concatenate([g.t[:1], g.t[:-1]]) - g.h, 0) for g in graphs]
    freeing = [g.freeing for g in graphs]
    free_cls = np.concatenate(freeing)  # (device frees: their waits go with their host class, not the syncs')
    pageable = np.concatenate([g.pageable for g in graphs])
    rows: list[tuple] = []
    start0, end0 = np.concatenate([g.start for g in graphs]), np.concatenate([g.end for g in graphs])
    w = wait_spans(start0, end0, job.k_rank, job.mem_op, job.mem_group)
    code, names = kernel_codes(graphs)
    slow = slowdowns(start0, end0, job.d, code, job.k_rank, np.concatenate([g.comm for g in graphs]), w) if len(graphs) > 1 else {}
    charged = {i: charged_wait(start0, end0, w, job.mem_op, job.mem_group, i) for i in slow}  # (each rank's waits, as recorded)

    def add(ranks: list[int], cause: str, removed: list[int], top: str, h: np.ndarray, d: np.ndarray, drop: np.ndarray,
            held: list[int], first: int = 0) -> None:
        rank = graphs[ranks[0]].rank if len(ranks) == 1 else -1
        t, end, arrival = replay_arrivals(job, h, d, drop)
        if len(ranks) == 1 and ranks[0] in slow:  # the others' compute, slowed beside waits for this rank (.contention)
            share = 1 - charged_wait(arrival, end, w, job.mem_op, job.mem_group, ranks[0]) / max(charged[ranks[0]], 1)
            if share > 0:
                t, end = replay(job, h, np.maximum(d - (slow[ranks[0]] * min(share, 1.0)).astype(np.int64), 0), drop)
        earlier = np.where(base_steps > NEG, base_steps - ends_of(t, end), 0)  # (how much earlier each step's last work ends)
        rows.append((rank, cause, top, sum(removed), base - _finish(t, end, counted), max(held), int(earlier[0]) if earlier.size else 0,
                     first, {graphs[i].rank: n for i, n in zip(ranks, removed)}, np.diff(earlier, prepend=0)))

    sync = HOST_CLASSES.index("sync")
    for c, cause in enumerate(HOST_CLASSES):
        if c == sync:
            continue  # (told with the syncs' waits, below)
        held_ns = [g.class_ns[c] + np.where(f == c, w, 0) for g, f, w in zip(graphs, freeing, waits)]
        holding = [i for i, x in enumerate(held_ns) if x.sum() > floor]
        for ranks in _replays(holding, only):
            on = np.isin(job.a_rank, ranks)
            top = max(ranks, key=lambda i: held_ns[i].sum())
            drop = on & (free_cls == c) & (job.target >= 0)  # (a free's wait goes with it)
            add(ranks, cause, [int(held_ns[i].sum()) for i in ranks], graphs[top].class_top[c],
                h0 - np.where(on, cls_all[c], 0), job.d, drop, [steps_with(graphs[i], held_ns[i], floor) for i in ranks],
                sum(int(held_ns[i][fa[i]].sum()) for i in ranks))
    unseen = [before_the_work(g) for g in graphs]  # (syncs that waited for work launched before the trace: kept)
    waits = [np.where(f >= 0, 0, w) + np.where(u, 0, g.class_ns[sync]) for w, f, g, u in zip(waits, freeing, graphs, unseen)]
    sync_ns = cls_all[sync] * ~np.concatenate(unseen) if unseen else cls_all[sync]  # (a sync's wait and its host time)
    holding = [i for i, w in enumerate(waits) if w.sum() > floor]
    for ranks in _replays(holding, only):
        on = np.isin(job.a_rank, ranks)
        most = max(ranks, key=lambda i: waits[i].sum())
        add(ranks, "sync", [int(waits[i].sum()) for i in ranks], sync_top(graphs[most], waits[most]),
            h0 - np.where(on, sync_ns, 0), job.d, on & (job.target >= 0) & ~np.concatenate([g.blocking for g in graphs]) & (free_cls < 0),
            [steps_with(graphs[i], waits[i], floor) for i in ranks], sum(int(waits[i][fa[i]].sum()) for i in ranks))
    for name, classes in (groups or {}).items():  # (several host classes at once: what a CUDA graph of the step removes)
        idx = [HOST_CLASSES.index(c) for c in classes]
        held_ns = [g.class_ns[idx].sum(axis=0) for g in graphs]
        holding = [i for i, g in enumerate(graphs) if g.class_ns[idx[0]].sum() > floor]  # (where its first class alone counts)
        for ranks in _replays(holding, only):
            on = np.isin(job.a_rank, ranks)
            holder = graphs[max(ranks, key=lambda i: held_ns[i].sum())]
            most = max(idx, key=lambda k: int(holder.class_ns[k].sum()))
            add(ranks, name, [int(held_ns[i].sum()) for i in ranks], holder.class_top[most],
                h0 - np.where(on, cls_all[idx].sum(axis=0), 0), job.d, no_sync, [steps_with(graphs[i], held_ns[i], floor) for i in ranks],
                sum(int(held_ns[i][fa[i]].sum()) for i in ranks))
    copies = [int(g.d[g.pageable].sum()) for g in graphs]
    holding = [i for i, n in enumerate(copies) if n > floor]
    for ranks in _replays(holding, only):
        sel = pageable & np.isin(job.k_rank, ranks)
        add(ranks, "pageable_copy", [copies[i] for i in ranks], "Memcpy (pageable)", h0, np.where(sel, 0, job.d), no_sync, [-1],
            sum(int(graphs[i].d[graphs[i].pageable & fk[i]].sum()) for i in ranks))
    for i, g in enumerate(graphs):  # device causes (.what_if_kernels): kernels at their roofline, elementwise chains fused
        for cause, top, dur in g.device_causes if only is None or i in only else ():
            d = job.d.copy()
            d[job.k_rank == i] = np.minimum(dur, d[job.k_rank == i])
            if int((job.d - d).sum()) > floor:
                add([i], cause, [int((job.d - d).sum())], top, h0, d, no_sync, [-1])
    if len(graphs) > 1:
        s_code, s_names, segment = segment_codes(graphs, code, names, job.collective)
        for i, top, removed, d in excess_device_work(graphs, job.k_rank, job.d, floor, s_code, s_names, only, segment):
            add([i], "imbalance", [removed], top, h0, d, no_sync, [-1])
    out = pd.DataFrame([r[:-2] for r in rows], columns=["rank", "cause", "top", "removed_ns", "gain_ns", "steps_with", "first_ns",
                                                        "removed_first_ns"])
    out["_by"] = [r[-2] for r in rows]
    out["_steps"] = [r[-1] for r in rows]
    single = out[out["rank"] >= 0].groupby("cause")["gain_ns"].max()
    best = out["cause"].map(single).fillna(-1).to_numpy(np.float64)
    out = out[(out["rank"] >= 0).to_numpy() | (out["gain_ns"].to_numpy() > EVERY_RANK_FACTOR * best)]  # (one rank says it all)
    out["per_step_ns"] = out["gain_ns"] // max(n_steps, 1)
    if n_steps >= 2:  # (a cause that delays the step after it gives nothing back in the window's first step)
        first_held = np.asarray(out["removed_first_ns"], dtype=np.int64) * n_steps
        alike = (np.asarray(out["cause"]) != "imbalance") & (first_held >= FIRST_STEP_SHARE * np.asarray(out["removed_ns"], dtype=np.int64))
        after = np.where(alike, (out["gain_ns"] - out["first_ns"]) // (n_steps - 1), 0)
        out["per_step_ns"] = np.maximum(out["per_step_ns"], after)
    out = _beyond_the_lead(pd.DataFrame(out), set(groups or {}), floor)
    out["top"] = [str(x) for x in out["top"]]  # (numpy strings are no JSON)
    out = out.astype({"rank": np.int64, "removed_ns": np.int64, "gain_ns": np.int64, "per_step_ns": np.int64, "steps_with": np.int64,
                      "beyond": np.int64})
    labels = next((g.steps["step"].to_numpy(np.int64) for g in graphs if len(g.steps) == n_steps and n_steps), np.zeros(0, np.int64))
    gains = np.stack(out["_steps"].tolist()) if len(out) and n_steps else np.zeros((len(out), 0), np.int64)
    steps = pd.DataFrame({"rank": np.repeat(out["rank"].to_numpy(np.int64), labels.size),
                          "cause": np.repeat(out["cause"].to_numpy(dtype=object), labels.size),
                          "step": np.tile(labels, len(out)), "gain_ns": gains.reshape(-1).astype(np.int64)}, columns=STEP_COLUMNS)
    group = out["cause"].isin(list(groups or {})).to_numpy()
    table = ordered(pd.DataFrame(out[~group]), graphs, max(min_ns, 0))
    if group.any():
        table = pd.DataFrame(pd.concat([table, pd.DataFrame(out[group]).sort_values("gain_ns", ascending=False, kind="stable")[COLUMNS]],
                                       ignore_index=True))
    return table, steps


def _beyond_the_lead(out: pd.DataFrame, groups: set[str], floor: int) -> pd.DataFrame:
    """``out`` with each every-rank row (``rank`` -1) whose cause one rank holds most of (:data:`LEAD_SHARE` of the
    time removed, and :data:`LEAD_FACTOR` times the median of the other ranks holding it) told as what it adds beyond
    that rank's own row: its gains less that row's, ``beyond`` that rank; dropped where it adds at most the noise floor
    (``floor``, in the window). The others wait for that rank: its own row is the finding, the every-rank row the rest."""
    out = out.assign(beyond=-1)
    drop = []
    for idx in out.index[(out["rank"] < 0).to_numpy() & ~out["cause"].isin([*groups, "imbalance"]).to_numpy()]:
        by: dict = out.at[idx, "_by"]
        lead = max(by, key=lambda r: by[r])
        others = [n for r, n in by.items() if r != lead]
        if not others or by[lead] < LEAD_SHARE * sum(by.values()) or by[lead] < LEAD_FACTOR * float(np.median(others)):
            continue
        own = out[(out["rank"] == lead).to_numpy() & (out["cause"] == out.at[idx, "cause"]).to_numpy()]
        if own.empty:
            continue
        o = own.index[0]
        for col in ("gain_ns", "per_step_ns"):
            out.at[idx, col] = max(int(out.at[idx, col]) - int(out.at[o, col]), 0)
        out.at[idx, "_steps"] = out.at[idx, "_steps"] - out.at[o, "_steps"]
        out.at[idx, "beyond"] = lead
        if int(out.at[idx, "gain_ns"]) <= floor:
            drop.append(idx)
    return pd.DataFrame(out.drop(index=drop))


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


def before_the_work(g: RankGraph) -> np.ndarray:
    """Per anchor of ``g``: a sync call (host time of class ``sync``) that waited for no device work of the trace and
    returned before the rank's first device work began: it waited for work launched before the trace began (a warm-up's
    or capture's queue, the profiler started mid-run), which the trace does not show. Its time is not the loop's sync:
    removing it gives nothing the trace can show (the ``sync`` what-if keeps it)."""
    if g.start.size == 0:
        return np.zeros(g.t.size, bool)
    return (g.class_ns[HOST_CLASSES.index("sync")] > 0) & (g.target < 0) & (g.t <= g.start.min())


PROGRAM_WORK = ("graph_capture", "compile", "data_loading", "optimizer", "dispatch", "cpu_op")
"""Host classes that are the program's own work (ops, launches, loading, compiling): an anchor after such time ends
measured work (:func:`measured_anchors`); syncs, allocator calls and time outside ops after the last of them do not."""


def measured_anchors(graphs: list[RankGraph]) -> np.ndarray:
    """Per anchor of the window (the ranks' anchors concatenated): whether its time can end the measured work. Where its
    rank ran device work, every anchor up to its last step boundary, sync that waited (it returned when its work ended)
    or anchor after the program's own work (:data:`PROGRAM_WORK`: CPU ops, launches, loading): the host's time after that,
    past the rank's last device work and step, is the window's tail (the program's own code after what it measured: a
    benchmark's report, a shutdown), not a loss of the measured work, and its removal gives nothing back. A rank without
    device work: every anchor."""
    out = []
    for g in graphs:
        if g.start.size == 0:
            out.append(np.ones(g.t.size, bool))
            continue
        bounds = np.concatenate([g.steps["start_ns"].to_numpy(np.int64), g.steps["end_ns"].to_numpy(np.int64)]) if len(g.steps) else np.zeros(0, np.int64)
        tgt = np.maximum(g.target, 0)
        waited = (g.target >= 0) & (g.end[tgt] + g.ret >= g.t)  # (a sync that returned when its work ended)
        worked = g.class_ns[[HOST_CLASSES.index(c) for c in PROGRAM_WORK]].sum(axis=0) > 0  # (the program's work before it)
        last = int(np.flatnonzero(worked | waited | np.isin(g.t, bounds)).max(initial=-1))
        out.append(np.arange(g.t.size) <= last)
    return np.concatenate(out) if out else np.zeros(0, bool)
