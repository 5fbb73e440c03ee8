"""Communication kernels whose peers the window does not hold: their end is bound by ranks the trace does not show.

A collective or point-to-point kernel runs until its peers arrive: its recorded time is its wait for them and then its
transfer. Where the window holds the peers' traces, the kernel is a member of a cross-rank instance (:mod:`.what_if`),
and the replay moves its end with the last arrival. Where it does not (one rank's trace of a larger job, or a
collective the matching left unpaired) of a trace that names its rank (one process of a distributed job: its peers
are other processes; ``nn.DataParallel``'s one process holds every device's kernels and names no rank), the replay
keeps the peers where the trace shows them. The kernel's *transfer* is the shortest recorded kernel of its name on its
rank (the instance that waited least); the rest of each kernel's time is its wait, so the peers arrived at its end less
its transfer. In a replay it starts no earlier than that arrival (``fixed``, :mod:`.sweep`) and lasts its transfer:
a what-if that moves its rank's host earlier gives it an earlier end only where it was the one the peers waited for.
Without this (HTA's ``trace_diff/control``, rank 3 of 8), its ``SendRecv`` kernels moved earlier with its host, and a
what-if gave back more than all of the device's idle time in the window. The replay of the trace's own times is
unchanged: each such kernel ends at its recorded end there.

That answers for the rank alone: its host or device work removed, the collectives still wait for the other ranks as
recorded. A cause that every rank holds alike (the same program's dispatch, Python or syncs on each rank of a data- or
tensor-parallel job) gives nothing back so, though it may hold the whole critical path. So a window of one ranked trace
whose collectives' peers it does not hold is also replayed with those ranks taken to run *alike* (:func:`alike_job`):
each such collective keeps its recorded duration, its wait for the others included, and starts when this rank's launch
and stream let it (no earlier start pinned), so the others arrive as much later than this rank as they did; a cause
removed then is removed on every rank at once (the what-if's rows of ``rank`` -1). Only where the trace shows the rank
in step with the others: its waits inside those collectives (each one's recorded duration less its transfer), summed,
at most the window's noise floor. A rank that waited longer for the others (a straggler's peer) shows them slower for
reasons its trace cannot tell (their own work, or device work their host time hid behind), and a cause removed on it
need not move them alike: no such rows, and the rank's own rows say what the others would give, the trace cannot tell
(:attr:`.what_if_windows.WindowWhatIf.unseen_wait_ns`). Point-to-point kernels (send, receive, ``SendRecv``: by name,
:data:`ALIKE_TYPES`) stay pinned: a pipeline's neighbouring stage is not this one's like. The trace cannot tell whether
the other ranks hold the cause too: the finding says that it assumes so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..job.comm_types import collective_type
from .dependency_graph import RankGraph

ALIKE_TYPES = frozenset({"allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall"})
"""Collective types (:func:`..job.comm_types.collective_type` of a kernel's name) whose unseen peers a window of one
rank takes to run alike (:func:`alike_job`): every rank of the group runs the collective; not point-to-point."""


def alone(comm: np.ndarray, dep: np.ndarray, mem_op: np.ndarray) -> np.ndarray:
    """Per device op of the window (the ranks' ops concatenated): a communication kernel of a ranked trace (``comm``,
    bool: the caller gives only those) with no dependency edge (``dep`` -1) that is no member of a cross-rank instance
    (``mem_op``, indices of members)."""
    out = np.asarray(comm, bool) & (np.asarray(dep) < 0)
    out[np.asarray(mem_op, np.int64)] = False
    return out


def transfers(d: np.ndarray, lone: np.ndarray, key: np.ndarray) -> np.ndarray:
    """``d`` (int64 ns per op) with each op of ``lone`` given the least duration of the ``lone`` ops of its ``key`` (its
    rank and kernel name, as one int64): its transfer (module docstring). Returns a new array."""
    out = np.asarray(d, np.int64).copy()
    rows = np.flatnonzero(lone)
    if rows.size == 0:
        return out
    codes, inv = np.unique(np.asarray(key, np.int64)[rows], return_inverse=True)
    least = np.full(codes.size, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(least, inv, out[rows])
    out[rows] = least[inv]
    return out


def pinned_fixed(fixed: np.ndarray, end: np.ndarray, d: np.ndarray, lone: np.ndarray) -> np.ndarray:
    """``fixed`` (int64 ns per op) with each op of ``lone`` raised to when its peers arrived: its recorded ``end`` less
    its transfer ``d`` (:func:`transfers`). Returns a new int64 array."""
    out = np.asarray(fixed, np.int64).copy()
    arrive = np.asarray(end, np.int64) - np.asarray(d, np.int64)
    out[lone] = np.maximum(out[lone], arrive[lone])
    return out


def _collective_names(g: RankGraph) -> np.ndarray:
    """(K,) bool per device op of ``g``: its kernel's name runs a collective of :data:`ALIKE_TYPES` (one look-up per
    distinct name)."""
    types = np.array([collective_type(str(n)) in ALIKE_TYPES for n in g.names] + [False], bool)  # (-1: no name)
    return types[np.asarray(g.name, np.int64)]


def unseen_waits(job: Any, graphs: list[RankGraph]) -> tuple[int, np.ndarray]:
    """The waits of a window of one ranked trace for the ranks its collectives' peers are (module docstring): each
    communication kernel of :func:`alone` (no dependency edge, no cross-rank instance of ``job``, a
    :class:`.what_if.WindowJob` of ``graphs``) whose name runs a collective of :data:`ALIKE_TYPES`, its recorded
    duration less its transfer, summed (ns), and those ops (bool, K); ``(-1, none)`` where the window is not one trace
    or has no such collective."""
    if len(graphs) != 1 or not graphs[0].ranked or not graphs[0].comm.any():
        return -1, np.zeros(0, bool)
    g = graphs[0]
    ops = alone(g.comm, g.dep, job.mem_op) & _collective_names(g)
    if not ops.any():
        return -1, ops
    return int((np.asarray(g.d)[ops] - np.asarray(job.d)[ops]).sum()), ops


def in_step(waits: int, floor: int) -> bool:
    """Whether a window of one ranked trace runs in step with the ranks it does not hold: it has collectives waiting
    for them (:func:`unseen_waits`, ``waits`` >= 0) and they waited at most ``floor`` (ns, the window's noise floor)
    in all. Only then are those ranks taken alike (:func:`alike_job`)."""
    return 0 <= waits <= floor


def alike_job(job: Any, graphs: list[RankGraph], floor: int) -> tuple[Any, np.ndarray] | None:
    """``job`` (a :class:`.what_if.WindowJob` of ``graphs``) with the other ranks taken to run alike (module
    docstring), and which ops that changes: ``(job, ops)``, each op of ``ops`` (bool, K) with its recorded duration and
    earliest start (its graph's ``d`` and ``fixed``) in place of its transfer and its peers' arrival; None where the
    window is not in step with those ranks (:func:`in_step`). Its replay of the trace's own times gives them exactly,
    as the job's does; its graph in topological order is its own (built at its first replay)."""
    waits, ops = unseen_waits(job, graphs)
    if not in_step(waits, floor):
        return None
    g = graphs[0]
    return replace(job, d=np.where(ops, g.d, job.d), fixed=np.where(ops, g.fixed, job.fixed), sweep=None), ops


def alike_inputs(make: Callable, ops: np.ndarray, d: np.ndarray) -> Callable:
    """``make`` with the durations of the ops of ``ops`` (bool) taken from ``d``: a what-if's inputs (:data:`.what_if_plan.Make`) on
    the job whose unseen ranks run alike (:func:`alike_job`)."""
    def made(ia, ik, isx):
        h, d_made, drop = make(ia, ik, isx)
        return h, np.where(ops[ik], d[ik], d_made), drop
    return made
