"""The critical path of a window: the chain of work that ended last, walked back through the job's dependency graph.

Definitions (quoted by docs/measures.md). From the window's last work (the latest device op end or host anchor on any
rank that ends the measured work, :func:`.what_if_steps.measured_anchors`: not the host's tail after its last device work and
step), each step back follows the edge that bound the work in the trace:

- a device op: its own time is on the path (``compute``, ``copy`` for memcpys and memsets, ``comm`` for
  communication kernels); a run of ops each bound by the previous one on its stream is taken at once, the gaps
  between them included (``compute``: the device's own few-µs gaps between queued kernels are no dependency);
- a collective that ended on its members after its last arrival: its transfer (``comm``), and the path crosses
  into the rank that arrived last, at its kernel's start (a *crossing*: the wait of the others is not on the path);
- an op bound by its launch: the launch latency (``launch``: from the call's end to the op's start, at most
  :data:`..host.idle_causes.LAUNCH_LATENCY_NS`; the rest, ``queued``: the op waited for something the trace does not
  show, as the idle causes name that time), then the host
  up to the call's end (the call's own time by its host class, as :mod:`..host.idle_causes` gives it: ``dispatch``,
  or ``warmup`` for a first call's launch that loads code);
- an op bound by another stream's work: the gap (``dependency``), then that work;
- the host: back to the last sync that returned when its device work ended (``sync``: that work's end to the
  call's return, then that work; for a device free, :data:`..host.host_classes.FREE_CALLS`, its host class), its time by
  host class (:data:`.dependency_graph.HOST_CLASSES`);
- work with no binding edge in the trace (its first op, launched before the trace) ends the walk.

The path's segments cover the window from the first segment's start to its end without overlap, on the ranks the
path crossed. HTA's ``critical_path_analysis`` finds the same kind of path on one rank (networkx, per event); this
one crosses ranks at collectives and takes each run of a chain at once. What its causes give back is not their time
on the path (other paths take over): that is :mod:`.what_if`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..host.idle_causes import LAUNCH_LATENCY_NS, QUEUED_LABEL
from ..memo import empty_frame
from .contention import last_arrivals
from .dependency_graph import HOST_CLASSES, RankGraph
from .device_chains import BIND_DEPENDENCY, BIND_LAUNCH, BIND_STREAM, DEPENDENCY_SLACK_NS
from .sweep import joined
from .what_if import WindowJob, counted_anchors, window_job

COLUMNS = ["rank", "lane", "cause", "name", "start_ns", "end_ns", "ns", "step"]
GAPS = "(gaps between queued work)"
UNSHOWN = "(a wait the trace does not show)"
"""The name of a path segment that waited for something the trace does not show (a ``dependency`` gap on a stream
without an edge, a ``queued`` start after a launch)."""
PATH_LABELS = {"queued": QUEUED_LABEL}
"""Short names of the path's causes that are no what-if cause's (:data:`.what_if_advice.LABELS`) and read otherwise."""


_DEVICE_CAUSES = ("compute", "copy", "comm")


def _copy_names(g: RankGraph) -> np.ndarray:
    """Per kernel name of ``g`` (code), whether it is a memcpy or memset."""
    return np.fromiter((n.startswith(("Memcpy", "Memset")) for n in g.names), bool, len(g.names))


def _run_cause(g: RankGraph, copy_names: np.ndarray, lo: int, hi: int) -> tuple[str, int]:
    """The cause of a run of ops ``lo..hi`` (inclusive) of ``g`` on one stream, the one holding most of its time
    (``comm`` for communication kernels, ``copy`` for memcpys and memsets, :func:`_copy_names`, else ``compute``), and
    the kernel name (code) of that cause holding most of it."""
    names = g.name[lo:hi + 1]
    kind = np.where(g.comm[lo:hi + 1], 2, np.where(copy_names[names], 1, 0))
    d = g.d[lo:hi + 1].astype(np.float64)
    c = int(np.argmax(np.bincount(kind, weights=d, minlength=3)))
    held = np.bincount(names[kind == c], weights=d[kind == c])
    return _DEVICE_CAUSES[c], int(np.argmax(held)) if held.size else int(g.name[hi])


def critical_path(graphs: list[RankGraph], per_rank: pd.DataFrame | None = None, job: WindowJob | None = None) -> pd.DataFrame:
    """The window's critical path (module docstring), last segment first.

    Args:
        graphs: the ranks of one window (:func:`.dependency_graph.rank_graph` of each trace).
        per_rank: the window's matched collectives (:attr:`.collectives.WindowCollectives.per_rank`), None for one rank.
        job: ``graphs`` and ``per_rank`` joined (:func:`.what_if.window_job`), where the caller has it (read, never
            written: the what-ifs read it after); None: joined here.

    Returns:
        DataFrame: ``rank`` (int64), ``lane`` (str: ``host`` or the device chain, ``cuda:0 stream 7``), ``cause`` (str: a host class, ``sync``, ``launch``, ``queued``, ``dependency``, ``compute``, ``copy``, ``comm``),
        ``name`` (str: the kernel, or the host op holding most of a class), ``start_ns``, ``end_ns`` (int64: the
        segment), ``ns`` (int64: its time; a host stretch gives one row per class, each with the stretch's bounds),
        ``step`` (int64: the step of its rank, ``ProfilerStep#N``, whose host interval holds the segment's end; -1
        outside its rank's steps or without steps).
    """
    rows: list[tuple] = []
    if not graphs or all(g.t.size == 0 and g.start.size == 0 for g in graphs):
        return empty_frame({c: object if c in ("lane", "cause", "name") else np.int64 for c in COLUMNS})
    job = job if job is not None else window_job(graphs, per_rank)
    k_off = np.cumsum([0] + [g.start.size for g in graphs])
    copies = [_copy_names(g) for g in graphs]
    starts = joined([g.start for g in graphs])  # (read, never written: the packed graphs' own, .packed)
    ends = joined([g.end for g in graphs])
    # per instance, the op that arrived last; an op is bound by the latest of its instances' last arrivals
    peer = np.full(starts.size, -1, np.int64)
    if job.mem_op.size:
        cand = last_arrivals(starts, job.mem_op, job.mem_group)[job.mem_group]
        o = np.lexsort((starts[cand], job.mem_op))
        peer[job.mem_op[o]] = cand[o]  # (per op, the latest candidate is written last)
    peer = np.where(peer == np.arange(peer.size), -1, peer)
    bind = np.concatenate([g.bind for g in graphs])
    breaker = (bind != BIND_STREAM) | job.first | (peer >= 0)
    run_start = np.maximum.accumulate(np.where(breaker, np.arange(bind.size), -1)) if bind.size else bind
    a_off = np.cumsum([0] + [g.t.size for g in graphs])
    t_all = joined([g.t for g in graphs])
    h_all = joined([g.h for g in graphs])
    prev_t = np.concatenate([t_all[:1], t_all[:-1]])  # (each anchor's previous of its rank; a rank's first: itself)
    firsts = a_off[:-1][a_off[:-1] < t_all.size]
    prev_t[firsts] = t_all[firsts]
    target = job.target
    binding_sync = (target >= 0) & (t_all > prev_t + h_all)
    sync_idx = np.flatnonzero(binding_sync)
    frees = np.concatenate([g.freeing for g in graphs])
    d_cum = np.cumsum(np.concatenate([g.d for g in graphs]))

    def host(i: int, x: int, issued: bool = False) -> tuple[str, int] | None:
        """Host stretch back from anchor ``i`` at time ``x`` (``issued``: where the host reached its call, before any wait of its
        own); returns the next state."""
        r = int(job.a_rank[i])
        g, lo = graphs[r], int(a_off[r])
        p = int(np.searchsorted(sync_idx, i - 1 if issued else i, "right") - 1)
        j = int(sync_idx[p]) if p >= 0 and sync_idx[p] >= lo else lo
        if j == i and binding_sync[i]:  # (a sync that returned when its work ended)
            tg = int(target[i])
            lo_t = min(int(ends[tg]), int(t_all[i]))  # (a pageable copy's call may return before its copy ends)
            cause = HOST_CLASSES[int(frees[i])] if frees[i] >= 0 else "sync"  # (a device free's wait is its class's)
            rows.append((g.rank, "host", cause, g.class_top[HOST_CLASSES.index(cause)], lo_t, int(t_all[i]), int(t_all[i]) - lo_t))
            return ("dev", tg)
        # (a launch call's own time by its class, as the idle causes give it: the classes' time after j up to i, summed
        # where walked, not a running sum of every anchor's classes held for the window)
        per = g.class_ns.over(j - lo + (j > lo or bool(binding_sync[j])), i - lo + 1)
        begin = int(t_all[j])
        for c in np.flatnonzero(per > 0).tolist():
            rows.append((g.rank, "host", HOST_CLASSES[c], g.class_top[c], begin, x, int(per[c])))
        return ("host", j) if binding_sync[j] and j != i else None

    state: tuple[str, int] | None
    k_last = int(np.argmax(ends)) if ends.size else -1
    counted = counted_anchors(job)  # (host time after the last device work and step is the window's tail: not walked)
    i_last = int(np.flatnonzero(counted)[np.argmax(t_all[counted])]) if counted.any() else -1
    state = ("dev", k_last) if k_last >= 0 and (i_last < 0 or ends[k_last] >= t_all[i_last]) else ("host", i_last)
    seen = 0
    while state is not None and seen <= 4 * (bind.size + t_all.size):
        seen += 1
        kind, n = state
        if kind == "host":
            state = host(n, int(t_all[n]))
            continue
        r = int(job.k_rank[n])
        g, lk = graphs[r], n - int(k_off[r])
        if kind == "dev" and peer[n] >= 0:  # a collective's transfer, then the rank that arrived last
            rows.append((g.rank, g.lane_names[g.lane[lk]], "comm", g.names[g.name[lk]], int(starts[peer[n]]), int(ends[n]),
                         int(ends[n] - starts[peer[n]])))
            state = ("pre", int(peer[n]))
            continue
        if kind == "dev":
            s = int(run_start[n])
            first = s + 1 if peer[s] >= 0 and s != n else s  # (a collective bound by another rank is taken alone)
            busy = int(d_cum[n] - (d_cum[first - 1] if first > 0 else 0))
            lo = int(ends[s]) if first != s else int(starts[s])
            lf = first - int(k_off[r])  # (the run is named by the cause, and its kernel, holding most of its time)
            cause, top = _run_cause(g, copies[r], lf, lk) if lk >= lf else ("compute", int(g.name[lk]))
            rows.append((g.rank, g.lane_names[g.lane[lk]], cause, g.names[top], lo, int(ends[n]), busy))
            if int(ends[n]) - lo > busy:  # the device's own gaps inside the run
                rows.append((g.rank, g.lane_names[g.lane[lk]], "compute", GAPS, lo, int(ends[n]), int(ends[n]) - lo - busy))
            state = ("dev", s) if first != s else ("pre", s)
            continue
        b = int(bind[n])
        if b == BIND_STREAM and lk > 0:
            gap = int(starts[n] - ends[n - 1])
            if gap > 0:
                rows.append((g.rank, g.lane_names[g.lane[lk]], "compute" if gap <= DEPENDENCY_SLACK_NS else "dependency",
                             GAPS if gap <= DEPENDENCY_SLACK_NS else UNSHOWN, int(ends[n - 1]), int(starts[n]), gap))
            state = ("dev", n - 1)
        elif b == BIND_LAUNCH and job.anchor[n] >= 0:
            a = int(job.anchor[n])
            reached = int(prev_t[a] + h_all[a])  # (the launch call's end, or a sync's start of its wait)
            if a == int(a_off[r]):  # (a rank's first call holds no host time before it: its own time is the launch's)
                reached = int(t_all[a] - g.pre_dur[0])
            lo, at = min(reached, int(starts[n])), int(starts[n])
            cut = min(lo + LAUNCH_LATENCY_NS, at)  # (later than the launch latency after its call: queued for a wait not shown)
            if at > cut:
                rows.append((g.rank, g.lane_names[g.lane[lk]], "queued", UNSHOWN, cut, at, at - cut))
            rows.append((g.rank, "host", "launch", "", lo, cut, cut - lo))
            state = host(a, reached, issued=True)
        elif b == BIND_DEPENDENCY and job.dep[n] >= 0:
            dep = int(job.dep[n])
            rows.append((g.rank, g.lane_names[g.lane[lk]], "dependency", g.names[g.name[dep - int(k_off[r])]], int(ends[dep]), int(starts[n]),
                         int(starts[n] - ends[dep])))
            state = ("dev", dep)
        else:
            state = None
    out = pd.DataFrame(rows, columns=COLUMNS[:-1])
    out["name"] = [str(x) for x in out["name"]]  # (numpy strings are no JSON)
    out = out.astype({"rank": np.int64, "start_ns": np.int64, "end_ns": np.int64, "ns": np.int64})
    out["step"] = _steps_of(graphs, out)
    return out


def _steps_of(graphs: list[RankGraph], path: pd.DataFrame) -> np.ndarray:
    """Per segment of ``path``: the step of its rank whose host interval [start, end] holds the segment's end, -1 where
    none (int64)."""
    step = np.full(len(path), -1, np.int64)
    rank, end = path["rank"].to_numpy(np.int64), path["end_ns"].to_numpy(np.int64)
    order = np.argsort(rank, kind="stable")  # (each rank's segments found once: not a pass over the path per rank)
    ranks, first, count = np.unique(rank[order], return_index=True, return_counts=True)
    rows = {int(r): order[f:f + c] for r, f, c in zip(ranks.tolist(), first.tolist(), count.tolist())}
    for g in graphs:  # (a later graph of the same rank overrides, as it did)
        if (sel := rows.get(g.rank)) is None:
            continue
        lo, hi = g.step_bounds
        if not lo.size:
            continue
        o = np.argsort(lo, kind="stable")
        i = np.searchsorted(lo[o], end[sel], "right") - 1
        ok = (i >= 0) & (end[sel] <= hi[o][np.maximum(i, 0)])
        step[sel[ok]] = g.steps["step"].to_numpy(np.int64)[o][i[ok]]
    return step


SHARE_COLUMNS = ["rank", "lane", "cause", "name", "ns", "share"]


def path_shares(path: pd.DataFrame) -> pd.DataFrame:
    """Where a critical path ran: its time per (rank, lane, cause), largest first.

    Args:
        path: :func:`critical_path`'s segments.

    Returns:
        DataFrame: ``rank`` (int64), ``lane``, ``cause`` (str, as in :func:`critical_path`), ``name`` (str: the kernel
        or host op of the most time in that part, :data:`GAPS` left out where another name holds time), ``ns``
        (int64: the part's time on the path), ``share`` (float64: ``ns`` over the whole path's time).
    """
    if path.empty:
        return empty_frame({c: object if c in ("lane", "cause", "name") else np.int64 for c in SHARE_COLUMNS})
    keys = ["rank", "lane", "cause"]
    by = pd.DataFrame(path.groupby(keys, sort=False, as_index=False)["ns"].sum())
    named = pd.DataFrame(path[(path["name"] != GAPS).to_numpy()])
    top = pd.DataFrame(named.groupby([*keys, "name"], sort=False, as_index=False)["ns"].sum())
    top = top.sort_values("ns", ascending=False, kind="stable").drop_duplicates(keys)
    out = by.merge(top[[*keys, "name"]], on=keys, how="left")
    out["name"] = out["name"].fillna("").astype(str)
    out["share"] = out["ns"] / max(int(path["ns"].sum()), 1)
    return pd.DataFrame(out.sort_values("ns", ascending=False, kind="stable").reset_index(drop=True)[SHARE_COLUMNS])
