"""The compiled loops of :mod:`.sweep` (numba): Kahn's topological order, and the replay's sweep over it.

Node numbering and formulas: :mod:`.sweep`'s docstring. Imported by :func:`.sweep._compiled` only, where a replay
runs."""

from __future__ import annotations

import numba
import numpy as np

NEG = -(2**60)


@numba.njit(cache=True)
def topological_order(off, succ, indegree):  # pragma: no cover - compiled
    """Kahn's algorithm: ``(order, n)``; ``order[:n]`` the nodes every predecessor of which comes earlier (ready nodes
    first in, first out, seeded in node order), ``order[n:]`` the nodes on or after a cycle, anchors, arrivals,
    instances, then ends (the order the repeated sweeps visit them in)."""
    n = indegree.size
    deg = indegree.copy()
    order = np.empty(n, np.int64)
    head, tail = 0, 0
    for v in range(n):
        if deg[v] == 0:
            order[tail] = v
            tail += 1
    while head < tail:
        v = order[head]
        head += 1
        for e in range(off[v], off[v + 1]):
            w = succ[e]
            deg[w] -= 1
            if deg[w] == 0:
                order[tail] = w
                tail += 1
    n_acyclic = tail
    for v in range(n):  # (the nodes on or after a cycle, which never became ready)
        if deg[v] > 0:
            order[tail] = v
            tail += 1
    return order, n_acyclic


@numba.njit(cache=True)
def _anchor(i, first_a, t0, H, ret, sync, target, also_off, also_op, t, end):  # pragma: no cover - compiled
    x = t0[i] if first_a[i] else NEG
    if sync[i]:
        tg = target[i]
        if tg >= 0:
            v = end[tg] + ret[i]
            if v > x:
                x = v
        for e in range(also_off[i], also_off[i + 1]):
            v = end[also_op[e]] + ret[i]
            if v > x:
                x = v
    m = x - H[i]
    if m < NEG:
        m = NEG
    if not first_a[i]:
        p = t[i - 1] - H[i - 1]
        if p > m:
            m = p
    return H[i] + m


@numba.njit(cache=True)
def _arrival(k, first_a, first_k, h, l_lag, fixed, dep_lag, pre_dur, g_lag, anchor, dep, t, end, own):  # pragma: no cover
    a = anchor[k]
    o = NEG
    if a >= 0:
        if first_a[a]:
            o = t[a] - pre_dur[a] + l_lag[k]
        else:
            o = t[a - 1] + h[a] - pre_dur[a] + l_lag[k]
    q = dep[k]
    other = end[q] + dep_lag[k] if q >= 0 else fixed[k]
    if other > o:
        o = other
    own[k] = o
    if first_k[k]:
        return o
    p = end[k - 1] + g_lag[k]
    return p if p > o else o


@numba.njit(cache=True)
def _end(k, first_k, P, d, grp_off, grp_of_op, last, own, end):  # pragma: no cover - compiled
    ext = own[k]
    for e in range(grp_off[k], grp_off[k + 1]):
        v = last[grp_of_op[e]]
        if v > ext:
            ext = v
    m = ext + d[k] - P[k]
    if m < NEG:
        m = NEG
    if not first_k[k]:
        p = end[k - 1] - P[k - 1]
        if p > m:
            m = p
    return P[k] + m


@numba.njit(cache=True)
def _group(c, mem_off, mem_of_grp, arrival):  # pragma: no cover - compiled
    v = NEG
    for e in range(mem_off[c], mem_off[c + 1]):
        x = arrival[mem_of_grp[e]]
        if x > v:
            v = x
    return v


@numba.njit(cache=True)
def sweep(order, n_acyclic, max_sweeps, n_a, n_k, first_a, first_k, t0, H, h, P, d, g_lag, l_lag, fixed, ret, dep_lag,
          pre_dur, sync, anchor, dep, target, also_off, also_op, grp_off, grp_of_op, mem_off, mem_of_grp, t, end, arrival,
          own, last):  # pragma: no cover - compiled
    """Every node's replayed time, in place in ``t``, ``end``, ``arrival`` (which hold the recorded times on entry):
    ``order[:n_acyclic]`` once, then ``order[n_acyclic:]`` again and again until a sweep changes nothing (at most
    ``max_sweeps``). Returns the sweeps made over the cyclic part."""
    ar, en, gr = n_a, n_a + n_k, n_a + 2 * n_k
    for j in range(n_acyclic):  # (own is written by an arrival before its end reads it: arrival -> end is an edge)
        v = order[j]
        if v < ar:
            t[v] = _anchor(v, first_a, t0, H, ret, sync, target, also_off, also_op, t, end)
        elif v < en:
            k = v - ar
            arrival[k] = _arrival(k, first_a, first_k, h, l_lag, fixed, dep_lag, pre_dur, g_lag, anchor, dep, t, end, own)
        elif v < gr:
            k = v - en
            end[k] = _end(k, first_k, P, d, grp_off, grp_of_op, last, own, end)
        else:
            last[v - gr] = _group(v - gr, mem_off, mem_of_grp, arrival)
    rest = order[n_acyclic:]
    if rest.size == 0:
        return 0
    # the cyclic part: anchors, arrivals, instances, then ends (an end reads its arrival's own and its instances)
    kind = np.where(rest < ar, 0, np.where(rest < en, 1, np.where(rest < gr, 3, 2)))
    rest = rest[np.argsort(kind * (gr + last.size) + rest, kind="mergesort")]
    sweeps = 0
    for _ in range(max_sweeps):
        sweeps += 1
        changed = False
        for v in rest:
            if v < ar:
                x = _anchor(v, first_a, t0, H, ret, sync, target, also_off, also_op, t, end)
                if x != t[v]:
                    t[v] = x
                    changed = True
            elif v < en:
                k = v - ar
                x = _arrival(k, first_a, first_k, h, l_lag, fixed, dep_lag, pre_dur, g_lag, anchor, dep, t, end, own)
                if x != arrival[k]:
                    arrival[k] = x
                    changed = True
            elif v < gr:
                k = v - en
                x = _end(k, first_k, P, d, grp_off, grp_of_op, last, own, end)
                if x != end[k]:
                    end[k] = x
                    changed = True
            else:
                x = _group(v - gr, mem_off, mem_of_grp, arrival)
                if x != last[v - gr]:
                    last[v - gr] = x
                    changed = True
        if not changed:
            break
    return sweeps
