"""The replay of the job's dependency graph as one sweep in a topological order (Daydream's replay, Zhu et al., USENIX
ATC 2020; Lumos's): every node's replayed time from its predecessors', each node visited once.

The graph (:mod:`.dependency_graph`, :mod:`.what_if`) has four kinds of node:

- *anchor* ``i`` (a host chain's call): ``t_i = max(t_{i-1} + h_i, x_i)``, the first of its rank ``t_i = x_i``;
  ``x_i`` is the latest of its rank's first recorded time (first anchor only), its sync edge ``end[target_i] + ret_i``
  and a device-wide sync's other edges ``end[also_op] + ret_i``.
- *arrival* of device op ``k`` (when it could start before any cross-rank instance holds it):
  ``own_k = max(issue(anchor_k) + l_k, end[dep_k] + dep_lag_k | fixed_k)`` where ``issue(a)`` is the launching call's
  start, ``t_{a-1} + h_a - pre_dur_a`` (``t_a - pre_dur_a`` for the first anchor of a rank); ``arrival_k =
  max(end_{k-1} + g_k, own_k)`` after the previous op of its stream, else ``own_k``.
- *instance* ``c`` (a collective or point-to-point transfer matched across ranks): the latest arrival of its members.
- *end* of device op ``k``: ``end_k = max(arrival_k, last_c) + d_k`` (``last_c`` the latest of the instances ``k`` is a
  member of): each chain's running maximum (``P_k + max_{j<=k}(E_j + d_j - P_j)``, ``P`` the running sum of its lags and
  durations, :mod:`.what_if`), one node at a time, to the ns.

Edges go from each term's node to the node it defines. Terms that cannot bind (an op without a launch call: its launch
term is minus infinity) have no edge. The graph's nodes are put in a topological order once per window (Kahn's
algorithm: a node comes after all of its predecessors; of the nodes ready at once, the one made ready last goes first,
so the order follows one chain as far as it can; the first ready are taken in node order: anchors by rank and time,
then arrivals, ends and instances by index), and each replay visits them in that order once: O(nodes +
edges). A graph with a cycle (possible only where the trace's clocks disagree, e.g. a sync whose work was launched
by a later call) keeps the nodes of the cycle and all after them at the end of the order, and the sweep repeats over
them until nothing changes, starting from the recorded times: that is the greatest solution at or below the trace's
times, as the round-based fixed point found.

Compiled with numba: ahead of time, at install, where it could be (:mod:`.sweep_aot`), else on a process's first call
(cached on disk).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import numpy as np

NEG = -(2**60)
"""Minus infinity for int64 times: no edge (the graph's, :mod:`.device_chains`, and the replay's)."""

MAX_SWEEPS = 2_000
"""Sweeps over the cyclic part of a graph (never reached on a graph without cycles) before the replay stops."""

_kernels = None


def _compiled():
    """The kernels: those built ahead of time at install where they are (:mod:`.sweep_aot`), else numba's, compiled on
    first use (and cached on disk). numba is imported only where a replay runs a JIT kernel."""
    global _kernels
    if _kernels is None:
        _kernels = _built() or _jit()
    return _kernels


@functools.cache
def _built():
    """The kernels built ahead of time (:func:`.sweep_aot.kernels`), or None: looked for once a process."""
    from . import sweep_aot

    return sweep_aot.kernels(_jit)


def _jit():
    """The JIT kernels' module (numba's import, on first call)."""
    from . import _sweep_kernels

    return _sweep_kernels


def ahead_of_time() -> bool:
    """Whether the replay's kernels were built ahead of time (:mod:`.sweep_aot`): a replay then costs this process no
    one-time compile or import (:func:`warm` has nothing to do). Where they were not, numba is not imported here: that
    is :func:`warm`'s, or the first replay's."""
    return _built() is not None


def warm() -> None:
    """Pay this process's one-time cost of the replay now, where the kernels were not built ahead of time
    (:func:`ahead_of_time`): numba's import, its CPU target (which imports its whole registry of implementations,
    SciPy's linear algebra among them) and the kernels read from numba's disk cache, about 0.45 s of CPU where SciPy
    is installed (0.3 where not) measured on the 2-CPU benchmark machine, against a few ms for every sweep of a
    216k-event trace after it. For a thread of a process whose worker processes are reading the traces meanwhile
    (:func:`traceprobe.collect.analyze_paths`): the replay after them then starts at once. Any error is left to the
    replay itself to raise where it runs, with its own context."""
    try:
        k = _compiled()
        one = np.zeros(1, np.int32)
        k.counts_into(one, one.copy())  # (the target and the cache's first kernel: nearly all of the cost)
        k.topological_order(np.array([0, 0], np.int32), np.zeros(0, np.int32), one.copy())
    except Exception:  # noqa: BLE001 - the replay raises it where it runs
        pass


def _csr(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Compressed rows of the edges ``src -> dst`` by ``src``: ``(offsets (n + 1,), targets)``, both of
    :func:`index_type` (int32 where the edges and nodes allow, int64 else; targets as ``dst``'s values)."""
    off = np.zeros(n + 1, index_type(max(n, src.size)))
    _compiled().counts_into(src, off[1:])
    np.cumsum(off, out=off)
    succ = np.empty(src.size, index_type(max(n, src.size, int(dst.max(initial=0)) + 1)))
    _compiled().csr_fill(src, dst, off, succ)  # (rows in the edges' order, as a stable sort by src gives them)
    return off, succ


def _csr_of(edges: Callable[[], Iterator[tuple[int, int, np.ndarray, np.ndarray]]], n: int, ix: type, most: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_csr` of the edges ``edges()`` yields, kind by kind (``(lo, hi, src, dst)``: node ids below ``n`` of dtype
    ``ix``, every source in ``lo .. hi - 1``, a block of nodes; ``most``: at least their number, for the rows' dtype),
    without holding them all: each kind is made twice (its rows' lengths counted, then its targets written, the kinds of
    a block joined, up to about ``n / 4`` edges, each write passing over its block's rows only), so that only those
    kinds' arrays are alive beside the rows (a window's edges, two arrays of 4 bytes an edge, were joined before: 0.2 GB
    of the 1,024-rank job's peak). The same rows, each in the edges' order (kind by kind, as the joined edges gave them:
    a row's edges all come from kinds of its block, written in their order)."""
    off = np.zeros(n + 1, index_type(max(n, most)))
    for _, _, src, _ in edges():
        _compiled().counts_into(src.astype(ix, copy=False), off[1:])
    np.cumsum(off, out=off)
    succ = np.empty(int(off[-1]), off.dtype)
    at = off.copy()  # (where each row's next target goes)
    held: dict[tuple[int, int], list[tuple[np.ndarray, np.ndarray]]] = {}

    def write(lo: int, hi: int) -> None:
        parts = held.pop((lo, hi))
        src = np.concatenate([x for x, _ in parts]).astype(ix, copy=False) - ix(lo)  # (rows of the block: lo is row 0)
        dst = np.concatenate([y for _, y in parts]).astype(ix, copy=False)
        del parts
        _compiled().csr_fill(src, dst, at[lo:hi + 1], succ)  # (writes from ``at``, which it does not move ...)
        _compiled().counts_into(src, at[lo:hi])  # (... moved here past the targets written)

    for lo, hi, src, dst in edges():
        held.setdefault((lo, hi), []).append((src, dst))
        if sum(x.size for x, _ in held[(lo, hi)]) >= max(n // 4, 1 << 20):
            write(lo, hi)
    for block in list(held):
        write(*block)
    return off, succ


def _int64(x: np.ndarray) -> np.ndarray:
    """``x`` as int64: itself where it is already (no copy), else a copy."""
    return np.asarray(x, dtype=np.int64)


INT32_MAX = 2**31 - 1
"""The largest int32: indices, and values held as int32, up to it (:func:`index_type`, :class:`.class_times.ClassTimes`, :class:`.dependency_graph.RankGraph`)."""


def index_type(n: int) -> type:
    """The dtype of indices below ``n`` (node ids, edge offsets): int32 where ``n`` allows (4 bytes an index, half of
    int64's: the replay's graph is mostly indices), else int64."""
    return np.int32 if n <= INT32_MAX else np.int64


def fits_int32(x: np.ndarray) -> bool:
    """Whether every value of ``x`` (integers) lies within +-:data:`INT32_MAX` (an empty array: yes)."""
    return x.size == 0 or (int(x.min()) >= -INT32_MAX and int(x.max()) <= INT32_MAX)


def _check(a: int, k: int, **arrays: tuple[np.ndarray, tuple[int, int] | None]) -> None:
    """Raise ValueError unless each array has one entry per anchor (``a``) or op (``k``), by its name, and its values lie
    in its range where given: the compiled sweep reads them unchecked."""
    per_anchor = {"a_rank", "target", "ret", "pre_dur"}
    for name, (x, bounds) in arrays.items():
        if x.ndim != 1 or x.size != (a if name in per_anchor else k):
            raise ValueError(f"dependency graph: {name} has {x.size} entries, not {a if name in per_anchor else k}")
        if bounds is not None and x.size and (int(x.min()) < bounds[0] or int(x.max()) >= bounds[1]):
            raise ValueError(f"dependency graph: {name} out of range")


def joined(parts: list[np.ndarray]) -> np.ndarray:
    """``np.concatenate(parts)`` (1-D arrays), or without a copy the one array they are consecutive views of, where they
    cover it (:func:`.packed.pack`'s): read it, never write to it (the graphs hold it)."""
    base = parts[0].base if parts else None
    if isinstance(base, np.ndarray) and base.ndim == 1 and base.flags.c_contiguous and all(p.base is base and p.ndim == 1 for p in parts):
        size = base.dtype.itemsize
        at = np.array([p.__array_interface__["data"][0] for p in parts], np.int64) - base.__array_interface__["data"][0]
        lengths = np.array([p.size for p in parts], np.int64)
        if all(p.dtype == base.dtype and p.flags.c_contiguous for p in parts) and int(lengths.sum()) == base.size \
                and np.array_equal(at, np.concatenate([[0], np.cumsum(lengths)[:-1]]) * size):
            return base
    return np.concatenate(parts)


class Sweep:
    """One window's graph in topological order (module docstring); :meth:`replay` replays it.

    Args:
        a_rank: (A,) each anchor's rank index (sorted). ``t0``: (A,) the anchors' recorded times.
        anchor: (K,) each op's launching anchor (-1 none). ``dep``: (K,) the op it waited for (-1 none).
        lane: (K,) each op's device chain (sorted). ``target``: (A,) each sync anchor's op (-1 none).
        also_anchor, also_op: (E,) a device-wide sync's other edges. ``mem_op``, ``mem_group``: (M,) memberships of
        ops in cross-rank instances.
        start, end: (K,) the ops' recorded times (the start point of a cyclic part's repeated sweeps).
        g_lag, l_lag, fixed, dep_lag: (K,), ret, pre_dur: (A,): the lags of the edges, as in
        :class:`.dependency_graph.RankGraph` (``g``, ``l``, ...).
    """

    def __init__(self, a_rank: np.ndarray, t0: np.ndarray, anchor: np.ndarray, dep: np.ndarray, lane: np.ndarray,
                 target: np.ndarray, also_anchor: np.ndarray, also_op: np.ndarray, mem_op: np.ndarray, mem_group: np.ndarray,
                 start: np.ndarray, end: np.ndarray, g_lag: np.ndarray, l_lag: np.ndarray, fixed: np.ndarray, ret: np.ndarray,
                 dep_lag: np.ndarray, pre_dur: np.ndarray) -> None:
        a, k = t0.size, lane.size
        _check(a, k, a_rank=(a_rank, None), anchor=(anchor, (-1, a)), dep=(dep, (-1, k)), lane=(lane, None),
               target=(target, (-1, k)), start=(start, None), end=(end, None), g_lag=(g_lag, None), l_lag=(l_lag, None),
               fixed=(fixed, None), ret=(ret, None), dep_lag=(dep_lag, None), pre_dur=(pre_dur, None))
        for name, x, hi in (("also_anchor", also_anchor, a), ("also_op", also_op, k), ("mem_op", mem_op, k)):
            if x.size and (int(x.min()) < 0 or int(x.max()) >= hi):
                raise ValueError(f"dependency graph: {name} out of range")
        if also_anchor.size != also_op.size or mem_op.size != mem_group.size or (mem_group.size and int(mem_group.min()) < 0):
            raise ValueError("dependency graph: edge lists of different lengths")
        self.n_anchors, self.n_ops = a, k
        self.n_groups = int(mem_group.max(initial=-1)) + 1
        self.first_a = np.ones(a, bool)
        self.first_a[1:] = a_rank[1:] != a_rank[:-1]
        self.first_k = np.ones(k, bool)
        self.first_k[1:] = lane[1:] != lane[:-1]
        i64 = _int64  # (the arrays as given where they are int64 already: no copy; none is written to)
        self.t0, self.start0, self.end0 = i64(t0), i64(start), i64(end)
        self.g_lag, self.l_lag, self.fixed = i64(g_lag), i64(l_lag), i64(fixed)
        self.ret, self.dep_lag, self.pre_dur = i64(ret), i64(dep_lag), i64(pre_dur)
        n = a + 2 * k + self.n_groups
        ix = index_type(n + 1)  # (node ids, and the indices of anchors, ops and instances: int32 where they fit)
        self.anchor, self.dep, self.target = (x.astype(ix, copy=False) for x in (anchor, dep, target))
        also_anchor, also_op, mem_op, mem_group = (x.astype(ix, copy=False) for x in (also_anchor, also_op, mem_op, mem_group))
        self.also_off, self.also_op = _csr(also_anchor, also_op, a)  # (a sync's other edges, by anchor)
        self.grp_off, self.grp_of_op = _csr(mem_op, mem_group, k)  # (an op's instances)
        self.mem_off, self.mem_of_grp = _csr(mem_group, mem_op, self.n_groups)  # (an instance's members)
        # nodes: anchors [0, a), arrivals [a, a + k), ends [a + k, a + 2k), instances [a + 2k, n)
        ar, en, gr = a, a + k, a + 2 * k

        def edges() -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:  # (each kind's block, sources, targets)
            ks, ai = np.arange(k, dtype=ix), np.arange(a, dtype=ix)
            has_a = self.anchor >= 0
            # a rank's first anchor keeps its recorded time (x_i holds it; its sync edges give at most that: the replay
            # removes time, it never adds): it needs no edge, and its own launches are no cycle through it
            sync_in = (self.target >= 0) & ~self.first_a
            also_in = ~self.first_a[also_anchor] if also_anchor.size else np.zeros(0, bool)
            issuer = np.where(self.first_a[np.maximum(self.anchor, 0)], self.anchor, self.anchor - 1) if a else self.anchor  # (issue reads t_{a-1})
            yield 0, a, ai[~self.first_a] - 1, ai[~self.first_a]                              # host chain
            yield en, gr, en + self.target[sync_in], ai[sync_in]                               # sync
            yield en, gr, en + also_op[also_in], also_anchor[also_in]                          # device-wide sync's others
            yield 0, a, issuer[has_a], ar + ks[has_a]                                         # launch
            yield en, gr, en + self.dep[self.dep >= 0], ar + ks[self.dep >= 0]                  # dependency (event wait)
            yield en, gr, en + ks[~self.first_k] - 1, ar + ks[~self.first_k]                   # stream order
            yield ar, en, ar + ks, en + ks                                                      # an op's end after its arrival
            yield ar, en, ar + mem_op, gr + mem_group                                           # an instance after its members ...
            yield gr, n, gr + mem_group, en + mem_op                                           # ... and their ends after it

        off, succ = _csr_of(edges, n, ix, 2 * a + 4 * k + also_anchor.size + 2 * mem_op.size)  # (at most one edge of a kind a node)
        indegree = np.zeros(n, index_type(succ.size + 1))
        _compiled().counts_into(succ, indegree)  # (every edge's target is in one row)
        self.order, self.n_acyclic = _compiled().topological_order(off, succ, indegree)
        del off, succ, indegree
        rest = self.order[self.n_acyclic:]  # (a cyclic part: anchors, arrivals, instances, then ends, each read fresh)
        kind = np.select([rest < ar, rest < en, rest < gr], [0, 1, 3], 2)
        self.order[self.n_acyclic:] = rest[np.lexsort((rest, kind))]

    def replay(self, h: np.ndarray, d: np.ndarray, sync: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Anchor times, op ends and op arrivals (int64 ns) with host times ``h`` (A,), durations ``d`` (K,) and the sync
        edges of the anchors in ``sync`` (bool, A) kept (module docstring)."""
        h, d = _int64(h), _int64(d)  # (read, never written: no copy where int64 already)
        if h.size != self.n_anchors or d.size != self.n_ops or sync.size != self.n_anchors:
            raise ValueError("replay: host times, durations or syncs do not match the graph")
        t, end, arrival = self.t0.copy(), self.end0.copy(), self.start0.copy()
        if self.n_ops == 0 or self.n_anchors == 0:
            return t, end, arrival
        args = (self.n_anchors, self.n_ops, self.first_a, self.first_k, self.t0, h, d, self.g_lag, self.l_lag, self.fixed,
                self.ret, self.dep_lag, self.pre_dur, np.asarray(sync, np.bool_), self.anchor, self.dep, self.target,
                self.also_off, self.also_op, self.grp_off, self.grp_of_op, self.mem_off, self.mem_of_grp, t, end, arrival,
                np.full(self.n_groups, NEG, np.int64))
        visit = _compiled().visit
        visit(self.order, 0, self.n_acyclic, *args)
        n = self.order.size
        for _ in range(MAX_SWEEPS if n > self.n_acyclic else 0):  # (a cyclic part, from the recorded times)
            if not visit(self.order, self.n_acyclic, n, *args):
                break
        return t, end, arrival

    def critical_paths(self, h: np.ndarray, d: np.ndarray, sync: np.ndarray, times: tuple[np.ndarray, np.ndarray, np.ndarray],
                       sinks: list[int]) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
        """One critical path of the replay ``times`` (:meth:`replay`'s ``(t, end, arrival)`` with host times ``h``, durations
        ``d`` and the sync edges of ``sync``) into each node of ``sinks`` (an anchor ``i``, or ``n_anchors + n_ops + k`` for op
        ``k``'s end), walked back to a source: per sink, the anchors whose host time lies on it, the ops whose duration
        does and the anchors whose sync edge does (int64 indices). None where the graph has a cycle (its times are no
        longest paths) or a walk finds a node whose time no term gave."""
        if self.order.size > self.n_acyclic:
            return None
        t, end, arrival = times
        h, d = _int64(h), _int64(d)
        buf_h, buf_d, buf_s = np.empty(self.n_anchors, np.int64), np.empty(self.n_ops, np.int64), np.empty(self.n_anchors, np.int64)
        out = []
        for v in sinks:
            nh, nd, ns, source = _compiled().critical_walk(
                v, self.n_anchors, self.n_ops, self.first_a, self.first_k, t, end, arrival, h, d, self.g_lag, self.l_lag,
                self.fixed, self.ret, self.dep_lag, self.pre_dur, np.asarray(sync, np.bool_), self.anchor, self.dep,
                self.target, self.also_off, self.also_op, self.grp_off, self.grp_of_op, self.mem_off, self.mem_of_grp,
                buf_h, buf_d, buf_s)
            if not source:
                return None
            out.append((buf_h[:nh].copy(), buf_d[:nd].copy(), buf_s[:ns].copy()))
        return out
