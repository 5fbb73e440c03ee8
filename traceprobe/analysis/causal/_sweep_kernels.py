"""The compiled loops of :mod:`.sweep` (numba): Kahn's topological order, and the replay's sweep over it.

Node numbering and formulas: :mod:`.sweep`'s docstring. Imported by :func:`.sweep._compiled` only, where a replay
runs."""

from __future__ import annotations

import numba
import numpy as np

NEG = -(2**60)


@numba.njit(cache=True)
def topological_order(off, succ, indegree):  # pragma: no cover - compiled
    """Kahn's algorithm (``indegree`` is consumed: counted down to zero): ``(order, n)``; ``order[:n]`` the nodes every predecessor of which comes earlier, ``order[n:]``
    the nodes on or after a cycle, in node order. Ready nodes are taken last in, first out (a stack, seeded in
    reverse node order), so that the order follows one chain as far as it can before the next: the sweep then reads
    memory mostly in sequence."""
    n = indegree.size
    deg = indegree  # (counted down in place: the caller's scratch, not a copy of a 4-byte count a node)
    order = np.empty(n, succ.dtype)  # (node ids: int32 where they fit, as ``succ``)
    stack = np.empty(n, succ.dtype)
    top, tail = 0, 0
    for v in range(n - 1, -1, -1):
        if deg[v] == 0:
            stack[top] = v
            top += 1
    while top > 0:
        top -= 1
        v = stack[top]
        order[tail] = v
        tail += 1
        for e in range(off[v + 1] - 1, off[v] - 1, -1):
            w = succ[e]
            deg[w] -= 1
            if deg[w] == 0:
                stack[top] = w
                top += 1
    n_acyclic = tail
    for v in range(n):  # (the nodes on or after a cycle, which never became ready)
        if deg[v] > 0:
            order[tail] = v
            tail += 1
    return order, n_acyclic


@numba.njit(cache=True)
def counts_into(x, out):  # pragma: no cover - compiled
    """``out[v] += 1`` for each value ``v`` of ``x`` (``np.bincount`` into an array of the caller's dtype, without its
    int64 array of counts)."""
    for e in range(x.size):
        out[x[e]] += 1


@numba.njit(cache=True)
def csr_fill(src, dst, off, succ):  # pragma: no cover - compiled
    """The targets ``dst`` of the edges ``src -> dst`` written into ``succ`` in rows by ``src`` (``off``: the rows'
    offsets), each row in the edges' order: a stable counting sort, without the argsort's int64 index an edge."""
    pos = off[:-1].copy()
    for e in range(src.size):
        s = src[e]
        succ[pos[s]] = dst[e]
        pos[s] += 1


@numba.njit(cache=True)
def visit(order, lo, hi, n_a, n_k, first_a, first_k, t0, h, d, g_lag, l_lag, fixed, ret, dep_lag, pre_dur, sync, anchor,
          dep, target, also_off, also_op, grp_off, grp_of_op, mem_off, mem_of_grp, t, end, arrival,
          last):  # pragma: no cover - compiled
    """Each node of ``order[lo:hi]`` computed from the current times of its predecessors, in place in ``t``, ``end``,
    ``arrival`` (and ``last``, each instance's latest arrival); returns whether any time changed. One function, no
    calls per node: a call per node would pass every array."""
    ar, en, gr = n_a, n_a + n_k, n_a + 2 * n_k
    changed = False
    for j in range(lo, hi):
        v = order[j]
        if v < ar:  # an anchor: the latest of its recorded time (a rank's first), its sync edges, its host chain
            i = v
            x = t0[i] if first_a[i] else NEG
            if sync[i]:
                tg = target[i]
                if tg >= 0:
                    y = end[tg] + ret[i]
                    if y > x:
                        x = y
                for e in range(also_off[i], also_off[i + 1]):
                    y = end[also_op[e]] + ret[i]
                    if y > x:
                        x = y
            if not first_a[i]:
                y = t[i - 1] + h[i]
                if y > x:
                    x = y
            if x != t[i]:
                t[i] = x
                changed = True
        elif v < en:  # an op's arrival: the latest of its launch, what it waited for (or its fixed start), its stream
            k = v - ar
            a = anchor[k]
            o = NEG
            if a >= 0:
                if first_a[a]:
                    o = t[a] - pre_dur[a] + l_lag[k]
                else:
                    o = t[a - 1] + h[a] - pre_dur[a] + l_lag[k]
            q = dep[k]
            y = end[q] + dep_lag[k] if q >= 0 else fixed[k]
            if y > o:
                o = y
            if not first_k[k]:
                y = end[k - 1] + g_lag[k]
                if y > o:
                    o = y
            if o != arrival[k]:
                arrival[k] = o
                changed = True
        elif v < gr:  # an op's end: the latest of its arrival and its instances, plus its duration
            k = v - en
            x = arrival[k]
            for e in range(grp_off[k], grp_off[k + 1]):
                y = last[grp_of_op[e]]
                if y > x:
                    x = y
            x += d[k]
            if x != end[k]:
                end[k] = x
                changed = True
        else:  # a cross-rank instance
            c = v - gr
            x = NEG
            for e in range(mem_off[c], mem_off[c + 1]):
                y = arrival[mem_of_grp[e]]
                if y > x:
                    x = y
            if x != last[c]:
                last[c] = x
                changed = True
    return changed


@numba.njit(cache=True)
def critical_walk(v, n_a, n_k, first_a, first_k, t, end, arrival, h, d, g_lag, l_lag, fixed, ret, dep_lag, pre_dur, sync,
                  anchor, dep, target, also_off, also_op, grp_off, grp_of_op, mem_off, mem_of_grp, out_h, out_d,
                  out_s):  # pragma: no cover - compiled
    """One critical path of a replay, walked back from node ``v`` to a source (a rank's first anchor, a fixed start):
    at each node the predecessor whose term gave its replayed time (:mod:`.sweep`'s formulas, the host chain first,
    then a sync's edges; an op's stream, then its launch, then what it waited for; an end's arrival, then its
    instances). Writes the anchors whose host time lies on the path (``out_h``: the host chain's edge into the anchor,
    or a launch edge out of the anchor before it), the ops whose duration does (``out_d``) and the anchors whose sync
    edge does (``out_s``); returns their counts, and whether the walk reached a source (where no term gave a node's time,
    which a graph whose times are its longest paths never has, the path is cut short: no bound)."""
    ar, en, gr = n_a, n_a + n_k, n_a + 2 * n_k
    nh, nd, ns = 0, 0, 0
    source = False
    for _ in range(n_a + 2 * n_k + mem_off.size + 1):  # (each step goes to an earlier node of a topological order)
        if v < ar:  # an anchor: t_i = max(t_{i-1} + h_i, its sync edges)
            i = v
            if first_a[i]:
                source = True
                break
            if t[i - 1] + h[i] == t[i]:
                out_h[nh] = i
                nh += 1
                v = i - 1
                continue
            nxt = -1
            if sync[i]:
                tg = target[i]
                if tg >= 0 and end[tg] + ret[i] == t[i]:
                    nxt = tg
                for e in range(also_off[i], also_off[i + 1]):
                    if nxt < 0 and end[also_op[e]] + ret[i] == t[i]:
                        nxt = also_op[e]
            if nxt < 0:
                break
            out_s[ns] = i
            ns += 1
            v = en + nxt
        elif v < en:  # an op's arrival: its stream, its launch, what it waited for
            k = v - ar
            if not first_k[k] and end[k - 1] + g_lag[k] == arrival[k]:
                v = en + k - 1
                continue
            a = anchor[k]
            if a >= 0:
                if first_a[a]:
                    if t[a] - pre_dur[a] + l_lag[k] == arrival[k]:
                        source = True
                        break
                elif t[a - 1] + h[a] - pre_dur[a] + l_lag[k] == arrival[k]:
                    out_h[nh] = a
                    nh += 1
                    v = a - 1
                    continue
            q = dep[k]
            if q >= 0 and end[q] + dep_lag[k] == arrival[k]:
                v = en + q
                continue
            source = q < 0 and fixed[k] == arrival[k]  # (a fixed start)
            break
        elif v < gr:  # an op's end: max(arrival, its instances) + d
            k = v - en
            out_d[nd] = k
            nd += 1
            x = end[k] - d[k]
            if arrival[k] == x:
                v = ar + k
                continue
            nxt = -1
            for e in range(grp_off[k], grp_off[k + 1]):
                c = grp_of_op[e]
                m = NEG
                for f in range(mem_off[c], mem_off[c + 1]):
                    if arrival[mem_of_grp[f]] > m:
                        m = arrival[mem_of_grp[f]]
                if nxt < 0 and m == x:
                    nxt = c
            if nxt < 0:
                break
            v = gr + nxt
        else:  # a cross-rank instance: its latest arrival
            c = v - gr
            best, m = -1, NEG
            for f in range(mem_off[c], mem_off[c + 1]):
                if arrival[mem_of_grp[f]] > m:
                    m, best = arrival[mem_of_grp[f]], mem_of_grp[f]
            if best < 0:
                break
            v = ar + best
    return nh, nd, ns, source
