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
"""

from __future__ import annotations

import numpy as np


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
